// A registration of configs against each other (`compare --against ... --register`) and its
// scoring: each column is a run of its own, so a column's gain is measured from two traces of
// different settings, over every step as registered, without a replay (the runs' own figures
// are what the registered ones are scored against).
#include <algorithm>
#include <string>
#include <vector>

#include "calib/registration.hpp"
#include "common/bootstrap.hpp"
#include "common/error.hpp"
#include "common/stats.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

namespace {

std::vector<double> samples_a_step(const PolicyRun& run) {
  std::vector<double> out;
  const auto G = static_cast<std::size_t>(run.G);
  for (std::size_t i = 0; i < run.rows.size(); i += G) {
    double samples = 0;
    for (std::size_t g = 0; g < G; ++g) samples += run.rows[i + g].batch_size;
    out.push_back(samples);
  }
  return out;
}

// A trace holds one run of the registered policy in the column's setting, else an error names
// the key that differs.
void check_column_trace(const Registration& r, const Trace& t, const std::string& label, const nlohmann::json& want,
                        const std::string& policy) {
  const auto differs = [&](const std::string& key, const std::string& got, const std::string& expected) {
    throw InputError(t.path + ": " + key + " is " + got + ", column " + label + "'s in the registered prediction (" +
                     r.path + ") " + expected + ": a registered prediction is scored only against runs of its setting");
  };
  if (t.runs.size() != 1) differs("the number of policies", std::to_string(t.runs.size()), "1");
  const PolicyRun& run = t.runs.front();
  if (run.label != policy) differs("the policy", run.label, policy);
  if (run.G != want.at("world_size").get<int>())
    differs("training.world_size", std::to_string(run.G), want["world_size"].dump());
  int steps = 0;
  for (const RankStep& row : run.rows) steps = std::max(steps, row.step + 1);
  if (steps != want.at("steps").get<int>()) differs("training.steps", std::to_string(steps), want["steps"].dump());
  for (const auto& [key, name] : {std::pair{"global_batch", "training.global_batch"}, {"seed", "training.seed"},
                                  {"data_parallel", "training.data_parallel"}}) {
    const auto it = t.metadata.find(key);
    const nlohmann::json& value = want.at(key);
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (it != t.metadata.end() && it->second != text) differs(name, it->second, text);
  }
}

}  // namespace

nlohmann::ordered_json column_setting(const Config& c, const std::vector<std::string>& sets) {
  const TrainingConfig& t = c.training;
  return {{"sets", sets},
          {"world_size", t.world_size},
          {"global_batch", t.global_batch},
          {"seed", t.seed},
          {"steps", t.steps},
          {"data_parallel", t.data_parallel}};
}

bool registers_columns(const Registration& r) {
  return r.doc["setting"].contains("columns");
}

std::string registered_base_column(const Registration& r) {
  return r.doc["predicted"]["baseline"].get<std::string>();  // the schema checked it names a column
}

nlohmann::ordered_json score_registered_column(const Registration& r, const std::string& label, const Trace& measured,
                                               const Trace& baseline) {
  const nlohmann::json& columns = r.doc["setting"]["columns"];
  const std::string base_label = registered_base_column(r);
  if (!columns.contains(label) || label == base_label) {
    std::string names;
    for (const auto& [name, setting] : columns.items())
      if (name != base_label) names += (names.empty() ? "" : ", ") + name;
    throw UsageError("--column " + label + ": " + r.path + " registers the columns " + names + " against " +
                     base_label);
  }
  const std::string policy = r.doc["setting"]["policies"][0].get<std::string>();
  check_column_trace(r, measured, label, columns[label], policy);
  check_column_trace(r, baseline, base_label, columns[base_label], policy);
  const PolicyRun &run = measured.runs.front(), &base = baseline.runs.front();
  const std::vector<double> own = max_step_ms(run), theirs = max_step_ms(base);
  const std::vector<double> own_samples = samples_a_step(run), their_samples = samples_a_step(base);
  const bool per_sample = changes_samples_per_step(mean(own_samples), mean(their_samples));
  const double scale = per_sample ? mean(their_samples) / mean(own_samples) : 1.0;
  const double measured_gain = 100 * (1 - scale * mean(own) / mean(theirs));
  const Interval ci = per_sample ? gain_interval_per_sample(own, own_samples, theirs, their_samples, false)
                                 : gain_interval(own, theirs, false);
  const nlohmann::json& predicted = r.doc["predicted"]["columns"];
  const nlohmann::json& gain = predicted.at(label).at("gain");
  const double g = gain.at("gain_pct").get<double>();
  const auto seeds = gain.at("seeds_interval").get<std::vector<double>>();
  const auto pi = gain.at("prediction_interval").get<std::vector<double>>();
  nlohmann::ordered_json score{{"registered_gain_pct", g},
                               {"registered_seeds_interval", seeds},
                               {"registered_prediction_interval", pi},
                               {"registered_mostly", gain.at("mostly")},
                               {"regime", gain.value("regime", "")},
                               {"measured_from_step", 0},
                               {"measured_gain_pct", measured_gain},
                               {"measured_gain_ci95", {ci.low, ci.high}},
                               {"gain_error_pp", g - measured_gain},
                               {"measured_in_prediction_interval", pi[0] <= measured_gain && measured_gain <= pi[1]},
                               {"measured_in_seeds_interval", seeds[0] <= measured_gain && measured_gain <= seeds[1]},
                               {"registered_in_measured_ci", ci.contains(g)},
                               {"measured_gain_resolved", !ci.contains(0)},
                               {"per_sample", per_sample},
                               {"registered_per_sample", gain.value("per_sample", false)},
                               {"registered_mean_ms", predicted.at(label).at("mean_max_step_ms").at("mean")},
                               {"measured_mean_ms", mean(own)}};
  return {{"file", r.path},
          {"steps", "every step, as registered (the prediction simulates no warm-up); each column a run of its own"},
          {"column", label},
          {"baseline",
           {{"policy", base_label},
            {"registered_mean_ms", predicted.at(base_label).at("mean_max_step_ms").at("mean")},
            {"measured_mean_ms", mean(theirs)}}},
          {"policies", {{label, std::move(score)}}}};
}

}  // namespace ddpsim
