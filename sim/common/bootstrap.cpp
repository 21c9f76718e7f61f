#include "common/bootstrap.hpp"

#include <algorithm>
#include <cmath>
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

// Start indices of the blocks of one resample of n steps (the last block cut to length).
std::vector<std::size_t> draw_blocks(Rng& rng, std::size_t n) {
  const std::size_t len = block_length(n), starts = n - len + 1;
  std::vector<std::size_t> out;
  for (std::size_t filled = 0; filled < n; filled += len) out.push_back(rng.below(starts));
  return out;
}

std::vector<double> resample(std::span<const double> x, const std::vector<std::size_t>& blocks) {
  const std::size_t len = block_length(x.size());
  std::vector<double> out;
  out.reserve(x.size());
  for (std::size_t start : blocks)
    for (std::size_t i = start; i < start + len && out.size() < x.size(); ++i) out.push_back(x[i]);
  return out;
}

Interval one_run(std::span<const double> steps, double (*statistic)(std::span<const double>)) {
  if (steps.empty()) return {};
  Rng rng(SEED);
  std::vector<double> values;
  values.reserve(RESAMPLES);
  for (int r = 0; r < RESAMPLES; ++r) values.push_back(statistic(resample(steps, draw_blocks(rng, steps.size()))));
  return {percentile(values, 2.5), percentile(values, 97.5)};
}

double p95(std::span<const double> x) { return percentile(x, 95); }
double average(std::span<const double> x) { return mean(x); }

}  // namespace

Interval mean_interval(std::span<const double> steps) { return one_run(steps, average); }
Interval p95_interval(std::span<const double> steps) { return one_run(steps, p95); }

Interval gain_interval(std::span<const double> policy, std::span<const double> baseline, bool paired) {
  if (policy.empty() || baseline.empty()) return {};
  paired = paired && policy.size() == baseline.size();
  Rng rng(SEED);
  std::vector<double> gains;
  gains.reserve(RESAMPLES);
  for (int r = 0; r < RESAMPLES; ++r) {
    const auto blocks = draw_blocks(rng, policy.size());
    const double p = mean(resample(policy, blocks));
    const double b = mean(resample(baseline, paired ? blocks : draw_blocks(rng, baseline.size())));
    gains.push_back(100 * (1 - p / b));
  }
  return {percentile(gains, 2.5), percentile(gains, 97.5)};
}

}  // namespace ddpsim
