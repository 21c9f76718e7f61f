// Per-phase timing of one rank's step. On CUDA, events on the current stream (recorded before
// the gradient wait, so a straggler's compute is not hidden by the allreduce); on CPU, the
// steady clock. Also the step's peak memory from the CUDA caching allocator.
#pragma once

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <torch/torch.h>

#ifdef DDPTRAIN_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace ddptrain {

class StepTimer {
 public:
  explicit StepTimer(const torch::Device& device) : device_(device) {}

  // Marks the start of phase boundary i (0 = step start); mark(n) ends phase n−1.
  void mark(std::size_t i) {
#ifdef DDPTRAIN_CUDA
    if (device_.is_cuda()) {
      if (events_.size() <= i) events_.resize(i + 1);
      events_[i] = std::make_unique<at::cuda::CUDAEvent>(cudaEventDefault);
      events_[i]->record();
      return;
    }
#endif
    if (times_.size() <= i) times_.resize(i + 1);
    times_[i] = std::chrono::steady_clock::now();
  }
  // ms between marks a and b (waits for the GPU where needed).
  double ms(std::size_t a, std::size_t b) {
#ifdef DDPTRAIN_CUDA
    if (device_.is_cuda()) {
      events_[b]->synchronize();
      return events_[a]->elapsed_time(*events_[b]);
    }
#endif
    return std::chrono::duration<double, std::milli>(times_[b] - times_[a]).count();
  }
  void reset_peak_memory() {
#ifdef DDPTRAIN_CUDA
    if (device_.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device_.index());
#endif
  }
  // MiB; NaN on CPU (the trace column stays empty there).
  double peak_memory_mib() const {
#ifdef DDPTRAIN_CUDA
    if (device_.is_cuda()) {
      const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device_.index());
      return double(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);  // [0]: the aggregate over pools
    }
#endif
    return std::numeric_limits<double>::quiet_NaN();
  }

 private:
  torch::Device device_;
  std::vector<std::chrono::steady_clock::time_point> times_;
#ifdef DDPTRAIN_CUDA
  std::vector<std::unique_ptr<at::cuda::CUDAEvent>> events_;
#endif
};

}  // namespace ddptrain
