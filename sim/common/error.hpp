// Typed errors: libraries throw them, each CLI verb's caller prints one line and exits.
// InputError → exit 1 (a file, a key, a value the user can fix); UsageError → exit 2.
// Messages quote user text, which may hold control bytes: a NUL would end the message
// early and a terminal escape would act, so both types show them as \xNN.
#pragma once

#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ddpsim {

inline std::string printable(std::string_view text) {
  // A message is one line a person reads: a value of 100 kB in it is shown by its ends.
  constexpr std::size_t LONGEST = 2000, END = 500;
  if (text.size() > LONGEST)
    return printable(text.substr(0, LONGEST - END)) + " … [" + std::to_string(text.size() - LONGEST) +
           " bytes left out] … " + printable(text.substr(text.size() - END));
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 && c != '\n' && c != '\t') {
      char escaped[5];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else if (byte == 0x7f) {
      out += "\\x7f";
    } else {
      out += c;
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
