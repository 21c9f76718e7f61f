// The compute noise of a calibration, from how a shape's repetitions on one rank spread: one σ,
// or two compute regimes split at a knee of padded tokens per rank-step, whichever predicts
// held-out repetitions better. On an accelerator the launch-bound shapes spread by σ ≈ 0.08 and
// the compute-bound ones by σ ≈ 0.002 (the H100 profiles): one σ for both inflates the slowest of
// a balanced step's compute-bound ranks.
#pragma once

#include <cstdint>
#include <vector>

namespace ddpsim {

// One shape's repetitions on one rank: the log of measured over the surface, each.
struct NoiseGroup {
  long long tokens = 0;  // padded tokens of the shape (Σ s when packed)
  int shape = 0;         // shapes numbered in their order: groups of one shape on several ranks share it
  std::vector<double> logs;
};

// A calibration's rows as the noise sees them: groups in (shape, rank) order, and each row's
// step (rows of one step were timed together), group and log of measured over the surface.
struct NoiseSample {
  std::vector<NoiseGroup> groups;
  struct Row {
    long step;
    int group;
    double log;
  };
  std::vector<Row> rows;
};

struct NoiseRegimes {
  long long knee_tokens = 0;  // 0: one regime, sigma_below holds for all
  double sigma_below = 0, sigma_above = 0;
  int groups_below = 0, groups_above = 0;  // repeated groups each side
  // Mean held-out log-likelihood of a repetition's deviation from its group's mean (nats), by
  // group-wise cross-validation: one σ, and the best knee's two (equal when no knee was tried).
  double heldout_one = 0, heldout_two = 0;
  int folds = 0;  // 0: too few groups to cross-validate, one σ kept
  int knees_tried = 0;
  // The best knee's two σ's differ by chance with this probability (F-test, Bonferroni over the
  // knees tried); 1 where no knee beat one σ held out.
  double p_value = 1;
  long long best_knee = 0;  // the knee held out best, kept or not
};

// A knee is kept when it beats one σ held out and p_value is below this.
inline constexpr double kRegimeAlpha = 0.01;

// Fewer repeated groups than this on a side of a knee leave its σ to chance.
inline constexpr int kMinRegimeGroups = 4;

// The pooled within-group σ of log time over groups of two or more repetitions (0 without any).
double pooled_sigma(const std::vector<NoiseGroup>& groups);

// Every knee between two distinct token counts with kMinRegimeGroups repeated groups each side is
// tried; the one with the best held-out likelihood is kept when it beats one σ. `folds` groups
// dealt in an order seeded by `seed`, as the forms' cross-validation deals shapes.
NoiseRegimes fit_noise_regimes(const std::vector<NoiseGroup>& groups, int folds, std::uint64_t seed);

struct Calibration;
struct CalibrationOptions;

// The noise of a calibration, in c: each rank-step's σ (by regime where two fit better), split
// into a rank's own and a step's shared where ranks timed steps together; the slow spells (how
// far each repeated group sits from the surface: a spell lifts all of a group's repetitions) by
// regime; the level that makes the surface a quiet machine's mean time (c.mean_scale); and the
// P95/P50 the model then draws.
void fit_noise(const NoiseSample& sample, const CalibrationOptions& options, Calibration& c);

}  // namespace ddpsim
