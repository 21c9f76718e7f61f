// The training runs' level by a rank-step's padded tokens (calibrate --training): training runs
// sit off a profile's surface by their shapes, and each run by a level of its own; the two are
// told apart where runs share shapes.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "model/perf_model.hpp"

namespace ddpsim {

// A training run's rank-step that met no shape first: its padded tokens (regime_tokens), its
// compute over the surface, its run, and its side of the profile's knee.
struct SteadyStep {
  long long tokens = 0;
  int samples = 0;  // level_samples
  double ratio = 1;
  std::size_t run = 0;
  bool above = false;
};

// A level's bin: a median of 40 rank-steps of σ ≈ 0.1 moves by about 2%, and no more than 6
// bins, so that a long run's levels are medians of hundreds.
inline constexpr std::size_t kLevelBinSteps = 40;
inline constexpr std::size_t kMaxLevelBins = 6;

// PerfModel::step_levels from `runs` runs' steady rank-steps: in token order, a bin closes once
// it holds `size` rank-steps (kLevelBinSteps, or a kMaxLevelBins-th of them where that is more)
// and the next has more tokens; each bin's median factor at its median tokens. Each run's own
// offset, read from the bins it shares with another run, is taken out of the bins and found
// again from them until they settle, so that a run of large shapes at a level of its own does
// not lend it to its shapes. Empty where the rank-steps fill fewer than two bins. Sets `size`.
std::vector<std::pair<double, double>> fit_step_levels(std::vector<SteadyStep> steady, std::size_t runs,
                                                       std::size_t& size);

// PerfModel::samples_levels: where the runs trained two batch sizes or more (a run's size: the
// samples of 80% of its steady rank-steps or more), each by two runs or more (10 steady
// rank-steps each, kLevelBinSteps in all), fit_step_levels over each size's runs alone (a size
// of one bin: its median, flat), sizes ascending; else empty, and one table by tokens stands
// for all. Sets `size` to the fewest rank-steps a bin of any size held.
std::vector<SampleLevels> fit_samples_levels(const std::vector<SteadyStep>& steady, std::size_t runs,
                                             std::size_t& size);
// Where the runs trained two sizes or more (as fit_samples_levels reads them): those one run
// alone trained (no size level told from its run's).
std::vector<int> lone_sizes(const std::vector<SteadyStep>& steady);

// The steady rank-steps of one side of the profile's knee, about the levels: how many, their
// median and their spread (σ of the logs, read off P95 over P50), to set beside the profile's σ
// ratio that a factor drawn across the knee is scaled by. p50 == 0: too few to tell.
struct RegimeSpread {
  long rank_steps = 0;
  double p50 = 0, sigma = 0;
};
inline constexpr long kMinRegimeSteps = 40;
std::pair<RegimeSpread, RegimeSpread> regime_spreads(const std::vector<SteadyStep>& steady,
                                                     const std::function<double(const SteadyStep&)>& level);

}  // namespace ddpsim
