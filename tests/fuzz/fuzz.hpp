// What every harness shares: a parser may reject its input only with the typed errors the CLIs
// turn into one line (InputError, UsageError); any other exception is a bug the fuzzer reports,
// like a crash. Parsers that read files get the input through a temporary file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <string_view>

#include <unistd.h>

#include "common/error.hpp"

namespace ddpsim::fuzz {

template <class Body>
void expect_typed_errors(Body body) {
  try {
    body();
  } catch (const InputError&) {
  } catch (const UsageError&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "untyped exception (would reach the user as an internal error): %s\n", e.what());
    std::abort();
  }
}

// The input as a file, rewritten for each run (one per process: libFuzzer runs inputs in turn).
inline const std::string& as_file(std::string_view data, const char* suffix) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/ddpsim-fuzz." + std::to_string(::getpid()) + suffix;
  }();
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(data.data(), static_cast<std::streamsize>(data.size()));
  return path;
}

inline std::string_view text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace ddpsim::fuzz
