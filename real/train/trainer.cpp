#include "train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "model/perf_model.hpp"
#include "model/safetensors.hpp"
#include "train/launcher.hpp"
#include "train/padding.hpp"
#include "train/step_timer.hpp"

#ifdef DDPTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

namespace ddptrain {

namespace {

torch::Device pick_device(const std::string& wanted, int local_rank) {
  if (wanted == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !cuda) throw ddpsim::InputError("--device cuda: no CUDA device is visible to this LibTorch");
  if (wanted != "auto" && wanted != "cuda")
    throw ddpsim::UsageError("--device is auto, cpu or cuda, got \"" + wanted + "\"");
  if (!cuda) return torch::kCPU;
  return torch::Device(torch::kCUDA,
                       static_cast<c10::DeviceIndex>(local_rank % static_cast<int>(torch::cuda::device_count())));
}

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

// The α–β ring allreduce time of every bucket, back to back (no overlap): what --emulate-ranks
// charges for communication it cannot run.
double modelled_allreduce_ms(const std::vector<double>& bucket_bytes, int G, double GBps, double latency_us) {
  if (G < 2) return 0.0;
  double ms = 0;
  for (double bytes : bucket_bytes)
    ms += (2.0 * (G - 1) * latency_us * 1e-6 + 2.0 * (G - 1) / G * bytes / (GBps * 1e9)) * 1e3;
  return ms;
}

#ifdef DDPTRAIN_CUDA
// Out of GPU memory: the caching allocator's error, or a library's failed workspace allocation.
bool out_of_memory(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what_without_backtrace();
  return what.find("out of memory") != std::string::npos || what.find("ALLOC_FAILED") != std::string::npos;
}
#endif

// Per rank and step: fwd, bwd, comm wait, opt, step (ms), peak MiB, loss, digest (2 halves), spare.
constexpr int METRICS = 11;

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

Trainer::Trainer(TrainOptions options, std::shared_ptr<Communicator> comm, std::ostream& log)
    : opt_(std::move(options)), comm_(std::move(comm)), log_(log), device_(torch::kCPU) {
  rank_ = comm_ ? comm_->rank() : 0;
  G_ = comm_ ? comm_->size() : std::max(1, opt_.emulate_ranks);
  if (comm_ && opt_.emulate_ranks > 0)
    throw ddpsim::UsageError("--emulate-ranks runs in one process: start one rank only");
  device_ = pick_device(opt_.device, opt_.local_rank);
  if (opt_.probe_bmax && !device_.is_cuda())
    throw ddpsim::UsageError(
        "--bmax probe needs a CUDA device (it finds the cap by running out of GPU memory); give --bmax N or a "
        "ddpsim model JSON whose memory model gives it");
  if (opt_.probe_reserve < 0 || opt_.probe_reserve >= 1)
    throw ddpsim::UsageError("--probe-reserve is a fraction of device memory in [0, 1)");

  auto config = DistilBertConfig::named(opt_.model_size);
  if (!opt_.synthetic_lengths.empty()) {
    data_ = synthetic_data(opt_.synthetic_lengths, opt_.synthetic_samples, 30522, opt_.max_length, opt_.seed);
    dev_ = synthetic_data(opt_.synthetic_lengths, 256, 30522, opt_.max_length, opt_.seed + 1);
  } else {
    if (opt_.data.empty() || opt_.vocab.empty())
      throw ddpsim::UsageError("give --data TSV and --vocab VOCAB, or --synthetic-lengths HIST");
    data_ = load_glue(opt_.data, opt_.vocab, opt_.max_length, config.labels);
    if (!opt_.dev.empty()) dev_ = load_glue(opt_.dev, opt_.vocab, opt_.max_length, config.labels);
  }
  if (opt_.dropout >= 0) config.dropout = config.attention_dropout = config.classifier_dropout = opt_.dropout;
  if (opt_.pad_to_multiple_of < 1 || opt_.pad_to_multiple_of > opt_.max_length)
    throw ddpsim::UsageError("--pad-to-multiple-of must be from 1 to --max-length (" + std::to_string(opt_.max_length) +
                             "), got " + std::to_string(opt_.pad_to_multiple_of));
  if (opt_.max_length > config.max_positions)
    throw ddpsim::InputError("--max-length " + std::to_string(opt_.max_length) + " exceeds the model's " +
                             std::to_string(config.max_positions) + " positions");
  model_ = DistilBertForSequenceClassification(config, opt_.seed);
  if (!opt_.weights.empty()) {
    const auto report = load_parameters(*model_, opt_.weights);
    log_ << log_prefix() << "weights: " << report.loaded << " tensors from " << opt_.weights << ", "
         << report.absent.size() << " model tensors not in the file (random init)";
    if (report.unused) log_ << ", " << report.unused << " file tensors unused";
    log_ << "\n";
  } else {
    log_ << log_prefix() << "weights: none given, random initialisation (N(0, 0.02))\n";
  }
  model_->to(device_);
  if (opt_.probe_bmax) opt_.b_max = probe_bmax();

  lengths_ = data_.lengths;
  shape_.G = G_;
  shape_.B = opt_.global_batch;
  shape_.max_length = opt_.max_length;
  shape_.b_max = opt_.b_max;
  shape_.micro_batches = opt_.micro_batches;
  shape_.seed = opt_.seed;
  // The library's messages name the policy or file; the user typed an option.
  const auto naming = [](const std::string& option, const auto& make) {
    try {
      return make();
    } catch (const ddpsim::UsageError& e) {
      throw ddpsim::UsageError(option + ": " + e.what());
    } catch (const ddpsim::InputError& e) {
      throw ddpsim::InputError(option + ": " + e.what());
    }
  };
  if (!opt_.perf_model.empty())
    shape_.time_cost = naming("--perf-model", [&] {
      return std::make_shared<ddpsim::ModelTimeCost>(
          std::make_shared<const ddpsim::PerfModel>(ddpsim::load_perf_model(opt_.perf_model)));
    });
  else if (opt_.policy.find("cost=model") != std::string::npos)
    throw ddpsim::UsageError("--policy " + opt_.policy +
                             " balances predicted time: give --perf-model (a ddpsim model JSON or a built-in name)");
  policy_ = naming("--policy " + opt_.policy,
                   [&] { return ddpsim::make_scheduler(ddpsim::parse_policy_spec(opt_.policy), policy_shape()); });
  if (lengths_.size() < static_cast<std::size_t>(G_)) {
    std::string source = opt_.synthetic_lengths.empty() ? "--data " : "--synthetic-samples";
    source += opt_.synthetic_lengths.empty() ? opt_.data : std::string();
    throw ddpsim::InputError(source + ": " + std::to_string(lengths_.size()) + " samples, fewer than the " +
                             std::to_string(G_) + " ranks sharing them");
  }
  // A step larger than the dataset would train on samples twice (the sampler's next epoch);
  // only a token budget sizes its steps without --global-batch, and a profile runs no policy.
  if (!opt_.profiling && ddpsim::parse_policy_spec(opt_.policy).name != "token_budget" &&
      lengths_.size() < static_cast<std::size_t>(opt_.global_batch)) {
    std::string source = opt_.synthetic_lengths.empty() ? "--data " : "--synthetic-samples";
    source += opt_.synthetic_lengths.empty() ? opt_.data : std::string();
    throw ddpsim::InputError(source + ": " + std::to_string(lengths_.size()) + " samples, fewer than --global-batch " +
                             std::to_string(opt_.global_batch) + ": a step would train on samples twice");
  }
  sampler_ = std::make_unique<ddpsim::DistributedSampler>(lengths_, G_, opt_.seed);
  buffers_ = std::make_unique<ddpsim::RankBuffers>(*sampler_);
  if (real_ranks()) {
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) comm_->broadcast(p, /*root=*/0);  // every rank starts from rank 0's weights
    std::vector<torch::Tensor> params = model_->parameters();
    constexpr double MiB = 1024.0 * 1024.0;
    buckets_ = std::make_unique<GradBuckets>(params, *comm_, opt_.bucket_mb * MiB, opt_.first_bucket_mb * MiB);
  }
  if (opt_.emulate_ranks > 0)
    emulated_allreduce_ms_ =
        modelled_allreduce_ms(ddp_bucket_bytes(), G_, opt_.emulate_link_GBps, opt_.emulate_latency_us);
  optimizer_ = std::make_unique<AdamW>(model_->parameters(), opt_.lr, opt_.weight_decay,
                                       resolve_optimizer_impl(opt_.optimizer_impl, device_));
  torch::manual_seed(opt_.seed + 1000 + static_cast<std::uint64_t>(rank_));  // each rank its own dropout stream
  if (!opt_.resume.empty()) load_checkpoint(opt_.resume);
  rng_ = rng_state(device_);
}

Trainer::~Trainer() = default;

std::vector<double> Trainer::ddp_bucket_bytes() const {
  constexpr double MiB = 1024.0 * 1024.0;
  return GradBuckets::plan_bytes(model_->parameters(), opt_.bucket_mb * MiB, opt_.first_bucket_mb * MiB);
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
  optimizer_->set_lr(lr_at(step_));
  model_->train();

  const Passes passes = forward_backward(plan, timer);
  const auto &fwd = passes.fwd_ms, &bwd = passes.bwd_ms, &loss = passes.loss, &mem = passes.peak_mem_mib;
  const std::size_t wait_start = passes.next_mark, wait_end = wait_start + 1, opt_end = wait_start + 2;
  timer.mark(wait_start);
  if (buckets_) buckets_->wait();
  timer.mark(wait_end);
  if (buckets_) buckets_->unpack();  // DDP's copy out of the buckets: timed with the optimizer, as --profile does
  if (opt_.clip_norm > 0) torch::nn::utils::clip_grad_norm_(model_->parameters(), opt_.clip_norm);
  optimizer_->step();
  optimizer_->zero_grad();  // for the next step; timed with the optimizer, as --profile times it
  timer.mark(opt_end);
  const double opt_ms = timer.ms(wait_end, opt_end);

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
    put(rank_, timer.ms(passes.backward_end, wait_end), timer.ms(0, opt_end));
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

std::vector<std::pair<std::string, std::string>> Trainer::metadata() const {
  std::string device = device_.is_cuda() ? "cuda" : "cpu";
#ifdef DDPTRAIN_CUDA
  if (device_.is_cuda()) device = at::cuda::getDeviceProperties(device_.index())->name;
#endif
  std::vector<std::pair<std::string, std::string>> m = {{"tool", "ddptrain"},
                                                        {"device", device},
                                                        {"world_size", std::to_string(comm_ ? comm_->size() : 1)},
                                                        {"emulated_ranks", std::to_string(opt_.emulate_ranks)},
                                                        {"backend", comm_ ? comm_->backend() : "none"},
                                                        {"libtorch", TORCH_VERSION},
                                                        {"attention", "padded"},
                                                        {"attention_kernel", attention_kind()},
                                                        {"precision", precision_name(opt_.precision)},
                                                        {"optimizer_impl", optimizer_impl_name(optimizer_->impl())},
                                                        {"seed", std::to_string(opt_.seed)},
                                                        {"policy", opt_.profiling ? "profile" : policy_label()},
                                                        {"global_batch", std::to_string(opt_.global_batch)},
                                                        {"model", opt_.model_size},
                                                        {"data", data_.description}};
#ifdef DDPTRAIN_CUDA
  if (device_.is_cuda()) {  // versions as CUDA encodes them: 1000·major + 10·minor
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    m.emplace_back("cuda_runtime", std::to_string(runtime));
    m.emplace_back("cuda_driver", std::to_string(driver));
  }
#endif
  if (!device_.is_cuda()) {
    m.emplace_back("threads", std::to_string(at::get_num_threads()));
    m.emplace_back("cpus", cpu_placement());
  }
  if (opt_.emulate_ranks > 0)
    m.emplace_back("allreduce", "modelled: ring alpha-beta over " + std::to_string(opt_.emulate_link_GBps) + " GB/s, " +
                                    std::to_string(opt_.emulate_latency_us) +
                                    " us per step, buckets back to back "
                                    "after the slowest rank (no overlap); NOT a real " +
                                    std::to_string(G_) + "-GPU run");
  else
    m.emplace_back("allreduce", real_ranks() ? "measured: bucketed, overlapped with backward" : "none (one rank)");
  if (!opt_.interleaved.empty()) {
    std::string turns;
    for (const auto& p : opt_.interleaved) turns += (turns.empty() ? "" : ",") + p;
    m.emplace_back("interleaved", "one step of each policy in turn: " + turns);
  }
  // Only where it pads: a run without it writes the trace it wrote before the option existed.
  if (opt_.pad_to_multiple_of > 1 && !opt_.profiling)
    m.emplace_back("pad_to_multiple_of", std::to_string(opt_.pad_to_multiple_of));
  if (opt_.profiled_alongside)
    m.emplace_back("profile_alongside", "one step of a profile grid after each turn (OUT/profile/steps.csv)");
  return m;
}

}  // namespace ddptrain
