#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "model/perf_model.hpp"
#include "model/safetensors.hpp"
#include "train/padding.hpp"
#include "train/step_timer.hpp"

#ifdef DDPTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

namespace ddptrain {

namespace {

// A 64-bit digest of a step's allocation: ranks whose plans differ get different digests.
std::int64_t plan_digest(const ddpsim::StepPlan& plan) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  for (const auto& batch : plan.batches) {
    mix(batch.size());
    for (const auto& s : batch) mix(static_cast<std::uint64_t>(s.index) * 31 + static_cast<std::uint64_t>(s.epoch));
  }
  return static_cast<std::int64_t>(h >> 1);
}

// Per rank and step: fwd, bwd, comm wait, opt, step (ms), peak MiB, loss, digest (2 halves), spare.
constexpr int METRICS = 11;

}  // namespace

Trainer::~Trainer() = default;

std::vector<double> Trainer::ddp_bucket_bytes() const {
  constexpr double MiB = 1024.0 * 1024.0;
  return GradBuckets::plan_bytes(model_->parameters(), opt_.bucket_mb * MiB, opt_.first_bucket_mb * MiB);
}

torch::Tensor Trainer::mean_loss(const Batch& batch) {
  torch::Tensor logits;
  {
    AutocastScope autocast(device_, opt_.precision);
    logits = model_(batch.ids, batch.mask).to(torch::kFloat);
  }
  return torch::nn::functional::cross_entropy(logits, batch.labels);
}

double Trainer::lr_at(int step) const {
  const int warmup = static_cast<int>(std::ceil(opt_.warmup * opt_.steps));
  if (step < warmup) return opt_.lr * (step + 1) / warmup;
  return opt_.lr * std::max(0.0, double(opt_.steps - step) / std::max(1, opt_.steps - warmup));
}

void Trainer::plan_next(ddpsim::StepPlan& plan) {
  buffers_->fill_all(policy_->buffer_size());
  const auto start = std::chrono::steady_clock::now();
  policy_->plan(*buffers_, plan);
  decision_us_.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
}

Trainer::Passes Trainer::forward_backward(const ddpsim::StepPlan& plan, StepTimer& timer) {
  // This process's ranks: its own, or all G when emulating.
  const int first = comm_ ? rank_ : 0, last = comm_ ? rank_ + 1 : G_;
  Passes out;
  for (auto* v : {&out.fwd_ms, &out.bwd_ms, &out.loss, &out.peak_mem_mib}) v->assign(static_cast<std::size_t>(G_), 0.0);
  if (buckets_) buckets_->prepare();
  std::size_t mark = 1;
  for (int g = first; g < last; ++g) {
    const auto gi = static_cast<std::size_t>(g);
    const auto& samples = plan.batches[gi];
    const std::vector<int> one = {static_cast<int>(samples.size())};
    const auto& sizes = plan.micro_sizes.empty() ? one : plan.micro_sizes[gi];
    timer.reset_peak_memory();
    double peak = std::numeric_limits<double>::quiet_NaN();  // and so it stays on CPU
    auto next = samples.begin();
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      if (sizes[k] == 0) continue;  // a rank given no samples (its buckets still join the allreduce)
      const std::vector<ddpsim::Sample> micro(next, next + sizes[k]);
      next += sizes[k];
      Batch batch = collate(data_, micro, device_);
      pad_batch(batch, opt_.pad_to_multiple_of, opt_.max_length);
      // DDP's no_sync: the buckets reduce only what the last micro-batch's backward completes.
      if (buckets_) buckets_->set_accumulating(k + 1 < sizes.size());
      timer.mark(mark);
      const auto loss = mean_loss(batch);
      timer.mark(mark + 1);
      // L̃_g = L_g · G·b_g/B_t, L_g the mean over the rank's b_g samples: micro-batch k's mean
      // counts b_k/b_g of it. The allreduce averages over G (emulation divides by G itself).
      const double share = samples.empty() ? 1.0 : double(sizes[k]) / double(samples.size());
      (loss * (plan.loss_weights[gi] * share / (comm_ ? 1.0 : G_))).backward();
      timer.mark(mark + 2);
      out.fwd_ms[gi] += timer.ms(mark, mark + 1);
      out.bwd_ms[gi] += timer.ms(mark + 1, mark + 2);
      out.loss[gi] += loss.item<double>() * share;
      peak = std::isnan(peak) ? timer.peak_memory_mib() : std::max(peak, timer.peak_memory_mib());
      out.backward_end = mark + 2;
      mark += 3;
    }
    out.peak_mem_mib[gi] = peak;
  }
  if (buckets_) buckets_->set_accumulating(false);
  out.next_mark = mark;
  return out;
}

