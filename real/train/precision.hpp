// Mixed precision for ddptrain: bf16 autocast around forward passes, what torch.autocast does in
// Python. Parameters, gradients, the allreduce and the optimizer stay in fp32; bf16 needs no
// loss scaling. Works on CUDA and on CPU (so it is tested without a GPU).
#pragma once

#include <string>

#include <torch/torch.h>

namespace ddptrain {

enum class Precision { fp32, bf16 };

Precision parse_precision(const std::string& text);
const char* precision_name(Precision precision);

// Autocast to bf16 on `device`'s type while alive (nothing for fp32). Leaving the outermost scope
// drops autocast's cache of cast weights, as Python's context manager does: otherwise the next
// forward would reuse bf16 copies of weights the optimizer has since updated.
class AutocastScope {
 public:
  AutocastScope(const torch::Device& device, Precision precision);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  c10::DeviceType type_;
  bool active_ = false, was_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kFloat;
};

}  // namespace ddptrain
