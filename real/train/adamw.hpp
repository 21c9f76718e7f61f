// ddptrain's AdamW: the mathematics of torch::optim::AdamW (decoupled weight decay, bias
// correction, eps added to sqrt(v)/sqrt(1 - beta2^t)), in one of three implementations, because
// LibTorch's own updates parameter by parameter and a step of ~100 small kernels costs a GPU more
// than the arithmetic does (the peer's multi-tensor step is 2.7x faster on an H100).
//   per-param: torch::optim::AdamW itself, the reference.
//   foreach:   LibTorch's _foreach_* operations over every parameter at once (LibTorch >= 1.13).
//   fused:     at::_fused_adamw_, one kernel launch for the whole update (CUDA LibTorch >= 2,
//              built with DDPTRAIN_FUSED_ADAMW=ON).
// Every implementation saves and loads torch::optim::AdamW's archive format, so a checkpoint
// written under one resumes under another, and checkpoints of earlier ddptrain versions load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace ddptrain {

enum class OptimizerImpl { per_param, foreach, fused };

std::string optimizer_impl_name(OptimizerImpl impl);
// Whether this build and `device` can run the fused kernel.
bool fused_adamw_available(const torch::Device& device);
// --optimizer-impl: auto (fused where available, else foreach), per-param, foreach or fused; a
// ddpsim::UsageError naming the option for another word, or for fused where it cannot run.
OptimizerImpl resolve_optimizer_impl(const std::string& wanted, const torch::Device& device);

class AdamW {
 public:
  AdamW(std::vector<torch::Tensor> params, double lr, double weight_decay, OptimizerImpl impl);

  // The learning-rate schedule sets it before each step.
  void set_lr(double lr);
  double lr() const { return lr_; }
  // Parameters without a gradient are skipped and keep their step count, as LibTorch's do.
  void step();
  void zero_grad();
  OptimizerImpl impl() const { return impl_; }
  void save(torch::serialize::OutputArchive& archive);
  void load(torch::serialize::InputArchive& archive);

 private:
  // The moments move between torch_'s per-parameter state and the vectors below: in for
  // save() and the per-param implementation, out after load() for the others.
  void export_state();
  void import_state();
  void step_foreach(const std::vector<std::size_t>& live);
  void step_fused(const std::vector<std::size_t>& live);

  OptimizerImpl impl_;
  double lr_, weight_decay_;
  static constexpr double beta1_ = 0.9, beta2_ = 0.999, eps_ = 1e-8;  // torch::optim::AdamW's defaults
  std::vector<torch::Tensor> params_;
  // per-param steps through it; every implementation borrows its param group, zero_grad() and
  // archive format.
  torch::optim::AdamW torch_;
  // foreach and fused: each parameter's moments (undefined before its first step) and step count.
  std::vector<torch::Tensor> exp_avg_, exp_avg_sq_;
  std::vector<std::int64_t> steps_;
  // fused: the step counts again, as the float tensors on the device the kernel reads them from;
  // undefined until the first fused step after construction or load().
  std::vector<torch::Tensor> step_tensors_;
};

}  // namespace ddptrain