void Trainer::compute_gradients(const ddpsim::StepPlan& plan) {
  StepTimer timer(device_);
  timer.mark(0);
  forward_backward(plan, timer);
  if (buckets_) buckets_->finish();
}

double Trainer::step() {
  StepTimer timer(device_);
  timer.reset_peak_memory();
  timer.mark(0);
  ddpsim::StepPlan plan;
  plan_next(plan);
  set_lr(lr_at(step_));
  model_->train();

  const Passes passes = forward_backward(plan, timer);
  const auto &fwd = passes.fwd_ms, &bwd = passes.bwd_ms, &loss = passes.loss, &mem = passes.peak_mem_mib;
  const std::size_t wait_start = passes.next_mark, wait_end = wait_start + 1, opt_end = wait_start + 2,
                    gathered = wait_start + 3;
  timer.mark(wait_start);
  if (buckets_) buckets_->wait();
  timer.mark(wait_end);
  if (buckets_) buckets_->unpack();  // DDP's copy out of the buckets: timed with the optimizer, as --profile does
  if (opt_.clip_norm > 0) torch::nn::utils::clip_grad_norm_(model_->parameters(), opt_.clip_norm);
  update_parameters();  // clearing the gradients timed with the optimizer, as --profile times it
  timer.mark(opt_end);
  if (zero1_) zero1_->gather();  // a collective wait, as the simulator counts it
  timer.mark(gathered);
  const double opt_ms = timer.ms(wait_end, opt_end), gather_ms = timer.ms(opt_end, gathered);

  // Every rank's row: gathered from the ranks, or all computed here when emulating.
  torch::Tensor metrics = torch::zeros({G_, METRICS}, torch::kFloat64);
  // The allocation's digest travels with the metrics, in two exact 32-bit halves: every rank
  // decided alone, and this proves they decided alike without a collective inside the step.
  const auto digest = static_cast<std::uint64_t>(plan_digest(plan));
  auto put = [&](int g, double comm_wait, double step_ms) {
    const auto gi = static_cast<std::size_t>(g);
    const double values[METRICS] = {fwd[gi],
                                    bwd[gi],
                                    comm_wait,
                                    opt_ms,
                                    step_ms,
                                    mem[gi],
                                    loss[gi],
                                    double(digest >> 32),
                                    double(digest & 0xffffffffULL),
                                    0,
                                    0};
    for (int k = 0; k < METRICS; ++k) metrics[g][k] = values[k];
  };
  if (comm_) {
    put(rank_, timer.ms(passes.backward_end, wait_end) + gather_ms, timer.ms(0, gathered));
    // Collectives run on the group's device (NCCL: the GPU), hence the .to(device_).
    metrics = comm_->allgather(metrics[rank_].to(device_)).cpu();
    for (int g = 1; g < G_; ++g)
      if (metrics[g][7].item<double>() != metrics[0][7].item<double>() ||
          metrics[g][8].item<double>() != metrics[0][8].item<double>())
        throw std::runtime_error("step " + std::to_string(step_) + ": ranks reached different batch allocations");
  } else if (opt_.emulate_ranks > 0) {
    double slowest = 0;
    for (int g = 0; g < G_; ++g)
      slowest = std::max(slowest, fwd[static_cast<std::size_t>(g)] + bwd[static_cast<std::size_t>(g)]);
    const double step_ms = slowest + emulated_allreduce_ms_ + opt_ms;
    for (int g = 0; g < G_; ++g)
      put(g, step_ms - fwd[static_cast<std::size_t>(g)] - bwd[static_cast<std::size_t>(g)] - opt_ms, step_ms);
  } else {
    put(0, timer.ms(passes.backward_end, wait_end), timer.ms(0, opt_end));
  }
  const auto m = metrics.to(torch::kCPU);
  for (int g = 0; g < G_; ++g) {
    ddpsim::RankStep row = ddpsim::plan_row(plan, step_, g, /*packed=*/false);
    pad_row(row, opt_.pad_to_multiple_of, opt_.max_length);
    row.fwd_ms = m[g][0].item<double>();
    row.bwd_ms = m[g][1].item<double>();
    row.comm_wait_ms = m[g][2].item<double>();
    row.opt_ms = m[g][3].item<double>();
    row.step_ms = m[g][4].item<double>();
    row.peak_mem_mib = m[g][5].item<double>();
    row.loss = m[g][6].item<double>();
    rows_.push_back(row);
  }
  step_++;
  return loss[static_cast<std::size_t>(comm_ ? rank_ : 0)];
}

