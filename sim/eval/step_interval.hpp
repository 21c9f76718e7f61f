// A predicted mean step time's 95% prediction interval: where a real run's mean max step may
// land, not only where other seeds would draw it. A gain sets two runs of one machine against
// each other, and their shared level cancels; a step time carries that level whole — the
// process it runs in, the training loop a profile does not time — beside the forms, variants,
// noise and held-out error a gain carries. Half-widths in % of the step, in quadrature.
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/uncertainty.hpp"

namespace ddpsim {

// A step's level a model does not hold, where it measured none of its own: one process's level
// against a model with training runs of one process (this project's CPU runs landed up to 15%
// from such models' replays, the thirty-fourth registration's two processes 10% apart), and a
// training loop against a model from a profile alone (CPU training ran 12-29% over its profile's
// replay, the H100's registered runs 16%).
inline constexpr double kStepProcessLevelPct = 15, kStepTrainingLoopPct = 25;

struct StepPrediction {
  double mean_ms = 0;
  double seeds_lo_ms = 0, seeds_hi_ms = 0;
  double lo_ms = 0, hi_ms = 0;
  std::string mostly;                  // the widest source: "seeds" or a term's name
  std::vector<UncertaintyTerm> terms;  // half-widths in % of the step
  bool holds(double ms) const { return lo_ms <= ms && ms <= hi_ms; }
};

// The terms a step carries without simulating: the level of the process it runs in (the
// model's own figure where calibrate measured processes apart, else the figures above), and for
// a model from a profile alone the fit's held-out error; none for a model derived from specs,
// whose efficiency term is simulated.
std::vector<UncertaintyTerm> step_fixed_terms(const PerfModel& model);

// A model variant's mean step (eval/uncertainty.hpp, model_variants).
struct VariantStep {
  std::string term;
  double mean_ms = 0;
};
// Each variant's |mean step / the config's − 1| in %, the widest of a term's occurrences.
std::vector<UncertaintyTerm> step_variant_terms(double mean_ms, std::span<const VariantStep> variants);

// One line: where step_fixed_terms' level came from.
std::string step_level_source(const PerfModel& model);

StepPrediction predict_step(double mean_ms, double seeds_lo_ms, double seeds_hi_ms, std::vector<UncertaintyTerm> terms);

// "422.86 ms (seeds [413.65, 426.15]; prediction [340.2, 505.5] ms, mostly: process level)"
std::string step_prediction_text(const StepPrediction& s, const char* seeds_name = "seeds");
nlohmann::ordered_json step_prediction_json(const StepPrediction& s);

// A mean step's prediction: its terms beside the run at `at_ms` (its variants, its noise-off mean
// `quiet_ms`, NaN: none, and the model's fixed terms) around `mean_ms` and its range [lo, hi]
// (the seeds', or a replay's steps').
StepPrediction mean_step_prediction(const PerfModel& model, double at_ms, std::span<const VariantStep> variants,
                                    double quiet_ms, double mean_ms, double lo_ms, double hi_ms);

// Each policy's mean max step prediction: `means[p]` over the seeds, the first at the config's
// seed, whose run is `first` (its noise-off run `quiet`, null: none), beside the model's
// variants at that seed (simulate_variants).
std::vector<StepPrediction> step_predictions(const Config& config, std::span<const VariantRun> variants,
                                             const SimulationRun& first, const SimulationRun* quiet,
                                             const std::vector<std::vector<double>>& means);
// The same for configs against each other (`compare --against`): column c's own model, its
// config's variants `variants[c]` (config_variant_runs), its one policy's mean.
std::vector<StepPrediction> config_step_predictions(std::span<const Config> configs,
                                                    std::span<const std::vector<VariantRun>> variants,
                                                    const SimulationRun& first, const SimulationRun* quiet,
                                                    const std::vector<std::vector<double>>& means);

}  // namespace ddpsim
