// Typed errors: libraries throw them, each CLI verb's caller prints one line and exits.
// InputError → exit 1 (a file, a key, a value the user can fix); UsageError → exit 2.
#pragma once

#include <stdexcept>
#include <string>

namespace ddpsim {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace ddpsim
