#include "train/precision.hpp"

#include <ATen/autocast_mode.h>

#include "common/error.hpp"

namespace ddptrain {

namespace {

// LibTorch 2.4 replaced the CUDA-only and CPU-only autocast calls by per-device-type ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool autocast_enabled(c10::DeviceType type) {
  return at::autocast::is_autocast_enabled(type);
}
void set_autocast(c10::DeviceType type, bool on) {
  at::autocast::set_autocast_enabled(type, on);
}
at::ScalarType autocast_dtype(c10::DeviceType type) {
  return at::autocast::get_autocast_dtype(type);
}
void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
  at::autocast::set_autocast_dtype(type, dtype);
}
#else
bool autocast_enabled(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
void set_autocast(c10::DeviceType type, bool on) {
  type == c10::DeviceType::CUDA ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on);
}
at::ScalarType autocast_dtype(c10::DeviceType type) {
  return type == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                       : at::autocast::get_autocast_cpu_dtype();
}
void set_autocast_dtype(c10::DeviceType type, at::ScalarType dtype) {
  type == c10::DeviceType::CUDA ? at::autocast::set_autocast_gpu_dtype(dtype)
                                : at::autocast::set_autocast_cpu_dtype(dtype);
}
#endif

}  // namespace

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  throw ddpsim::UsageError("--precision is fp32 or bf16, got \"" + text + "\"");
}

const char* precision_name(Precision precision) {
  return precision == Precision::bf16 ? "bf16" : "fp32";
}

AutocastScope::AutocastScope(const torch::Device& device, Precision precision) : type_(device.type()) {
  if (precision != Precision::bf16) return;
  active_ = true;
  was_enabled_ = autocast_enabled(type_);
  previous_dtype_ = autocast_dtype(type_);
  set_autocast(type_, true);
  set_autocast_dtype(type_, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(type_, was_enabled_);
  set_autocast_dtype(type_, previous_dtype_);
}

}  // namespace ddptrain
