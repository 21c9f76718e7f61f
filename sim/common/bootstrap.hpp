// 95% intervals for a run's mean, P95 and a gain between two runs, from their per-step series
// by a moving-block bootstrap: step times drift and cluster (a slow spell spans many steps), so
// resampling single steps would understate the spread; blocks of about n^(1/3) steps keep that
// correlation. Hand-written because no library at hand does a block bootstrap; seeded, so the
// same series give the same interval everywhere.
#pragma once

#include <span>

namespace ddpsim {

struct Interval {
  double low = 0, high = 0;
  bool contains(double x) const { return low <= x && x <= high; }
};

// The statistic's 2.5th and 97.5th percentiles over bootstrap resamples of `steps`.
Interval mean_interval(std::span<const double> steps);
Interval p95_interval(std::span<const double> steps);

// Gain of `policy` over `baseline` in %, 100 · (1 − mean(policy) / mean(baseline)). `paired`:
// step k of both ran together (policies trained in turn; equal lengths), so the same blocks are
// drawn from both and the machine's drift cancels; otherwise each run is resampled alone.
Interval gain_interval(std::span<const double> policy, std::span<const double> baseline, bool paired);
// The same gain per sample: each run's mean step time over its mean samples a step, the samples
// resampled with their steps (a policy that trains more samples a step, token_budget's kind).
Interval gain_interval_per_sample(std::span<const double> policy, std::span<const double> policy_samples,
                                  std::span<const double> baseline, std::span<const double> baseline_samples,
                                  bool paired);

}  // namespace ddpsim
