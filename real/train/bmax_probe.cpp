// --bmax probe: the largest batch of --max-length samples each rank's GPU trains on, found by
// recovering from out-of-memory errors; apart from the trainer, whose steps never meet one.
#include <cmath>
#include <functional>

#include "common/error.hpp"
#include "train/trainer.hpp"

#ifdef DDPTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace ddptrain {

namespace {

#ifdef DDPTRAIN_CUDA
// Out of GPU memory: the caching allocator's error, or a library's failed workspace allocation.
bool out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what_without_backtrace();
  return what.find("out of memory") != std::string::npos || what.find("ALLOC_FAILED") != std::string::npos;
}
#endif

}  // namespace

int largest_fitting(int hi, const std::function<bool(int)>& fits) {
  if (hi < 1 || !fits(1)) return 0;
  int good = 1, bad = hi + 1;  // fits(good) holds; fits(bad) fails or bad is past hi
  for (int b = 2; b <= hi && bad > hi; b *= 2) (fits(b) ? good : bad) = b;
  if (bad > hi && good < hi) {
    if (fits(hi)) return hi;
    bad = hi;
  }
  while (bad - good > 1) {
    const int mid = good + (bad - good) / 2;
    (fits(mid) ? good : bad) = mid;
  }
  return good;
}

// --bmax probe: each rank finds the largest batch of --max-length samples whose forward and
// backward fit its GPU while room for AdamW's two moments and `probe_reserve` of the device's
// memory are held aside, recovering from each out-of-memory error. The cap never exceeds B (no
// rank gets more). Ranks share their caps, which differ on mixed GPUs.
std::vector<int> Trainer::probe_bmax() {
#ifndef DDPTRAIN_CUDA
  throw std::logic_error("probe_bmax() without CUDA");  // the constructor refuses --bmax probe first
#else
  const auto total = static_cast<double>(at::cuda::getDeviceProperties(device_.index())->totalGlobalMem);
  std::int64_t param_bytes = 0;
  for (const auto& p : model_->parameters()) param_bytes += p.numel() * static_cast<std::int64_t>(p.element_size());
  const auto aside_bytes = 2 * param_bytes + static_cast<std::int64_t>(opt_.probe_reserve * total);
  const int L = opt_.max_length;
  int cap = 0;
  {
    torch::Tensor aside;
    try {
      aside = torch::empty({aside_bytes}, torch::TensorOptions().dtype(torch::kUInt8).device(device_));
    } catch (const c10::Error& e) {
      if (!out_of_memory(e)) throw;
      throw ddpsim::InputError("--bmax probe: the GPU cannot even hold AdamW's state and the reserve (" +
                               std::to_string(aside_bytes >> 20) + " MiB) beside the model; lower --probe-reserve");
    }
    model_->train();
    auto fits = [&](int b) {
      bool ok = true;
      try {
        mean_loss(full_batch(b, L, device_)).backward();
        torch::cuda::synchronize(device_.index());
      } catch (const c10::Error& e) {
        if (!out_of_memory(e)) throw;
        ok = false;
      }
      for (auto& p : model_->parameters()) p.mutable_grad().reset();
      c10::cuda::CUDACachingAllocator::emptyCache();
      log_ << "bmax probe: " << b << " samples of " << L << " tokens " << (ok ? "fit" : "do not fit") << "\n";
      return ok;
    };
    cap = largest_fitting(opt_.global_batch, fits);
  }
  c10::cuda::CUDACachingAllocator::emptyCache();
  if (cap < 1)
    throw ddpsim::InputError("--bmax probe: not even one sample of " + std::to_string(L) + " tokens fits with " +
                             std::to_string(std::lround(opt_.probe_reserve * 100)) +
                             "% of device memory kept free; lower --max-length or --probe-reserve");
  log_ << "b_max " << cap << " per rank from the probe (" << precision_name(opt_.precision) << ", "
       << opt_.probe_reserve * 100 << "% of " << total / (1 << 30) << " GiB kept free"
       << (cap == opt_.global_batch ? "; capped at the global batch" : "") << ")\n";
  if (!comm_ || G_ < 2) return std::vector<int>(static_cast<std::size_t>(G_), cap);
  const auto caps =
      comm_->allgather(torch::tensor({static_cast<std::int64_t>(cap)}, torch::kInt64).to(device_)).cpu().view(-1);
  std::vector<int> b_max;
  for (int g = 0; g < G_; ++g) b_max.push_back(static_cast<int>(caps[g].item<std::int64_t>()));
  return b_max;
#endif
}

}  // namespace ddptrain
