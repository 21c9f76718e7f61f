// Gradient synchronisation as PyTorch DDP does it, small enough to read: parameters in reverse
// registration order fill buckets (first one 1 MiB, then 25 MiB by default); an autograd hook
// on each parameter copies its gradient into its bucket's flat buffer, and once a bucket is
// full its allreduce starts — in bucket order, as DDP requires — while backward goes on.
// wait() waits for them; unpack() averages over the ranks and hands each parameter its reduced
// gradient.
// (LibTorch's own Reducer has no stable C++ API across 1.13 and 2.x, hence this class.)
#pragma once

#include <mutex>
#include <vector>

#include <torch/torch.h>

#include "dist/comm.hpp"

namespace ddptrain {

class GradBuckets {
 public:
  // Registers one hook per parameter; `comm` must outlive this object.
  GradBuckets(std::vector<torch::Tensor> params, Communicator& comm, double cap_bytes, double first_cap_bytes);
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Call before each step's first backward: clears the buffers and readiness.
  void prepare();
  // Off: the hooks leave gradients alone (a profile's backward without DDP's communication).
  void set_active(bool active) { active_ = active; }
  // On: DDP's no_sync — gradients add up in the buckets, and no bucket counts as ready, for the
  // micro-batches before a step's last one; off (the default) for the last, whose backward then
  // launches each bucket's allreduce of the accumulated sum.
  void set_accumulating(bool accumulating) { accumulating_ = accumulating; }
  // Call after backward: launches buckets that never filled (unused parameters count as zero)
  // and waits for all of them.
  void wait();
  // Then sets each parameter's .grad to the mean over ranks (copying it out of its bucket).
  void unpack();
  // wait(), then unpack().
  void finish();
  // Off: buckets fill and unpack as in training but are never reduced — a profile's step with
  // DDP's own copies and none of its communication.
  void set_communicate(bool communicate) { communicate_ = communicate; }

  std::size_t bucket_count() const { return buckets_.size(); }
  // The bucket sizes (bytes) DDP's assignment gives these parameters, in reduction order.
  static std::vector<double> plan_bytes(const std::vector<torch::Tensor>& params, double cap_bytes,
                                        double first_cap_bytes);
  double bucket_bytes(std::size_t b) const;

 private:
  bool active_ = true, communicate_ = true, accumulating_ = false;
  struct Slot {
    std::size_t bucket, offset;  // where this parameter's gradient lives
  };
  struct Bucket {
    torch::Tensor flat;
    std::vector<std::size_t> params;
    std::size_t ready = 0;
    WorkPtr work;
  };
  void on_gradient(std::size_t param, const torch::Tensor& grad);
  void launch_ready();

  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::vector<bool> seen_;
  std::size_t next_launch_ = 0;
  std::mutex mutex_;  // hooks may run on autograd's device threads
};

}  // namespace ddptrain
