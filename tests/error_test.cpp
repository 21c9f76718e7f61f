// Error messages quote user text: control bytes and broken UTF-8 show as \xNN, text stays.
#include "common/error.hpp"

#include <doctest/doctest.h>

using ddpsim::printable;

TEST_CASE("printable keeps UTF-8 text and escapes control bytes and stray bytes") {
  CHECK(printable("caf\xc3\xa9 \xe2\x82\xac 5 \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x82\xac 5 \xf0\x9f\x98\x80");
  CHECK(printable(std::string_view("a\0b", 3)) == "a\\x00b");
  CHECK(printable("\x1b[31mred") == "\\x1b[31mred");
  CHECK(printable("line\ttab\nnext\x7f") == "line\ttab\nnext\\x7f");
  CHECK(printable("bad \xff byte") == "bad \\xff byte");
  CHECK(printable("cut \xe2\x82") == "cut \\xe2\\x82");         // a sequence missing its last byte
  CHECK(printable("lead \xc3x") == "lead \\xc3x");              // a lead byte without continuation
  CHECK(printable("overlong \xc0\xaf") == "overlong \\xc0\\xaf");  // never valid as a lead
  CHECK(printable("\x80 alone") == "\\x80 alone");
}

TEST_CASE("a long message keeps its ends") {
  const std::string long_text(5000, 'x');
  const std::string shown = printable(long_text);
  CHECK(shown.size() < 2100);
  CHECK(shown.find("[3000 bytes left out]") != std::string::npos);
}
