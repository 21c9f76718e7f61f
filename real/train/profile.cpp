// ddptrain --profile: the measurements ddpsim calibrate fits. Training steps over a (b, L) grid,
// by one process or by every rank at once; then, with several ranks, the collectives
// (profile_comm.cpp). Each point warms up until its timing settles (or a fixed count), points are
// visited in a seeded random order so that drift spreads over the grid instead of landing in one
// corner, and every repetition is a trace row. --profile-alongside times the same grid a step at
// a time between the turns of training runs.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <filesystem>
#include <functional>
#include <span>
#include <tuple>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"
#include "report/outputs.hpp"
#include "train/profile_support.hpp"
#include "train/step_timer.hpp"
#include "train/trainer.hpp"

namespace ddptrain {

int warm_up(const std::function<double()>& once, int fixed, int cap, const std::function<bool(bool)>& all) {
  if (fixed >= 0) {
    for (int i = 0; i < fixed; ++i) once();
    return fixed;
  }
  std::vector<double> times;
  while (static_cast<int>(times.size()) < cap) {
    times.push_back(once());
    const std::size_t n = times.size();
    bool settled = false;
    if (n >= 6) {
      const double recent = ddpsim::percentile(std::vector<double>(times.end() - 3, times.end()), 50);
      const double before = ddpsim::percentile(std::vector<double>(times.end() - 6, times.end() - 3), 50);
      settled = std::abs(recent - before) <= 0.05 * recent;
    }
    if (all(settled)) break;
  }
  return static_cast<int>(times.size());
}

ddpsim::RankStep shape_row(int b, int L) {
  ddpsim::RankStep row;
  row.batch_size = b;
  row.max_len = L;
  row.real_tokens = row.padded_tokens = std::int64_t{b} * L;
  row.global_batch = b;
  row.loss_weight = 1;
  return row;
}

namespace {

std::string warmup_text(const ProfileOptions& p) {
  return p.warmup >= 0 ? std::to_string(p.warmup)
                       : "auto (until the median of 3 runs is within 5% of the 3 before, at most " +
                             std::to_string(p.max_warmup) + ")";
}

}  // namespace

int Trainer::rank_batch_cap() const {
  return opt_.b_max.empty() ? opt_.global_batch : std::min(opt_.global_batch, opt_.b_max[0]);
}

std::vector<int> Trainer::auto_profile_batches() const {
  const int cap = rank_batch_cap();
  std::vector<int> batches;
  for (int b : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512})
    if (b <= cap) batches.push_back(b);
  if (batches.empty() || batches.back() != cap) batches.push_back(cap);
  return batches;
}

std::vector<int> Trainer::auto_profile_lengths(const std::vector<int>& batches) const {
  // Where real steps fall: the padded length of a rank's batch is the longest of its b samples,
  // so the quantiles of that maximum over random batches of every profiled size.
  ddpsim::Rng rng(opt_.seed ^ 0x51ed270b27e5f1a9ULL);
  std::vector<double> longest;
  for (int b : batches)
    for (int draw = 0; draw < 500; ++draw) {
      int L = 0;
      for (int i = 0; i < b; ++i) L = std::max(L, lengths_[rng.below(lengths_.size())]);
      longest.push_back(L);
    }
  std::vector<int> lengths;
  for (double q : {0.0, 2.0, 10.0, 25.0, 50.0, 75.0, 90.0, 98.0})
    lengths.push_back(std::max(2, static_cast<int>(std::lround(ddpsim::percentile(longest, q)))));
  lengths.push_back(std::min(opt_.max_length, *std::max_element(lengths_.begin(), lengths_.end())));
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  return lengths;
}

