#include "eval/step_interval.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/stats.hpp"

namespace ddpsim {

namespace {

// Calibrate --training measured the rank-steps over the profile: the training loop is in the model.
bool trained(const PerfModel& m) {
  return !m.step_factors.empty() || !m.step_levels.empty() || !m.samples_levels.empty();
}

}  // namespace

std::vector<UncertaintyTerm> step_fixed_terms(const PerfModel& model) {
  std::vector<UncertaintyTerm> terms;
  if (model.spec_derived()) return terms;
  // A model with training runs holds their level at their own rank-steps' tokens, which takes in
  // the surface's error there (beyond them the "untrained tokens" variant); one from a profile
  // alone carries the surface's held-out error as it is.
  if (!trained(model)) {
    if (model.fit_heldout_mape > 0) terms.push_back({"fit", 100 * model.fit_heldout_mape});
    terms.push_back({"training loop", kStepTrainingLoopPct});
  } else
    terms.push_back(
        {"process level", model.process_level_spread > 0 ? 100 * model.process_level_spread : kStepProcessLevelPct});
  return terms;
}

std::string step_level_source(const PerfModel& model) {
  if (model.spec_derived())
    return "level: a model derived from specs has no measured level; its spec-derived compute term stands for it";
  if (!trained(model))
    return "training loop: a model from a profile alone times no training loop (this project's CPU training ran "
           "12-29% over its profile's replay, the H100's registered runs 16%); calibrate --training measures it";
  if (model.process_level_spread > 0) return "process level: " + model.process_level_source;
  return "process level: the model holds no level between processes of its own, so this project's figure: its CPU "
         "runs landed up to 15% from the replays of models with training runs (calibrate --training over runs of two "
         "processes or more measures the model's own)";
}

std::vector<UncertaintyTerm> step_variant_terms(double mean_ms, std::span<const VariantStep> variants) {
  std::vector<VariantGain> as_pct;  // variant_terms' widest |change| a term, the change in % of the step
  for (const VariantStep& v : variants) as_pct.push_back({v.term, 100 * (v.mean_ms / mean_ms - 1)});
  return variant_terms(0, as_pct);
}

StepPrediction predict_step(double mean_ms, double seeds_lo_ms, double seeds_hi_ms,
                            std::vector<UncertaintyTerm> terms) {
  // predict_gain's arithmetic in % of the step: seeds' sides and terms in quadrature, a term twice counted once.
  const auto pct = [&](double ms) { return 100 * (ms / mean_ms - 1); };
  const GainPrediction g = predict_gain(0, pct(seeds_lo_ms), pct(seeds_hi_ms), std::move(terms));
  StepPrediction s;
  s.mean_ms = mean_ms;
  s.seeds_lo_ms = std::min(seeds_lo_ms, mean_ms);
  s.seeds_hi_ms = std::max(seeds_hi_ms, mean_ms);
  s.lo_ms = std::max(0.0, mean_ms * (1 + g.lo / 100));
  s.hi_ms = mean_ms * (1 + g.hi / 100);
  s.mostly = g.mostly;
  s.terms = g.terms;
  return s;
}

std::string step_prediction_text(const StepPrediction& s, const char* seeds_name) {
  char text[256];
  std::snprintf(text, sizeof text, "%.2f ms (%s [%.2f, %.2f]; prediction [%.1f, %.1f] ms, mostly: %s)", s.mean_ms,
                seeds_name, s.seeds_lo_ms, s.seeds_hi_ms, s.lo_ms, s.hi_ms,
                s.mostly == "seeds" ? seeds_name : s.mostly.c_str());
  return text;
}

nlohmann::ordered_json step_prediction_json(const StepPrediction& s) {
  return {{"mean_ms", s.mean_ms},
          {"seeds_interval_ms", {s.seeds_lo_ms, s.seeds_hi_ms}},
          {"prediction_interval_ms", {s.lo_ms, s.hi_ms}},
          {"mostly", s.mostly},
          {"terms_half_width_pct", terms_json(s.terms)}};
}

StepPrediction mean_step_prediction(const PerfModel& model, double at_ms, std::span<const VariantStep> variants,
                                    double quiet_ms, double mean_ms, double lo_ms, double hi_ms) {
  std::vector<UncertaintyTerm> terms = step_variant_terms(at_ms, variants);
  if (!std::isnan(quiet_ms)) terms.push_back({"noise model", 100 * std::abs(quiet_ms / at_ms - 1)});
  for (UncertaintyTerm& t : step_fixed_terms(model)) terms.push_back(std::move(t));
  return predict_step(mean_ms, lo_ms, hi_ms, std::move(terms));
}

namespace {

// One run's mean step over the seeds `means`, the first at the config's seed `at_seed`.
StepPrediction predict_one(const PerfModel& model, double at_seed, std::span<const VariantStep> variants,
                           double quiet_ms, const std::vector<double>& means) {
  return mean_step_prediction(model, at_seed, variants, quiet_ms, mean(means), percentile(means, 2.5),
                              percentile(means, 97.5));
}

}  // namespace

std::vector<StepPrediction> step_predictions(const Config& config, std::span<const VariantRun> variants,
                                             const SimulationRun& first, const SimulationRun* quiet,
                                             const std::vector<std::vector<double>>& means) {
  std::vector<StepPrediction> out;
  for (std::size_t p = 0; p < first.summaries.size(); ++p) {
    std::vector<VariantStep> steps;
    for (const VariantRun& v : variants) steps.push_back({v.term, v.summaries[p].mean_max_step_ms});
    out.push_back(predict_one(*config.model, first.summaries[p].mean_max_step_ms, steps,
                              quiet ? quiet->summaries[p].mean_max_step_ms : NAN, means[p]));
  }
  return out;
}

std::vector<StepPrediction> config_step_predictions(std::span<const Config> configs,
                                                    std::span<const std::vector<VariantRun>> variants,
                                                    const SimulationRun& first, const SimulationRun* quiet,
                                                    const std::vector<std::vector<double>>& means) {
  std::vector<StepPrediction> out;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    std::vector<VariantStep> steps;
    for (const VariantRun& v : variants[c]) steps.push_back({v.term, v.summaries.at(0).mean_max_step_ms});
    out.push_back(predict_one(*configs[c].model, first.summaries[c].mean_max_step_ms, steps,
                              quiet ? quiet->summaries[c].mean_max_step_ms : NAN, means[c]));
  }
  return out;
}

}  // namespace ddpsim
