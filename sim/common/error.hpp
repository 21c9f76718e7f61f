// Typed errors: libraries throw them, each CLI verb's caller prints one line and exits.
// InputError → exit 1 (a file, a key, a value the user can fix); UsageError → exit 2.
// Messages quote user text, which may hold control bytes or broken UTF-8: a NUL would end the
// message early, a terminal escape would act, a stray byte would garble the line, so both
// types show them as \xNN.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddpsim {

// A byte as \xNN, the one form every message and output shows an unprintable byte in.
inline std::string hex_escape(unsigned char byte) {
  char escaped[5];
  std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
  return escaped;
}

inline std::string printable(std::string_view text) {
  // A message is one line a person reads: a value of 100 kB in it is shown by its ends.
  constexpr std::size_t LONGEST = 2000, END = 500;
  if (text.size() > LONGEST)
    return printable(text.substr(0, LONGEST - END)) + " … [" + std::to_string(text.size() - LONGEST) +
           " bytes left out] … " + printable(text.substr(text.size() - END));
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte < 0x20 && byte != '\n' && byte != '\t') || byte == 0x7f) {
      out += hex_escape(byte);
    } else if (byte < 0x80) {
      out += text[i];
    } else {  // kept only as a whole UTF-8 sequence; a stray byte would garble the terminal's line
      const std::size_t length = byte >= 0xc2 && byte <= 0xdf ? 2 : byte >= 0xe0 && byte <= 0xef ? 3
                                 : byte >= 0xf0 && byte <= 0xf4                      ? 4
                                                                                     : 0;
      std::size_t k = 1;
      while (k < length && i + k < text.size() && (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80) ++k;
      if (length > 0 && k == length) {
        out.append(text.substr(i, length));
        i += length - 1;
      } else {
        out += hex_escape(byte);
      }
    }
  }
  return out;
}

struct InputError : std::runtime_error {
  explicit InputError(std::string_view message) : std::runtime_error(printable(message)) {}
};

struct UsageError : std::runtime_error {
  explicit UsageError(std::string_view message) : std::runtime_error(printable(message)) {}
};

}  // namespace ddpsim