std::vector<std::pair<int, int>> Trainer::begin_profile(ProfileOptions& p) {
  if (opt_.emulate_ranks > 0) throw ddpsim::UsageError("--profile measures real devices: drop --emulate-ranks");
  if (p.reps < 1) throw ddpsim::UsageError("--profile-reps must be at least 1");
  if (p.batches.empty()) p.batches = auto_profile_batches();
  for (int b : p.batches)  // a profiled step is one rank's batch
    if (b > rank_batch_cap())
      throw ddpsim::UsageError("--profile-batches: " + std::to_string(b) + " is more than a rank's batch can be (" +
                               std::to_string(rank_batch_cap()) + ": --global-batch" +
                               (opt_.b_max.empty() ? "" : " or --bmax") + ")");
  if (p.lengths.empty()) p.lengths = auto_profile_lengths(p.batches);
  if (p.bytes.empty()) {  // a ladder for the line's shape, and the sizes a training step reduces
    p.bytes = {64 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
    for (double size : ddp_bucket_bytes())
      if (size <= INT_MAX && std::find(p.bytes.begin(), p.bytes.end(), int(size)) == p.bytes.end())
        p.bytes.push_back(int(size));
  }
  // Several ranks time the grid together, each on its own cores, because that is how they
  // train: a core runs slower while its neighbours work (shared caches, memory bandwidth).
  // Their DDP buckets fill and unpack as in training (hooks in backward, the copy-out with the
  // optimizer) but are never reduced, so that only communication is left out.
  if (buckets_) buckets_->set_communicate(false);
  std::vector<std::pair<int, int>> points;
  for (int L : p.lengths) {
    if (L < 2 || L > opt_.max_length)
      throw ddpsim::UsageError("--profile-lengths: " + std::to_string(L) +
                               " is outside 2 (a [CLS] and a [SEP] token) to --max-length " +
                               std::to_string(opt_.max_length));
    for (int b : p.batches)
      if (opt_.b_max.empty() || b <= opt_.b_max[0]) points.emplace_back(b, L);
  }
  if (points.empty()) throw ddpsim::InputError("--profile: no (batch size, length) pair fits --max-length and --bmax");
  ddpsim::Rng(opt_.seed).shuffle(std::span(points));
  return points;
}

ddpsim::RankStep Trainer::profiled_step(const Batch& batch, int b, int L) {
  if (real_ranks()) comm_->barrier();
  if (buckets_) buckets_->prepare();
  StepTimer timer(device_);
  timer.reset_peak_memory();
  model_->train();
  timer.mark(0);
  const auto loss = mean_loss(batch);
  timer.mark(1);
  loss.backward();
  timer.mark(2);
  if (buckets_) buckets_->finish();
  timer.mark(3);
  optimizer_->step();
  timer.mark(4);
  optimizer_->zero_grad();  // for the next step, as training times it
  timer.mark(5);
  ddpsim::RankStep row = shape_row(b, L);
  row.comm_wait_ms = 0;
  row.fwd_ms = timer.ms(0, 1);
  row.bwd_ms = timer.ms(1, 2);
  row.opt_ms = timer.ms(2, 5);
  row.step_ms = timer.ms(0, 5);
  // The update alone, the part of the optimizer's time that ZeRO shards (the copy out of the
  // buckets and clearing the gradients stay whole-model work).
  if (row.opt_ms > 0) update_shares_.push_back(timer.ms(3, 4) / row.opt_ms);
  row.peak_mem_mib = timer.peak_memory_mib();
  row.loss = loss.item<double>();
  return row;
}

void Trainer::profile(ProfileOptions p) {
  const auto points = begin_profile(p);
  const bool together = real_ranks();
  log_ << "profile: " << points.size() << " (b, L) points in a seeded random order, warm-up " << warmup_text(p) << ", "
       << p.reps << " timed steps each\n";
  std::vector<ddpsim::RankStep> rows;
  int timed = 0, warmups = 0;
  const auto start = std::chrono::steady_clock::now();
  for (const auto& [b, L] : points) {
    const Batch batch = full_batch(b, L, device_);
    ddpsim::RankStep row;
    const auto run_step = [&] {
      row = profiled_step(batch, b, L);
      return row.step_ms;
    };
    warmups += together ? warm_up(run_step, p.warmup, p.max_warmup,
                                  [&](bool settled) { return agree_max(settled ? 0 : 1) == 0; })
                        : warm_up(run_step, p.warmup, p.max_warmup);
    for (int r = 0; r < p.reps; ++r) {
      run_step();
      row.step = timed++;
      rows.push_back(row);
    }
    log_ << "profile: [" << rows.size() / static_cast<std::size_t>(p.reps) << "/" << points.size() << "] b=" << b
         << " L=" << L << " forward " << rows.back().fwd_ms << " ms, backward " << rows.back().bwd_ms << " ms ("
         << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s)\n";
  }
  end_profile(p, std::move(rows),
              "warmup " + warmup_text(p) + " (" + std::to_string(warmups) + " runs in all), repetitions " +
                  std::to_string(p.reps) + ", " + std::to_string(points.size()) + " points in a seeded random order");
}

void Trainer::start_profile_alongside(ProfileOptions p, int turns, const std::string& trained) {
  auto points = begin_profile(p);
  if (static_cast<std::size_t>(turns) < points.size())
    throw ddpsim::UsageError("--profile-alongside times one of the grid's " + std::to_string(points.size()) +
                             " (b, L) points after each turn, and --steps " + std::to_string(turns) +
                             " turns cannot time them all: give more --steps, or fewer --profile-batches or "
                             "--profile-lengths");
  log_ << "profile alongside: " << points.size() << " (b, L) points, one after each of the " << turns
       << " turns, pass after pass in seeded random orders\n";
  alongside_ = Alongside{.options = p, .points = std::move(points), .trained = trained, .rows = {}};
}

