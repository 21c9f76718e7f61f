#include "common/input_file.hpp"

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/error.hpp"

namespace ddpsim {

namespace {

std::mutex inputs_mutex;
std::vector<std::filesystem::path> inputs;  // every file checked, so outputs never overwrite one

}  // namespace

void check_not_input(const std::filesystem::path& path) {
  std::lock_guard lock(inputs_mutex);
  for (const auto& input : inputs) {
    std::error_code ec;
    if (std::filesystem::equivalent(input, path, ec))
      throw UsageError(path.string() + ": is also an input of this command; write the output elsewhere");
  }
}

namespace {

void check_file(const std::string& path, const char* what, std::uintmax_t cap, bool protect) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(path, ec);
  const std::string cannot = path + ": cannot open " + what;
  if (ec && ec != std::errc::no_such_file_or_directory) throw InputError(cannot + " (" + ec.message() + ")");
  if (ec || !fs::exists(status)) throw InputError(cannot + " (no such file)");
  if (fs::is_directory(status)) throw InputError(cannot + ": it is a directory");
  if (!fs::is_regular_file(status)) throw InputError(cannot + ": not a regular file (a pipe or a device)");
  const auto size = fs::file_size(path, ec);
  if (!ec && size > cap)
    throw InputError(path + ": " + std::to_string(size / MiB) + " MiB, larger than the " + std::to_string(cap / MiB) +
                     " MiB this input may be");
  if (!protect) return;
  std::lock_guard lock(inputs_mutex);
  inputs.push_back(fs::absolute(path, ec));
}

std::string read_file(const std::string& path, const char* what, std::uintmax_t cap, bool protect) {
  check_file(path, what, cap, protect);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open " + what + " (permission denied?)");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void check_input_file(const std::string& path, const char* what, std::uintmax_t cap) {
  check_file(path, what, cap, /*protect=*/true);
}

std::string read_input_file(const std::string& path, const char* what, std::uintmax_t cap) {
  return read_file(path, what, cap, /*protect=*/true);
}

std::string read_own_file(const std::string& path, const char* what, std::uintmax_t cap) {
  return read_file(path, what, cap, /*protect=*/false);
}

}  // namespace ddpsim
