// The block bootstrap behind every interval validate reports: it must cover what it claims,
// be repeatable, and let pairing cancel a drift that both runs share.
#include <doctest/doctest.h>

#include <cmath>
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