void Trainer::profile_turn() {
  auto& a = *alongside_;
  const std::size_t n = a.points.size(), at = static_cast<std::size_t>(a.timed) % n;
  if (at == 0 && a.timed > 0)  // a fresh order for each pass, the same on every rank
    ddpsim::Rng(opt_.seed + static_cast<std::uint64_t>(a.timed) / n).shuffle(std::span(a.points));
  const auto [b, L] = a.points[at];
  ddpsim::RankStep row = profiled_step(full_batch(b, L, device_), b, L);
  row.step = a.timed++;
  a.rows.push_back(row);
  // Ranks leave a profiled step apart (nothing reduces it); the next turn's first step would
  // count the gap as its own, so they start it together, as after a trained step.
  if (real_ranks()) comm_->barrier();
}

void Trainer::finish_profile_alongside() {
  auto& a = *alongside_;
  const std::size_t n = a.points.size(), timed = static_cast<std::size_t>(a.timed);
  end_profile(a.options, std::move(a.rows),
              "alongside training (" + a.trained + "), one profiled step after each turn: " + std::to_string(timed) +
                  " steps over " + std::to_string(n) + " points in seeded random orders, each point " +
                  std::to_string(timed / n) + (timed % n ? " or " + std::to_string(timed / n + 1) : "") +
                  " times, no warm-up of its own" +
                  (real_ranks() ? "; allreduce warmup " + warmup_text(a.options) + ", repetitions " +
                                      std::to_string(a.options.reps)
                                : std::string()));
}

void Trainer::end_profile(const ProfileOptions& p, std::vector<ddpsim::RankStep> rows, std::string what) {
  const bool together = real_ranks();
  if (together) rows = every_rank(rows);
  std::vector<ddpsim::PolicyRun> runs = {{"profile", "", together ? G_ : 1, rows, {}}};
  if (buckets_) buckets_->set_communicate(true);
  std::string gathers;
  if (together) {
    runs.push_back({"allreduce", "", 1, profile_communication(p), {}});
    gathers = profile_allgather(p);
    what = "on " + std::to_string(G_) + " ranks at once; then allreduce, interference and all-gather; " + what;
  }
  if (rank_ != 0 || opt_.out.empty()) return;
  auto meta = metadata();
  meta.emplace_back("profile", what);
  if (together) {  // what ddpsim calibrate fits the allreduce line at
    std::string sizes;
    for (double size : ddp_bucket_bytes()) {
      if (!sizes.empty()) sizes += ',';
      sizes += std::to_string(std::llround(size));
    }
    meta.emplace_back("ddp_buckets", sizes);
    meta.emplace_back("allgather", gathers);
  }
  if (!update_shares_.empty())
    meta.emplace_back("optimizer_update_share", ddpsim::format("%.4f", ddpsim::percentile(update_shares_, 50)));
  ddpsim::write_outputs(opt_.out, {{"steps.csv", ddpsim::trace_csv(runs, meta)}});
  log_ << "wrote " << (std::filesystem::path(opt_.out) / "steps.csv").string() << "\n";
}

std::vector<ddpsim::RankStep> Trainer::every_rank(const std::vector<ddpsim::RankStep>& mine) {
  // What each rank timed: forward, backward, optimizer, step, peak memory, loss.
  auto values = torch::empty({static_cast<std::int64_t>(mine.size()), 6}, torch::kFloat64);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const auto& r = mine[i];
    values[static_cast<std::int64_t>(i)] =
        torch::tensor({r.fwd_ms, r.bwd_ms, r.opt_ms, r.step_ms, r.peak_mem_mib, r.loss}, torch::kFloat64);
  }
  const auto all = comm_->allgather(values.to(device_)).cpu();
  const auto at = all.accessor<double, 3>();
  std::vector<ddpsim::RankStep> rows;
  for (std::size_t i = 0; i < mine.size(); ++i)
    for (int g = 0; g < G_; ++g) {
      ddpsim::RankStep r = mine[i];
      const auto k = static_cast<std::int64_t>(i);
      r.rank = g;
      r.global_batch = r.batch_size * G_;  // every rank timed the shape: the step's B
      std::tie(r.fwd_ms, r.bwd_ms, r.opt_ms, r.step_ms, r.peak_mem_mib, r.loss) =
          std::tuple(at[g][k][0], at[g][k][1], at[g][k][2], at[g][k][3], at[g][k][4], at[g][k][5]);
      rows.push_back(r);
    }
  return rows;
}

}  // namespace ddptrain
