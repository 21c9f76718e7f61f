# Script mode: writes OUTPUT, a header holding the bytes of INPUT as
# `inline constexpr std::string_view ddpsim::embedded::SYMBOL`, so a binary carries its
# default data and needs no file at run time.
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
file(WRITE "${OUTPUT}.tmp"
  "// Generated from ${INPUT} by cmake/embed_text.cmake; do not edit.\n"
  "#pragma once\n#include <string_view>\n"
  "namespace ddpsim::embedded {\n"
  "inline constexpr char ${SYMBOL}_bytes[] = {${bytes}};\n"
  "inline constexpr std::string_view ${SYMBOL}{${SYMBOL}_bytes, sizeof(${SYMBOL}_bytes)};\n"
  "}  // namespace ddpsim::embedded\n")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
