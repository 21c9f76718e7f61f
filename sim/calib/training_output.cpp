// calibrate --training's fit written into the model: the measured steps, their levels, the
// first-use cost, the optimizer, the run level, and the training traces' provenance.
#include <cmath>
#include <cstdio>
#include <string>

#include "calib/training_fit.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

// "; t = 2.776, Student's t over 4 degrees of freedom": the quantile a level spread was taken at.
std::string t_text(double df) {
  if (df < 1) return "; no degrees of freedom";
  char line[96];
  std::snprintf(line, sizeof line, "; t = %.3f, Student's t over %ld degrees of freedom", t95(df), std::lround(df));
  return line;
}

// The model's run_level: the spread, each run's level, and where they came from.
void add_run_level(nlohmann::ordered_json& model, const TrainingFit& t) {
  nlohmann::ordered_json levels = nlohmann::ordered_json::object();
  for (const RunLevel& run : t.run_levels) levels[run.name] = std::round(run.level * 1e4) / 1e4;
  std::string from;
  if (t.run_levels.size() >= 2)
    from = "the logs of the " + std::to_string(t.run_levels.size()) +
           " training runs' levels: compute and optimizer over the runs' pooled" +
           (t.sessions > 1 ? ", each against its session's mean, from " + std::to_string(t.sessions) +
                                 " sessions each training the policies in turn"
                           : "");
  if (!t.pooled.empty()) {
    std::size_t earlier = 0;
    for (const PooledRunLevels& p : t.pooled) earlier += p.levels.size();
    from += (from.empty() ? "the logs of " : "; with ") + std::to_string(earlier) + " levels of " +
            std::to_string(t.pooled.size()) + " earlier model(s), each against its session's mean within its model; " +
            std::to_string(static_cast<long>(t.own_df + t.pooled_df)) + " degrees of freedom in all (" +
            std::to_string(static_cast<long>(t.own_df)) + " here, " + std::to_string(static_cast<long>(t.pooled_df)) +
            " pooled)";
  }
  auto& out = model["run_level"] = {
      {"spread", std::round(t.run_level_spread * 1e4) / 1e4},
      {"levels", levels},
      {"source", "the 95% half-width of the ratio of two runs' levels (t·√2 × the standard deviation of " + from +
                     t_text(t.own_df + t.pooled_df) + "), by ddpsim calibrate --training" +
                     (t.runs_in_turn ? "" : "; the runs were not all trained in turn")}};
  if (t.process_spread > 0) {
    out["process_spread"] = std::round(t.process_spread * 1e4) / 1e4;
    out["process_source"] =
        "the 95% half-width of one process's level against the model's (t × the standard deviation of the " +
        std::to_string(t.processes) + (t.processes == 1 ? " process's" : " processes'") + " mean log levels" +
        (t.process_pooled_df > 0 ? " and " + std::to_string(static_cast<long>(t.process_pooled_df)) +
                                       " degrees of freedom of earlier models' processes, each about its model's mean,"
                                 : std::string()) +
        " × √(1 + 1/" + std::to_string(t.processes) + ")" + t_text(t.process_df) +
        (t.process_df < kMinProcessDf ? ", held to 15% or more below three degrees of freedom" : "") +
        "), by ddpsim calibrate --training";
  }
  if (t.pooled.empty()) return;
  if (t.own_spread >= 0) out["alone"] = std::round(t.own_spread * 1e4) / 1e4;
  out["df"] = static_cast<long>(t.own_df + t.pooled_df);
  auto& pooled = out["pooled"] = nlohmann::ordered_json::array();
  for (const PooledRunLevels& p : t.pooled) pooled.push_back({{"model", p.model}, {"levels", p.levels.size()}});
}

}  // namespace

void add_training(nlohmann::ordered_json& model, const TrainingFit& t, const std::vector<Trace>& training) {
  for (const Trace& tr : training) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : tr.metadata) meta[k] = v;
    model["calibration"]["traces"].push_back(
        {{"file", tr.path}, {"fnv1a64", tr.hash}, {"rows", tr.rows}, {"role", "training"}, {"metadata", meta}});
  }
  const std::string files = trace_names(training);
  const char* what = !t.samples_levels.empty() ? "; the rank-steps' level by batch size and padded tokens, and spread"
                     : t.step_levels.empty()   ? "; the rank-steps' spread"
                                               : "; the rank-steps' level by padded tokens and spread";
  model["source"] = model["source"].get<std::string>() + what +
                    (t.first_uses >= kMinFirstUses ? ", the first-use cost of a shape" : "") +
                    (t.optimizer_ms >= 0 ? " and the optimizer" : "") + " from the training run(s) " + files;
  if (t.optimizer_ms >= 0) model["optimizer_ms"] = t.optimizer_ms;
  model["first_use_ms"] = t.first_use_ms;
  model["noise"] = {{"sigma", 0}, {"shared_sigma", 0}, {"steps", t.step_factors}, {"steps_source", t.source}};
  if (t.samples_min > 0) model["noise"]["steps_samples"] = {t.samples_min, t.samples_max};
  if (!t.samples_levels.empty()) {
    auto& by = model["noise"]["steps_levels_by_samples"] = nlohmann::ordered_json::array();
    for (const SampleLevels& s : t.samples_levels) {
      nlohmann::ordered_json levels = nlohmann::ordered_json::array();
      for (const auto& [tokens, factor] : s.levels) levels.push_back({tokens, factor});
      by.push_back({s.samples, levels});
    }
  }
  if (!t.step_levels.empty()) {
    auto& levels = model["noise"]["steps_levels"] = nlohmann::ordered_json::array();
    for (const auto& [tokens, factor] : t.step_levels) levels.push_back({tokens, factor});
  }
  if (t.tokens_min > 0) model["noise"]["steps_tokens"] = {t.tokens_min, t.tokens_max};
  if (t.knee_tokens > 0) {
    model["noise"]["steps_regime"] = t.above_share > 0.5 ? "above" : "below";
    model["noise"]["above"] = {
        {"tokens", t.knee_tokens}, {"sigma", 0}, {"shared_sigma", 0}, {"steps_scale", t.steps_scale}};
  }
  if (t.run_level_spread > 0 || t.process_spread > 0) add_run_level(model, t);
  model["calibration"]["fit"]["training"] = {
      {"rank_steps", t.rank_steps},
      {"factor", {{"median", t.factor_p50}, {"mean", t.factor_mean}, {"p95", t.factor_p95}, {"p99", t.factor_p99}}},
      {"spike_pct", t.spike_pct},
      {"first_uses", t.first_uses},
      {"first_use_ms", t.first_use_ms}};
  if (t.optimizer_apart >= 0)  // the control's finding kept with the model it warns about
    model["calibration"]["fit"]["training"]["optimizer_apart"] = std::round(t.optimizer_apart * 1e4) / 1e4;
}

}  // namespace ddpsim
