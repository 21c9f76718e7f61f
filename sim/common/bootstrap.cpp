#include "common/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/rng.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

constexpr int RESAMPLES = 2000;
constexpr std::uint64_t SEED = 0x9e3779b97f4a7c15;  // fixed: an interval is a function of its data

std::size_t block_length(std::size_t n) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(std::cbrt(static_cast<double>(n)))));
}

using Blocks = std::vector<std::size_t>;  // start indices of one resample's blocks

// The blocks of one resample of n steps (the last block cut to length).
Blocks draw_blocks(Rng& rng, std::size_t n) {
  const std::size_t len = block_length(n), starts = n - len + 1;
  Blocks out;
  for (std::size_t filled = 0; filled < n; filled += len) out.push_back(rng.below(starts));
  return out;
}

// The blocks of every resample of n steps, drawn in order from the seeded stream.
std::vector<Blocks> draw_all(Rng& rng, std::size_t n) {
  std::vector<Blocks> blocks(RESAMPLES);
  for (Blocks& b : blocks) b = draw_blocks(rng, n);
  return blocks;
}

// Calls f on each value of the resample the blocks give, in the resample's order.
template <class F>
void visit(std::size_t n, const Blocks& blocks, F f) {
  const std::size_t len = block_length(n);
  std::size_t taken = 0;
  for (std::size_t start : blocks)
    for (std::size_t i = start; i < start + len && taken < n; ++i, ++taken) f(i);
}

// The mean of one resample, summed in the resample's order (as mean() of it would).
double resampled_mean(std::span<const double> x, const Blocks& blocks) {
  double sum = 0;
  visit(x.size(), blocks, [&](std::size_t i) { sum += x[i]; });
  return x.empty() ? 0.0 : sum / static_cast<double>(x.size());
}

// The statistic of every resample, the draws made beforehand and in order, so that the values
// are those of one thread; computed on two threads where the machine has them.
// `stat(r, scratch)`: resample r's value, with a scratch of the worker's own.
template <class Scratch, class F>
std::vector<double> over_resamples(F stat) {
  std::vector<double> values(RESAMPLES);
  const auto work = [&](int from, int to) {
    Scratch scratch;
    for (int r = from; r < to; ++r) values[static_cast<std::size_t>(r)] = stat(r, scratch);
  };
  if (std::thread::hardware_concurrency() < 2) {
    work(0, RESAMPLES);
  } else {
    std::thread other(work, RESAMPLES / 2, RESAMPLES);
    work(0, RESAMPLES / 2);
    other.join();
  }
  return values;
}

Interval central_95(std::vector<double>& values) {
  return {percentile_in_place(values, 2.5), percentile_in_place(values, 97.5)};
}

// Percentiles of resamples of one series by counting, not sorting: the series is ranked once,
// so a resample is a multiset of ranks; a pass counts them into buckets of 64 ranks, which finds
// the buckets of the order statistics wanted, and a second pass sorts just those. Exactly the
// value a sort of the resample gives, in two linear passes over small integers (sorting each of
// a 50,000-step run's 2,000 resamples took most of a validation's time).
class RankedSeries {
 public:
  struct Scratch {
    std::vector<std::uint32_t> counts, picked;
  };

  explicit RankedSeries(std::span<const double> x) : rank_(x.size()), sorted_(x.size()) {
    std::vector<std::uint32_t> order(x.size());
    for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) { return x[a] < x[b]; });
    for (std::uint32_t r = 0; r < order.size(); ++r) rank_[order[r]] = r, sorted_[r] = x[order[r]];
  }

  // Percentile q of the resample the blocks give, interpolated as percentile() does.
  double percentile(const Blocks& blocks, double q, Scratch& s) const {
    const std::size_t n = rank_.size();
    const double position = q / 100.0 * static_cast<double>(n - 1);
    const auto lo = static_cast<std::size_t>(std::floor(position));
    const std::size_t hi = std::min(lo + 1, n - 1);
    s.counts.assign((n >> kShift) + 1, 0);
    visit(n, blocks, [&](std::size_t i) { ++s.counts[rank_[i] >> kShift]; });
    std::size_t below = 0, first = 0;  // ranks in the buckets before `first`, which holds the lo-th
    while (below + s.counts[first] <= lo) below += s.counts[first++];
    std::size_t last = first, through = below + s.counts[first];
    while (through <= hi) through += s.counts[++last];
    s.picked.clear();
    visit(n, blocks, [&](std::size_t i) {
      if (const std::size_t bucket = rank_[i] >> kShift; bucket >= first && bucket <= last)
        s.picked.push_back(rank_[i]);
    });
    std::sort(s.picked.begin(), s.picked.end());
    const double at_lo = sorted_[s.picked[lo - below]], at_hi = sorted_[s.picked[hi - below]];
    return at_lo + (position - static_cast<double>(lo)) * (at_hi - at_lo);
  }

 private:
  static constexpr int kShift = 6;
  std::vector<std::uint32_t> rank_;
  std::vector<double> sorted_;
};

struct NoScratch {};

}  // namespace

Interval mean_interval(std::span<const double> steps) {
  if (steps.empty()) return {};
  Rng rng(SEED);
  const std::vector<Blocks> blocks = draw_all(rng, steps.size());
  auto values = over_resamples<NoScratch>(
      [&](int r, NoScratch&) { return resampled_mean(steps, blocks[static_cast<std::size_t>(r)]); });
  return central_95(values);
}

Interval p95_interval(std::span<const double> steps) {
  if (steps.empty()) return {};
  Rng rng(SEED);
  const std::vector<Blocks> blocks = draw_all(rng, steps.size());
  const RankedSeries ranked(steps);
  auto values = over_resamples<RankedSeries::Scratch>(
      [&](int r, RankedSeries::Scratch& s) { return ranked.percentile(blocks[static_cast<std::size_t>(r)], 95, s); });
  return central_95(values);
}

Interval gain_interval(std::span<const double> policy, std::span<const double> baseline, bool paired) {
  return gain_interval_per_sample(policy, {}, baseline, {}, paired);
}

Interval gain_interval_per_sample(std::span<const double> policy, std::span<const double> policy_samples,
                                  std::span<const double> baseline, std::span<const double> baseline_samples,
                                  bool paired) {
  if (policy.empty() || baseline.empty()) return {};
  const bool per_sample = !policy_samples.empty() && !baseline_samples.empty();
  if (per_sample && (policy_samples.size() != policy.size() || baseline_samples.size() != baseline.size()))
    throw std::invalid_argument("gain_interval_per_sample: a run's samples and step times differ in length");
  paired = paired && policy.size() == baseline.size();
  Rng rng(SEED);
  std::vector<Blocks> policy_blocks(RESAMPLES), baseline_blocks(paired ? 0 : RESAMPLES);
  for (int r = 0; r < RESAMPLES; ++r) {
    policy_blocks[static_cast<std::size_t>(r)] = draw_blocks(rng, policy.size());
    if (!paired) baseline_blocks[static_cast<std::size_t>(r)] = draw_blocks(rng, baseline.size());
  }
  auto gains = over_resamples<NoScratch>([&](int r, NoScratch&) {
    const Blocks& own = policy_blocks[static_cast<std::size_t>(r)];
    const Blocks& base = paired ? own : baseline_blocks[static_cast<std::size_t>(r)];
    double p = resampled_mean(policy, own), b = resampled_mean(baseline, base);
    if (per_sample) p /= resampled_mean(policy_samples, own), b /= resampled_mean(baseline_samples, base);
    return 100 * (1 - p / b);
  });
  return central_95(gains);
}

}  // namespace ddpsim
