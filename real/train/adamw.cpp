#include "train/adamw.hpp"

#include <cmath>
#include <sstream>
#include <type_traits>

#include <torch/version.h>

#include "common/error.hpp"

// The fused kernel exists in CUDA builds of LibTorch 2 and later only; anywhere else the
// reference to it would not compile, so it stays behind this switch.
#if defined(DDPTRAIN_FUSED_ADAMW) && defined(DDPTRAIN_CUDA) && TORCH_VERSION_MAJOR >= 2
#define DDPTRAIN_HAS_FUSED_ADAMW 1
#endif

namespace ddptrain {

namespace {

// torch::optim keys its state by the parameter's TensorImpl: as the pointer's text in 1.x, as
// the pointer itself in 2.x. The archive format stays the same either way.
template <class Map>
typename Map::key_type state_key(const torch::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream text;
    text << p.unsafeGetTensorImpl();  // what c10::guts::to_string writes
    return text.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

}  // namespace

std::string optimizer_impl_name(OptimizerImpl impl) {
  switch (impl) {
    case OptimizerImpl::per_param:
      return "per-param";
    case OptimizerImpl::foreach:
      return "foreach";
    case OptimizerImpl::fused:
      return "fused";
  }
  return "?";
}

bool fused_adamw_available([[maybe_unused]] const torch::Device& device) {
#ifdef DDPTRAIN_HAS_FUSED_ADAMW
  return device.is_cuda();
#else
  return false;
#endif
}

OptimizerImpl resolve_optimizer_impl(const std::string& wanted, const torch::Device& device) {
  if (wanted == "auto") return fused_adamw_available(device) ? OptimizerImpl::fused : OptimizerImpl::foreach;
  if (wanted == "per-param") return OptimizerImpl::per_param;
  if (wanted == "foreach") return OptimizerImpl::foreach;
  if (wanted != "fused")
    throw ddpsim::UsageError("--optimizer-impl is auto, per-param, foreach or fused, got \"" + wanted + "\"");
  if (!fused_adamw_available(device)) {
#ifdef DDPTRAIN_HAS_FUSED_ADAMW
    const std::string why = "this run's device is the CPU";
#else
#ifdef DDPTRAIN_CUDA
    const std::string build = "CUDA LibTorch " TORCH_VERSION;
#else
    const std::string build = "CPU-only LibTorch " TORCH_VERSION;
#endif
    const std::string why = "this build of ddptrain has none: it needs a CUDA LibTorch 2 or later and the CMake option "
                            "DDPTRAIN_FUSED_ADAMW=ON, and was built against a " + build;
#endif
    throw ddpsim::UsageError("--optimizer-impl fused: no fused AdamW kernel here (" + why +
                             "); use foreach, or auto for the fastest one available");
  }
  return OptimizerImpl::fused;
}

AdamW::AdamW(std::vector<torch::Tensor> params, double lr, double weight_decay, OptimizerImpl impl)
    : impl_(impl),
      lr_(lr),
      weight_decay_(weight_decay),
      params_(std::move(params)),
      torch_(params_, torch::optim::AdamWOptions(lr).weight_decay(weight_decay).betas({beta1_, beta2_}).eps(eps_)),
      exp_avg_(params_.size()),
      exp_avg_sq_(params_.size()),
      steps_(params_.size(), 0),
      step_tensors_(params_.size()) {
#ifndef DDPTRAIN_HAS_FUSED_ADAMW
  if (impl_ == OptimizerImpl::fused) throw std::logic_error("AdamW: fused without the kernel");
#endif
}

void AdamW::set_lr(double lr) {
  lr_ = lr;
  for (auto& group : torch_.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

void AdamW::zero_grad() { torch_.zero_grad(); }

void AdamW::step() {
  if (impl_ == OptimizerImpl::per_param) {
    torch_.step();
    return;
  }
  torch::NoGradGuard no_grad;
  std::vector<std::size_t> live;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = torch::zeros_like(params_[i], torch::MemoryFormat::Preserve);
      exp_avg_sq_[i] = torch::zeros_like(params_[i], torch::MemoryFormat::Preserve);
    }
    ++steps_[i];
    live.push_back(i);
  }
  if (live.empty()) return;
  if (impl_ == OptimizerImpl::fused)
    step_fused(live);
  else
    step_foreach(live);
}

// LibTorch's per-parameter sequence of operations, each over the whole list, so that on the CPU
// (where _foreach_* loops over the same per-tensor kernels) the result is bitwise the reference's.
void AdamW::step_foreach(const std::vector<std::size_t>& live) {
  std::vector<torch::Tensor> p, g, m, v;
  std::vector<c10::Scalar> bias2_sqrt, step_size;
  for (const std::size_t i : live) {
    p.push_back(params_[i]);
    g.push_back(params_[i].grad());
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
    // Per parameter, as LibTorch counts steps per parameter (one without a gradient lags).
    const auto t = static_cast<double>(steps_[i]);
    bias2_sqrt.emplace_back(std::sqrt(1 - std::pow(beta2_, t)));
    step_size.emplace_back(-lr_ / (1 - std::pow(beta1_, t)));
  }
  if (weight_decay_ != 0) at::_foreach_mul_(p, 1 - lr_ * weight_decay_);
  at::_foreach_mul_(m, beta1_);
  at::_foreach_add_(m, g, 1 - beta1_);
  at::_foreach_mul_(v, beta2_);
  at::_foreach_addcmul_(v, g, g, 1 - beta2_);
  auto denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, bias2_sqrt);
  at::_foreach_add_(denom, eps_);
  at::_foreach_addcdiv_(p, m, denom, step_size);
}

void AdamW::step_fused([[maybe_unused]] const std::vector<std::size_t>& live) {
#ifdef DDPTRAIN_HAS_FUSED_ADAMW
  std::vector<torch::Tensor> p, g, m, v, t;
  for (const std::size_t i : live) {
    // The kernel reads the count after the increment, as torch.optim's fused path passes it.
    if (!step_tensors_[i].defined())
      step_tensors_[i] = torch::full({}, static_cast<double>(steps_[i] - 1),
                                     torch::TensorOptions().dtype(torch::kFloat).device(params_[i].device()));
    p.push_back(params_[i]);
    g.push_back(params_[i].grad());
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
    t.push_back(step_tensors_[i]);
  }
  at::_foreach_add_(t, 1);
  at::_fused_adamw_(p, g, m, v, /*max_exp_avg_sqs=*/{}, t, lr_, beta1_, beta2_, weight_decay_, eps_,
                    /*amsgrad=*/false, /*maximize=*/false);
#endif
}

void AdamW::export_state() {
  auto& state = torch_.state();
  using Map = std::remove_reference_t<decltype(state)>;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    auto s = std::make_unique<torch::optim::AdamWParamState>();
    s->step(steps_[i]);
    s->exp_avg(exp_avg_[i]);
    s->exp_avg_sq(exp_avg_sq_[i]);
    state[state_key<Map>(params_[i])] = std::move(s);
  }
}

void AdamW::import_state() {
  auto& state = torch_.state();
  using Map = std::remove_reference_t<decltype(state)>;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i] = exp_avg_sq_[i] = step_tensors_[i] = torch::Tensor();
    steps_[i] = 0;
    const auto found = state.find(state_key<Map>(params_[i]));
    if (found == state.end()) continue;
    auto& s = static_cast<torch::optim::AdamWParamState&>(*found->second);
    // An archive restores tensors where they were saved: a CPU checkpoint resumed on a GPU.
    exp_avg_[i] = s.exp_avg().to(params_[i].device());
    exp_avg_sq_[i] = s.exp_avg_sq().to(params_[i].device());
    steps_[i] = s.step();
  }
  state.clear();  // one owner of the moments: the vectors, which the steps update
}

void AdamW::save(torch::serialize::OutputArchive& archive) {
  if (impl_ == OptimizerImpl::per_param) {
    torch_.save(archive);
    return;
  }
  export_state();
  torch_.save(archive);
  torch_.state().clear();  // the entries share the vectors' tensors, but their step counts would go stale
}

void AdamW::load(torch::serialize::InputArchive& archive) {
  torch_.load(archive);
  if (impl_ != OptimizerImpl::per_param) import_state();
}

}  // namespace ddptrain