void Trainer::set_lr(double lr) {
  if (zero1_)
    zero1_->set_lr(lr);
  else
    optimizer_->set_lr(lr);
}

void Trainer::update_parameters() {
  if (zero1_) {
    zero1_->step();
    zero1_->zero_grad();
  } else {
    optimizer_->step();
    optimizer_->zero_grad();
  }
}

double Trainer::evaluate() {
  torch::Tensor accuracy = torch::zeros({1}, torch::kFloat64);
  if (rank_ == 0 && !dev_.ids.empty()) {
    torch::NoGradGuard no_grad;
    model_->eval();
    std::int64_t correct = 0;
    std::vector<ddpsim::Sample> chunk;
    for (std::size_t i = 0; i < dev_.ids.size(); i += 64) {
      chunk.clear();
      for (std::size_t j = i; j < std::min(dev_.ids.size(), i + 64); ++j)
        chunk.push_back({static_cast<std::int64_t>(j), 0, dev_.lengths[j]});
      const Batch b = collate(dev_, chunk, device_);
      AutocastScope autocast(device_, opt_.precision);
      correct += model_(b.ids, b.mask).argmax(1).eq(b.labels).sum().item<std::int64_t>();
    }
    accuracy[0] = double(correct) / double(dev_.ids.size());
  }
  if (real_ranks()) {
    accuracy = accuracy.to(device_);
    comm_->broadcast(accuracy, /*root=*/0);
    accuracy = accuracy.cpu();
  }
  const double value = accuracy[0].item<double>();
  accuracy_.emplace_back(step_, value);
  return value;
}

void Trainer::run() {
  while (advance()) {
  }
  finish();
}

ddpsim::StepShape Trainer::policy_shape() const {
  ddpsim::StepShape shape = shape_;
  if (opt_.profiling) shape.b_max.clear();  // a profile never runs its policy: --bmax bounds its grid
  return shape;
}

std::string Trainer::resolved_policy() const {
  return ddpsim::resolved_policy(ddpsim::parse_policy_spec(opt_.policy), policy_shape()).label();
}

bool Trainer::advance() {
  if (step_ >= opt_.steps) return false;
  if (started_ == std::chrono::steady_clock::time_point{}) started_ = std::chrono::steady_clock::now();
  const std::string who = log_prefix();
  set_rng_state(device_, rng_);
  const double loss = step();
  if (rank_ == 0 && (step_ % std::max(1, opt_.log_every) == 0 || step_ == opt_.steps)) {
    const auto& r = rows_.back();
    log_ << who << "step " << step_ << "/" << opt_.steps << "  loss " << loss << "  lr " << lr_at(step_ - 1)
         << "  step " << r.step_ms << " ms  "
         << std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() << " s\n";
  }
  if (opt_.eval_every > 0 && step_ % opt_.eval_every == 0 && step_ < opt_.steps && !dev_.ids.empty()) {
    const double acc = evaluate();
    if (rank_ == 0) log_ << who << "step " << step_ << "  dev accuracy " << acc << "\n";
  }
  if (opt_.ckpt_every > 0 && step_ % opt_.ckpt_every == 0 && !opt_.out.empty())
    save_checkpoint((std::filesystem::path(opt_.out) / "checkpoint.pt").string());
  rng_ = rng_state(device_);
  return step_ < opt_.steps;
}

void Trainer::finish() {
  const std::string who = log_prefix();
  if (!dev_.ids.empty()) {
    const double acc = evaluate();
    if (rank_ == 0) log_ << who << "final dev accuracy " << acc << " (" << dev_.ids.size() << " samples)\n";
  }
  if (rank_ == 0 && !opt_.out.empty()) write_outputs();
}

}  // namespace ddptrain
