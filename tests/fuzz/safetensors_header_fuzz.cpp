// The JSON header of a safetensors file (ddptrain --init-from), with a data section of the
// size the first 4 bytes give.
#include <cstring>

#include "fuzz.hpp"
#include "model/safetensors_header.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::uint32_t data_size = 0;
  std::memcpy(&data_size, data, 4);
  ddpsim::fuzz::expect_typed_errors(
      [&] { ddptrain::parse_safetensors_header(ddpsim::fuzz::text(data + 4, size - 4), data_size, "f.safetensors"); });
  return 0;
}
