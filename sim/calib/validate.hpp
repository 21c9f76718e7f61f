// Replay and validation: a trace's recorded per-step, per-rank batches simulated as they were
// (not resampled), and the prediction compared with the measurement step by step.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/trace_reader.hpp"
#include "calib/warmup.hpp"
#include "common/bootstrap.hpp"
#include "eval/simulate.hpp"
#include "eval/step_interval.hpp"
#include "eval/uncertainty.hpp"

namespace ddpsim {

// The trace's runs simulated under `config` (its platform, algorithm, noise; world size and
// policies come from the trace).
SimulationRun replay(const Trace& trace, Config config);

// One phase's mean per rank-step, measured and replayed: where a step-time error comes from
// (the machine's level moves every phase alike; a model's wrong term moves one).
struct PhaseFigures {
  std::string phase;  // forward, backward, comm wait (exposed), optimizer, rest (the step's remainder)
  double measured_ms = 0, predicted_ms = 0;
  bool relative = true;  // its error in % of the measured (the rest, often near 0 ms, in ms)
  double error() const {
    return relative ? 100 * (predicted_ms - measured_ms) / measured_ms : predicted_ms - measured_ms;
  }
};

// Figures over the steps from `first_step` on.
struct PolicyValidation {
  std::string policy;
  int first_step = 0;                                  // the warm-up left out
  int steps = 0;                                       // counted from first_step
  double measured_mean_ms = 0, predicted_mean_ms = 0;  // of the per-step max step time
  double measured_p95_ms = 0, predicted_p95_ms = 0;
  double measured_samples_per_s = 0, predicted_samples_per_s = 0;
  double mean_error_pct = 0, p95_error_pct = 0;  // (predicted − measured) / measured of the mean, of the P95
  double step_mape_pct = 0;                      // per-step |error| / measured, mean
  double step_p95_abs_error_ms = 0;              // per-step |error|, 95th percentile
  Interval measured_mean_ci, measured_p95_ci;    // 95%, a block bootstrap over the steps
  std::vector<PhaseFigures> phases;              // those the trace measured, in step order
  // The optimizer's median per rank-step, measured (NaN: not timed); robust to a slow first
  // step, for comparing runs whose optimizers do the same work.
  double measured_optimizer_median_ms = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> measured_steps_ms, predicted_steps_ms;
  std::vector<double> step_samples;  // the samples each step trained (a replay trains the same)
  // The predicted mean's 95% prediction interval (eval/step_interval.hpp): its interval over the
  // steps widened by the model's variants replayed over the same steps and its fixed terms.
  StepPrediction predicted_mean_pi;
};

// Every run's figures over one range of steps, and the gains over the baseline there.
struct ValidationSet {
  std::vector<PolicyValidation> policies;
  PolicyValidation baseline;
  // Gain of each policy over the baseline in % of the baseline's mean max step time, both taken
  // over the same step numbers: [gain_from_step, gain_end_step), those both traces hold after
  // both warm-ups; restricted where that leaves out steps either run had of its own.
  std::vector<double> measured_gain_pct, predicted_gain_pct;
  // The predicted gain with the compute noise off (NaN where the config draws none): how much of
  // the prediction the noise model makes.
  std::vector<double> predicted_quiet_gain_pct;
  // Per sample where the policy trains another number of samples a step than the baseline
  // (token_budget): each run's mean step time over its mean samples a step, as compare's gains.
  std::vector<bool> gain_per_sample;
  std::vector<int> gain_from_step, gain_end_step;
  std::vector<bool> gain_restricted, gain_end_cut;  // the latter: steps left out at the end too
  // 95% intervals of those gains; paired: the runs were trained in turn, step k beside step k.
  std::vector<Interval> measured_gain_ci, predicted_gain_ci;
  // Each predicted gain's 95% prediction interval (eval/uncertainty.hpp): its interval over the
  // steps widened by what the model does not know, the model's variants replayed alike.
  std::vector<GainPrediction> predicted_gain_pi;
  bool paired = false;
};

// The steady state (after each run's warm-up) and, beside it, every step.
struct Validation {
  bool has_baseline = false;
  int shared_warmup = -1;  // ≥ 0: the one warm-up of runs trained in turn (auto found it)
  ValidationSet steady, all;
};

// The step from which a measured run has settled: the start of the first window of 10 steps
// whose median max step time is within 5% of the median of the run's second half (the
// steady level), then past each leading step far slower than that half (above its P99 and
// 1.5× its median: a process's first step, which a median passes over), at most half the
// run. Short runs (under 20 steps) have no warm-up to find.
int settled_step(const std::vector<double>& max_step_ms);

// `warmup` steps of every run are left out of the steady-state figures; AUTO_WARMUP finds
// each run's own with settled_step(), or, for a baseline trained in turn with the measured
// policies by one ddptrain run, the latest of theirs for all.
Validation validate(const Trace& measured, const Config& config, const Trace* baseline, int warmup = AUTO_WARMUP);

// "step N" or "steps N to M", of the step numbers [first, end).
std::string steps_text(int first, int end);

std::string validation_report(const Validation& v);
nlohmann::ordered_json validation_json(const Validation& v, const Trace& measured, const std::string& model_origin);
std::string validation_csv(const Validation& v);

}  // namespace ddpsim
