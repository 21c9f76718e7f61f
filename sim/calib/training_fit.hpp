// What training runs add to a profile's model (ddpsim calibrate --training): the profile fits
// the surface t(b, L) on a quiet machine; a training run of the same setting (the static run a
// user already has) shows how its rank-steps spread around that surface — level, tail, spikes
// that strike a step's ranks together — what a shape's first use in a process costs, and the
// optimizer's time in training. None of them feeds the surface.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/calibrate.hpp"
#include "calib/pooled_levels.hpp"
#include "calib/step_levels.hpp"
#include "calib/trace_reader.hpp"
#include "calib/warmup.hpp"

namespace ddpsim {

// One training run's level (TrainingFit::run_levels): its trace, its policy, the process it ran
// in (session_key), the level.
struct RunLevel {
  std::string name, label, session;
  double level = 1;
};

// The run-level spread's cap (PerfModel::run_level_spread): levels 2× apart.
inline constexpr double kMaxRunLevelSpread = 1.0;

struct TrainingFit {
  // Per measured step, each rank's compute over the surface (first uses' cost taken out).
  std::vector<std::vector<double>> step_factors;
  std::vector<std::pair<double, double>> step_levels;  // PerfModel::step_levels; the factors are about them
  std::vector<SampleLevels> samples_levels;            // PerfModel::samples_levels, in place of step_levels
  std::vector<int> lone_sizes;      // sizes of 40 steady rank-steps or more that one run alone trained
  bool levels_asked = true;         // false: --training-levels one
  std::size_t level_bin_steps = 0;  // the fewest rank-steps a level's bin holds
  long rank_steps = 0;
  double factor_p50 = 1, factor_p95 = 1, factor_p99 = 1, factor_mean = 1;
  double spike_pct = 0;  // rank-steps above 1.5× the median factor, in %
  // First use of a shape in a process: the median extra over the surface of the first uses
  // after step 0 (step 0 also pays the process's own warm-up), and how many there were.
  double first_use_ms = 0;
  long first_uses = 0;
  int samples_min = 0, samples_max = 0;  // samples a (micro-)batch held (PerfModel::steps_samples)
  long long tokens_min = 0, tokens_max = 0;  // the levels' rank-steps' tokens (PerfModel::steps_tokens)
  double optimizer_ms = -1;              // < 0: the traces time no optimizer
  // The profile's knee (0: one regime), the share of the run's rank-steps from it, and the σ
  // ratio of its regimes (above / below) that scales a factor drawn across the knee.
  long long knee_tokens = 0;
  double above_share = 0, steps_scale = 1;
  RegimeSpread below, above;
  std::string source;  // one line: which traces, how many steps and ranks
  std::vector<LeadingSteps> warmups;  // each process's leading steps left out of every figure
  int warmup_asked = AUTO_WARMUP;     // the steps each process leaves out where the user said
  // Each run's level, its rank-steps' compute and optimizer over the pooled runs' (its own
  // shapes at the pooled factor and optimizer), and the 95% half-width of the ratio of two
  // levels of one session's runs (PerfModel::run_level_spread; 0 with one run and none pooled).
  std::vector<RunLevel> run_levels;
  double run_level_spread = 0;
  // Earlier models' levels pooled in (--pool-run-levels); the spread these runs gave alone (< 0:
  // fewer than two), and the degrees of freedom of run_level_spread, these runs' and the pooled.
  std::vector<PooledRunLevels> pooled;
  double own_spread = -1, own_df = 0, pooled_df = 0;
  int sessions = 1;              // sessions these runs' spread was taken within (1: one for all)
  bool sessions_pooled = false;  // trained in turn, but no process trained two of the runs
  bool runs_in_turn = true;      // every trace says it was trained in turn with the same policies
  // One process's level against the model's, a 95% half-width (PerfModel::process_level_spread;
  // 0: one process and none pooled), and the processes it was taken over.
  double process_spread = 0;
  int processes = 0;
  double process_df = 0, process_pooled_df = 0;  // its degrees of freedom in all, and the pooled models'
  // The optimizer as a control: the same work in every run, so its medians within a session
  // show what the machine does to each run's model apart from any policy. Per session of two
  // timed runs or more, each run's policy (its trace where two share one) and median; the
  // largest ratio − 1 of two of them (< 0: no such session, or runs not trained in turn).
  std::vector<std::vector<std::pair<std::string, double>>> optimizer_by_session;
  double optimizer_apart = -1;
};

// The level a rank-step of `samples` and `tokens` takes: by batch size where the fit has levels
// by it, else by tokens.
inline double fit_level(const TrainingFit& fit, int samples, long long tokens) {
  return level_at(fit.step_levels, fit.samples_levels, samples, tokens);
}

// Below this many degrees of freedom (four processes' worth), TrainingFit::process_spread is held
// to the project's figure or more.
inline constexpr double kMinProcessDf = 3;

// Fewer first uses than this leave the first-use cost at 0, said so in the report.
inline constexpr long kMinFirstUses = 5;

struct TrainingFitOptions {
  bool levels_by_tokens = true;         // false: one level for every shape (--training-levels one)
  int warmup = AUTO_WARMUP;             // steps after step 0 each process leaves out (leading_steps)
  std::vector<PooledRunLevels> pooled;  // earlier models' run levels, pooled into the run-level spread
};

// Throws InputError naming the trace when it holds no timed rank-step after its warm-up, or
// ranks of unequal counts across its runs.
TrainingFit fit_training(const std::vector<Trace>& training, const Calibration& c, TrainingFitOptions options = {});

// Amends a calibrated model (calibrated_model's document) with the fit: the measured steps in
// place of the profile's noise (keeping its knee, across which a factor is scaled), the
// first-use cost, the optimizer, and the traces' provenance.
void add_training(nlohmann::ordered_json& model, const TrainingFit& t, const std::vector<Trace>& training);

// The report's lines for it.
std::string training_report(const TrainingFit& t);

}  // namespace ddpsim
