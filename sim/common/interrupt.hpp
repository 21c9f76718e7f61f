// A signal that ends the process (SIGINT, SIGTERM, SIGHUP) must not leave temporaries behind
// nor end silently: temporaries register here, and the handler removes them, says which signal
// stopped the program and ends it by that signal (the shell reports 128 + its number).
#pragma once

#include <sys/types.h>

#include <filesystem>

namespace ddpsim {

// Installs the handler; `program` ("ddpsim run") starts its message.
void install_interrupt_handler(const char* program);
// Installs it again (if it was installed) after a library replaced it: SimGrid's engine sets
// its own SIGINT handler, which exits from inside the signal and skips the cleanup.
void reinstall_interrupt_handler();

// Registers a temporary the handler removes; returns a slot for forget_temporary (-1 when the
// path is too long or all slots are taken: the file is then left to its owner's destructor).
// A folder (one made for outputs) is removed only if it is empty once the files are gone.
int remember_temporary(const std::filesystem::path& path, bool folder = false);
void forget_temporary(int slot);

// Registers a forked worker the handler stops with the same signal, and waits for, before the
// process ends: an interrupted parent leaves no worker running on. Returns a slot for
// forget_worker (-1 when all are taken).
int remember_worker(pid_t pid);
void forget_worker(int slot);
// In a forked worker: forget the parent's workers and temporaries, and end silently on a
// signal (the parent reports it).
void become_worker();

}  // namespace ddpsim
