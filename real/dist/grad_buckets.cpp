#include "dist/grad_buckets.hpp"

#include "model/buckets.hpp"

namespace ddptrain {

namespace {

std::vector<double> tensor_bytes(const std::vector<torch::Tensor>& params) {
  std::vector<double> bytes;
  for (const auto& p : params) bytes.push_back(double(p.numel()) * double(p.element_size()));
  return bytes;
}

}  // namespace

GradBuckets::GradBuckets(std::vector<torch::Tensor> params, Communicator& comm, double cap_bytes,
                         double first_cap_bytes)
    : params_(std::move(params)), comm_(comm), slots_(params_.size()), seen_(params_.size(), false) {
  for (auto& members : ddpsim::assign_buckets(tensor_bytes(params_), cap_bytes, first_cap_bytes)) {
    std::int64_t numel = 0;
    for (std::size_t i : members) {
      slots_[i] = {buckets_.size(), static_cast<std::size_t>(numel)};
      numel += params_[i].numel();
    }
    Bucket b;
    b.flat = torch::zeros({numel}, params_[members.front()].options());
    b.params = std::move(members);
    buckets_.push_back(std::move(b));
  }
  for (std::size_t i = 0; i < params_.size(); ++i)
    params_[i].register_hook([this, i](torch::Tensor grad) { on_gradient(i, grad); });
}

std::vector<double> GradBuckets::plan_bytes(const std::vector<torch::Tensor>& params, double cap_bytes,
                                            double first_cap_bytes) {
  const auto bytes = tensor_bytes(params);
  std::vector<double> sizes;
  for (const auto& members : ddpsim::assign_buckets(bytes, cap_bytes, first_cap_bytes)) {
    double total = 0;
    for (std::size_t i : members) total += bytes[i];
    sizes.push_back(total);
  }
  return sizes;
}

double GradBuckets::bucket_bytes(std::size_t b) const {
  return double(buckets_[b].flat.numel()) * double(buckets_[b].flat.element_size());
}

void GradBuckets::prepare() {
  for (auto& b : buckets_) {
    b.flat.zero_();
    b.ready = 0;
    b.work.reset();
  }
  std::fill(seen_.begin(), seen_.end(), false);
  next_launch_ = 0;
}

void GradBuckets::on_gradient(std::size_t param, const torch::Tensor& grad) {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const Slot& slot = slots_[param];
  Bucket& bucket = buckets_[slot.bucket];
  bucket.flat.narrow(0, static_cast<std::int64_t>(slot.offset), grad.numel()).add_(grad.reshape({-1}));
  if (accumulating_) return;
  if (!seen_[param]) {
    seen_[param] = true;
    bucket.ready++;
  }
  launch_ready();
}

void GradBuckets::launch_ready() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].ready == buckets_[next_launch_].params.size()) {
    Bucket& b = buckets_[next_launch_++];
    if (comm_.size() > 1 && communicate_) b.work = comm_.allreduce_sum(b.flat);
  }
}

void GradBuckets::wait() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& b : buckets_) b.ready = b.params.size();  // parameters without gradients stay zero
    launch_ready();
  }
  for (auto& b : buckets_)
    if (b.work) b.work->wait();
}

void GradBuckets::unpack() {
  const double scale = 1.0 / comm_.size();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Slot& slot = slots_[i];
    auto reduced = buckets_[slot.bucket].flat.narrow(0, static_cast<std::int64_t>(slot.offset), params_[i].numel());
    reduced = reduced.view(params_[i].sizes());
    params_[i].mutable_grad() = comm_.size() > 1 ? reduced * scale : reduced.clone();  // one pass either way
  }
}

void GradBuckets::finish() {
  wait();
  unpack();
}

}  // namespace ddptrain
