// The JSON header of a safetensors file, checked without LibTorch, so that a malformed file
// (negative or overflowing shapes, offsets outside the data) never reaches an allocator and the
// parser can be fuzzed on its own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ddptrain {

struct TensorEntry {
  std::string name;
  std::string dtype;  // F32, F16, BF16, F64, I64 or I32
  std::size_t element_bytes = 0;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range inside the data section
};

// The tensors of a header whose data section holds `data_size` bytes, in header order;
// throws ddpsim::InputError naming `path`, the tensor and what was expected.
std::vector<TensorEntry> parse_safetensors_header(std::string_view header, std::uint64_t data_size,
                                                  const std::string& path);

}  // namespace ddptrain
