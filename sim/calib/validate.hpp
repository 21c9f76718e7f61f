// Replay and validation: a trace's recorded per-step, per-rank batches simulated as they were
// (not resampled), and the prediction compared with the measurement step by step.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/trace_reader.hpp"
#include "eval/simulate.hpp"

namespace ddpsim {

// The trace's runs simulated under `config` (its platform, algorithm, noise; world size and
// policies come from the trace).
SimulationRun replay(const Trace& trace, Config config);

struct PolicyValidation {
  std::string policy;
  int steps = 0;
  double measured_mean_ms = 0, predicted_mean_ms = 0;  // of the per-step max step time
  double measured_p95_ms = 0, predicted_p95_ms = 0;
  double measured_samples_per_s = 0, predicted_samples_per_s = 0;
  double mean_error_pct = 0, p95_error_pct = 0;  // (predicted − measured) / measured of the mean, of the P95
  double step_mape_pct = 0;                      // per-step |error| / measured, mean
  double step_p95_abs_error_ms = 0;              // per-step |error|, 95th percentile
  std::vector<double> measured_steps_ms, predicted_steps_ms;
};

struct Validation {
  std::vector<PolicyValidation> policies;
  bool has_baseline = false;
  PolicyValidation baseline;
  // Gain of each policy over the baseline in % of the baseline's mean max step time.
  std::vector<double> measured_gain_pct, predicted_gain_pct;
};

Validation validate(const Trace& measured, const Config& config, const Trace* baseline);

std::string validation_report(const Validation& v);
nlohmann::ordered_json validation_json(const Validation& v, const Trace& measured, const std::string& model_origin);
std::string validation_csv(const Validation& v);

}  // namespace ddpsim
