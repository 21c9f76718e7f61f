// ZeRO stage 1 over ddptrain's DDP: each rank keeps AdamW's state for one G-th of the
// flattened parameters, steps that slice from the allreduced gradients, and all-gathers the
// updated slices. The partition is DeepSpeed's (even, element by element), so every rank steps
// and sends the same amount, as ddpsim's data_parallel "zero1" assumes; PyTorch's
// ZeroRedundancyOptimizer assigns whole parameters instead.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "dist/comm.hpp"
#include "train/adamw.hpp"

namespace ddptrain {

// Every rank's `slice` (the last ranks' may be shorter than `per_rank`, or empty), gathered in rank
// order into one flat tensor of G·per_rank elements: the collective of a ZeRO step, which
// --profile times as well.
torch::Tensor allgather_slices(Communicator& comm, const torch::Tensor& slice, std::int64_t per_rank);

class Zero1Optimizer {
 public:
  // `comm` must outlive this object; every rank passes the same parameters in the same order.
  Zero1Optimizer(std::vector<torch::Tensor> params, Communicator& comm, double lr, double weight_decay,
                 OptimizerImpl impl);

  void set_lr(double lr) { adamw_->set_lr(lr); }
  // This rank's slice of the update, from the parameters' gradients (the same on every rank
  // after DDP's allreduce); the parameters themselves change only in gather().
  void step();
  void zero_grad();
  // Every rank's updated slice into every parameter: the step's all-gather.
  void gather();
  // This rank's slice: [first(), first() + size()) of the flattened parameters.
  std::int64_t first() const { return first_; }
  std::int64_t size() const { return slice_.numel(); }

 private:
  // The parameters' elements in [first_, first_ + n) as (parameter, offset in it, count, offset in the slice).
  struct Piece {
    std::size_t param;
    std::int64_t from, count, at;
  };
  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  std::int64_t first_ = 0, per_rank_ = 0;  // per_rank_: the slice's length, the last rank's padded to it
  std::vector<Piece> pieces_;
  torch::Tensor slice_;  // this rank's parameters, updated by its AdamW
  torch::Tensor grad_;   // its gradient, copied from the parameters' each step
  std::unique_ptr<AdamW> adamw_;
  // Clears the parameters' gradients as LibTorch's optimizers do (in place on 1.13, to none on
  // 2.x), so that backward runs as under DDP's whole optimizer; it never steps.
  torch::optim::SGD clear_;
};

}  // namespace ddptrain
