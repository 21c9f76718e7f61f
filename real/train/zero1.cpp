#include "train/zero1.hpp"

#include <algorithm>

namespace ddptrain {

Zero1Optimizer::Zero1Optimizer(std::vector<torch::Tensor> params, Communicator& comm, double lr, double weight_decay,
                               OptimizerImpl impl)
    : params_(std::move(params)), comm_(comm), clear_(params_, torch::optim::SGDOptions(0.0)) {
  std::int64_t total = 0;
  for (const torch::Tensor& p : params_) total += p.numel();
  const std::int64_t G = comm_.size();
  per_rank_ = (total + G - 1) / G;
  first_ = std::min(total, per_rank_ * comm_.rank());
  const std::int64_t last = std::min(total, first_ + per_rank_);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::int64_t begin = std::max(offset, first_), end = std::min(offset + params_[i].numel(), last);
    if (begin < end) pieces_.push_back({i, begin - offset, end - begin, begin - first_});
    offset += params_[i].numel();
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor& any = params_.front();
  slice_ = torch::empty({last - first_}, any.options().requires_grad(false));
  for (const Piece& piece : pieces_)
    slice_.narrow(0, piece.at, piece.count).copy_(params_[piece.param].reshape(-1).narrow(0, piece.from, piece.count));
  adamw_ = std::make_unique<AdamW>(std::vector<torch::Tensor>{slice_}, lr, weight_decay, impl);
}

void Zero1Optimizer::step() {
  torch::NoGradGuard no_grad;
  if (!grad_.defined()) grad_ = torch::empty_like(slice_);  // one buffer for every step's slice
  for (const Piece& piece : pieces_) {
    const torch::Tensor& g = params_[piece.param].grad();
    auto out = grad_.narrow(0, piece.at, piece.count);
    if (g.defined())
      out.copy_(g.reshape(-1).narrow(0, piece.from, piece.count));
    else
      out.zero_();  // an unused parameter: DDP hands it a zero gradient too
  }
  slice_.mutable_grad() = grad_;
  adamw_->step();
}

void Zero1Optimizer::zero_grad() {
  clear_.zero_grad();
  slice_.mutable_grad() = torch::Tensor();
}

torch::Tensor allgather_slices(Communicator& comm, const torch::Tensor& slice, std::int64_t per_rank) {
  // Gloo gathers equal sizes: the last rank's shorter slice padded.
  torch::Tensor mine = slice.numel() == per_rank ? slice : torch::zeros({per_rank}, slice.options());
  if (slice.numel() != per_rank) mine.narrow(0, 0, slice.numel()).copy_(slice);
  return comm.allgather(mine).reshape(-1);
}

void Zero1Optimizer::gather() {
  torch::NoGradGuard no_grad;
  const torch::Tensor all = allgather_slices(comm_, slice_, per_rank_);
  std::int64_t offset = 0;
  for (torch::Tensor& p : params_) {
    p.view(-1).copy_(all.narrow(0, offset, p.numel()));
    offset += p.numel();
  }
}

}  // namespace ddptrain
