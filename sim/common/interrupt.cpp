#include "common/interrupt.hpp"

#include <atomic>
#include <csignal>
#include <cstring>

#include <sys/wait.h>
#include <unistd.h>

namespace ddpsim {

namespace {

// Fixed storage the handler can read without allocating: only async-signal-safe calls there.
constexpr int SLOTS = 64;
constexpr std::size_t PATH_BYTES = 4096;
enum State : int { FREE, CLAIMED, READY };
struct Slot {
  std::atomic<int> state{FREE};
  bool folder = false;  // removed only when empty, after the files
  char path[PATH_BYTES];
};
Slot slots[SLOTS];
constexpr int WORKERS = 1024;
std::atomic<pid_t> workers[WORKERS];  // 0: free
char program_name[128] = "ddpsim";
bool installed = false;
bool silent = false;

void put(const char* text) {
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, text, std::strlen(text));
}

extern "C" void on_signal(int signal) {
  for (auto& worker : workers)
    if (const pid_t pid = worker.load(); pid > 0) ::kill(pid, signal);
  for (auto& worker : workers)
    if (const pid_t pid = worker.load(); pid > 0) ::waitpid(pid, nullptr, 0);  // they remove their own files
  int removed = 0;
  for (auto& slot : slots)
    if (slot.state.load() == READY && !slot.folder && ::unlink(slot.path) == 0) ++removed;
  for (int pass = 0; pass < 2; ++pass)  // a parent folder empties once its child is gone
    for (auto& slot : slots)
      if (slot.state.load() == READY && slot.folder) ::rmdir(slot.path);
  if (!silent) {
    put(program_name);
    put(": stopped by ");
    put(signal == SIGINT ? "SIGINT (interrupted)" : signal == SIGTERM ? "SIGTERM" : "SIGHUP");
    put(removed ? "; its unfinished output files were removed\n" : "; no output file was being written\n");
  }
  // Blocked inside its own handler: the signal ends the process as soon as the handler returns.
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

}  // namespace

void install_interrupt_handler(const char* program) {
  std::strncpy(program_name, program, sizeof program_name - 1);
  installed = true;
  reinstall_interrupt_handler();
}

void reinstall_interrupt_handler() {
  if (!installed) return;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&action.sa_mask, signal);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal, &action, nullptr);
}

int remember_temporary(const std::filesystem::path& path, bool folder) {
  const std::string text = std::filesystem::absolute(path).string();
  if (text.size() >= PATH_BYTES) return -1;
  for (int i = 0; i < SLOTS; ++i) {
    int expected = FREE;
    if (slots[i].state.compare_exchange_strong(expected, CLAIMED)) {
      std::memcpy(slots[i].path, text.c_str(), text.size() + 1);
      slots[i].folder = folder;
      slots[i].state.store(READY);
      return i;
    }
  }
  return -1;
}

void forget_temporary(int slot) {
  if (slot >= 0) slots[slot].state.store(FREE);
}

int remember_worker(pid_t pid) {
  for (int i = 0; i < WORKERS; ++i) {
    pid_t expected = 0;
    if (workers[i].compare_exchange_strong(expected, pid)) return i;
  }
  return -1;
}

void forget_worker(int slot) {
  if (slot >= 0) workers[slot].store(0);
}

void become_worker() {
  // Written only where set: each page written would be copied from the parent.
  for (auto& worker : workers)
    if (worker.load() != 0) worker.store(0);
  for (auto& slot : slots)
    if (slot.state.load() != FREE) slot.state.store(FREE);
  silent = true;
}

}  // namespace ddpsim
