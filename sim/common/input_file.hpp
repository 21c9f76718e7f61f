// Input files are regular files of bounded size: a FIFO, a device such as /dev/zero or a
// directory would otherwise hang the reader, exhaust memory or fail with a misleading parse error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace ddpsim {

constexpr std::uintmax_t MiB = 1024 * 1024;

// Throws InputError naming `path` unless it is a regular file of at most `cap` bytes;
// `what` ("JSON file", "trace") names it in the message.
void check_input_file(const std::string& path, const char* what, std::uintmax_t cap);

// Throws UsageError when `path` is a file check_input_file accepted in this process (the same
// file, by identity): outputs never overwrite an input.
void check_not_input(const std::filesystem::path& path);

// check_input_file, then the whole file.
std::string read_input_file(const std::string& path, const char* what, std::uintmax_t cap = 64 * MiB);

// The same checks for a file the command itself keeps up to date (a sweep's grid and cells),
// which its outputs may replace.
std::string read_own_file(const std::string& path, const char* what, std::uintmax_t cap = 64 * MiB);

}  // namespace ddpsim
