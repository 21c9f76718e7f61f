// The safetensors format (8-byte little-endian header size, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw bytes), read and written on nlohmann/json: no
// C++ library for it ships in Debian, and the format is small enough to own.
#pragma once

#include <map>
#include <string>

#include <torch/torch.h>

namespace ddptrain {

// Tensors by name, on CPU. F32, F16, BF16, F64, I64 and I32 are understood; other dtypes and
// any inconsistency (offsets outside the file, sizes that do not match the shape) throw
// ddpsim::InputError naming the file and the tensor.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);
// Writes atomically (temp + rename).
void write_safetensors(const std::string& path, const std::map<std::string, torch::Tensor>& tensors);

struct LoadReport {
  int loaded = 0;                   // model parameters set from the file
  std::vector<std::string> absent;  // model parameters the file lacks (they keep their values)
  int unused = 0;                   // file tensors the model has no parameter for (e.g. an MLM head)
};

// Copies every file tensor whose name is a parameter of `module`, converting dtype; a shape
// mismatch throws std::runtime_error naming the tensor and both shapes.
LoadReport load_parameters(torch::nn::Module& module, const std::string& path);

}  // namespace ddptrain
