// The block bootstrap behind every interval validate reports: it must cover what it claims,
// be repeatable, and let pairing cancel a drift that both runs share.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>
#include <vector>

#include "common/bootstrap.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"

using namespace ddpsim;

namespace {

std::vector<double> noisy(std::uint64_t seed, std::size_t n, double level, double sigma) {
  Rng rng(seed);
  std::vector<double> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(level + sigma * rng.normal());
  return x;
}

}  // namespace

TEST_CASE("a mean's interval has the width independent steps give, and is the same every time") {
  const auto x = noisy(1, 400, 100, 10);
  const Interval ci = mean_interval(x);
  CHECK(ci.contains(mean(x)));
  const double width = ci.high - ci.low, expected = 2 * 1.96 * 10 / std::sqrt(400.0);
  CHECK(width > 0.7 * expected);
  CHECK(width < 1.3 * expected);
  const Interval again = mean_interval(x);
  CHECK(again.low == ci.low);
  CHECK(again.high == ci.high);
  CHECK(p95_interval(x).contains(percentile(x, 95)));
}

TEST_CASE("over many runs, the mean's 95% interval holds the true mean about 95 times in 100") {
  int covered = 0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) covered += mean_interval(noisy(seed, 200, 50, 5)).contains(50);
  CHECK(covered >= 175);  // 95% of 200 = 190; a block bootstrap runs a little narrow at n = 200
  CHECK(covered <= 200);
}

TEST_CASE("pairing runs trained in turn cancels the drift they share") {
  // Both runs slow down by half over their steps (a machine warming up); the policy is 5% faster.
  Rng rng(7);
  std::vector<double> base, policy;
  for (int i = 0; i < 300; ++i) {
    const double level = 100 * (1 + 0.5 * i / 300.0);
    base.push_back(level * (1 + 0.02 * rng.normal()));
    policy.push_back(0.95 * level * (1 + 0.02 * rng.normal()));
  }
  const Interval paired = gain_interval(policy, base, true), apart = gain_interval(policy, base, false);
  CHECK(paired.contains(5.0));
  CHECK(apart.contains(5.0));
  CHECK(paired.high - paired.low < 0.5 * (apart.high - apart.low));
  // The same series: no gain, and an interval that says so.
  CHECK(gain_interval(base, base, true).contains(0));
  // Unequal lengths cannot be paired: resampled apart, still an interval.
  const std::vector<double> shorter(base.begin(), base.begin() + 200);
  CHECK(gain_interval(shorter, base, true).low < gain_interval(shorter, base, true).high);
  CHECK(mean_interval(std::vector<double>{}).low == 0);
}

namespace {

// The bootstrap as first written, resample by resample, each sorted: the oracle the counting
// selection must match value for value.
Interval naive_p95_interval(const std::vector<double>& x) {
  const std::size_t n = x.size();
  const auto len = std::max<std::size_t>(1, static_cast<std::size_t>(std::lround(std::cbrt(static_cast<double>(n)))));
  Rng rng(0x9e3779b97f4a7c15);
  std::vector<double> values;
  for (int r = 0; r < 2000; ++r) {
    std::vector<std::size_t> starts;
    for (std::size_t filled = 0; filled < n; filled += len) starts.push_back(rng.below(n - len + 1));
    std::vector<double> resample;
    for (std::size_t start : starts)
      for (std::size_t i = start; i < start + len && resample.size() < n; ++i) resample.push_back(x[i]);
    std::sort(resample.begin(), resample.end());
    const double rank = 0.95 * static_cast<double>(n - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    const std::size_t hi = std::min(lo + 1, n - 1);
    values.push_back(resample[lo] + (rank - static_cast<double>(lo)) * (resample[hi] - resample[lo]));
  }
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    const double rank = q / 100 * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(rank));
    return values[lo] + (rank - static_cast<double>(lo)) * (values[lo + 1] - values[lo]);
  };
  return {at(2.5), at(97.5)};
}

}  // namespace

TEST_CASE("a gain per sample is the step gain once each run's samples are divided out") {
  std::vector<double> policy(120), baseline(120);
  Rng rng(5);
  for (std::size_t i = 0; i < policy.size(); ++i)
    policy[i] = 150 + 20 * rng.uniform(), baseline[i] = 100 + 20 * rng.uniform();
  // Constant samples a step: 64 against 48, so per sample the policy's time is ×0.75.
  const std::vector<double> own(policy.size(), 64), base(baseline.size(), 48);
  std::vector<double> scaled = policy;
  for (double& t : scaled) t *= 0.75;
  for (bool paired : {true, false}) {
    const Interval a = gain_interval_per_sample(policy, own, baseline, base, paired);
    const Interval b = gain_interval(scaled, baseline, paired);
    CHECK(a.low == doctest::Approx(b.low).epsilon(1e-9));
    CHECK(a.high == doctest::Approx(b.high).epsilon(1e-9));
  }
}

TEST_CASE("a gain per sample resamples each step's samples with its time") {
  // Every step takes the same time per sample (2 ms in the policy, 3 in the baseline), its
  // samples drawn at random: only samples drawn with their own steps give exactly 1 - 2/3.
  Rng rng(7);
  const auto run = [&](std::size_t steps, double ms_per_sample, std::vector<double>& times) {
    std::vector<double> samples(steps);
    times.resize(steps);
    for (std::size_t i = 0; i < steps; ++i) samples[i] = 20 + rng.below(40), times[i] = ms_per_sample * samples[i];
    return samples;
  };
  std::vector<double> policy, baseline;
  for (const auto& [paired, policy_steps] : {std::pair{true, 150}, std::pair{false, 130}}) {
    const std::vector<double> own = run(static_cast<std::size_t>(policy_steps), 2.0, policy),
                              base = run(150, 3.0, baseline);
    const Interval g = gain_interval_per_sample(policy, own, baseline, base, paired);
    CHECK(g.low == doctest::Approx(100.0 / 3).epsilon(1e-9));
    CHECK(g.high == doctest::Approx(100.0 / 3).epsilon(1e-9));
  }
  CHECK_THROWS_AS(gain_interval_per_sample(policy, {policy.data(), 3}, baseline, baseline, true),
                  std::invalid_argument);
}

TEST_CASE("P95 intervals by counting ranks equal the sorted resamples' exactly, ties and short runs included") {
  for (std::size_t n : {1, 2, 7, 64, 65, 300, 5000}) {
    std::vector<double> x = noisy(n, n, 50, 8);
    for (std::size_t i = 0; i < n; i += 3) x[i] = std::round(x[i]);  // ties
    const Interval fast = p95_interval(x), naive = naive_p95_interval(x);
    CHECK(fast.low == naive.low);
    CHECK(fast.high == naive.high);
  }
}

TEST_CASE("percentile_in_place selects what a sort gives") {
  Rng rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> x(1 + rng.below(300));
    for (double& v : x) v = std::round(10 * rng.normal());
    std::vector<double> sorted = x;
    std::sort(sorted.begin(), sorted.end());
    for (double q : {0.0, 2.5, 50.0, 95.0, 97.5, 100.0}) {
      const double rank = q / 100 * static_cast<double>(x.size() - 1);
      const auto lo = static_cast<std::size_t>(std::floor(rank));
      const std::size_t hi = std::min(lo + 1, x.size() - 1);
      std::vector<double> scratch = x;
      CHECK(percentile_in_place(scratch, q) ==
            sorted[lo] + (rank - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]));
    }
  }
}
