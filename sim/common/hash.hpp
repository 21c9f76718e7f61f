// FNV-1a 64: a stable, dependency-free fingerprint of bytes (not a security hash) that names the
// exact trace a model came from and catches a corrupted checkpoint.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace ddpsim {

inline std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t h = 1469598103934665603ULL) {
  for (const unsigned char c : bytes) h = (h ^ c) * 1099511628211ULL;
  return h;
}

inline std::string fnv1a64_hex(std::string_view bytes) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(fnv1a64(bytes)));
  return text;
}

}  // namespace ddpsim
