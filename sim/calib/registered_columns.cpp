// A registration of configs against each other (`compare --against ... --register`) and its
// scoring: each column is a run of its own, so a column's gain is measured from two traces of
// different settings, over every step as registered, without a replay (the runs' own figures
// are what the registered ones are scored against).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "calib/registration.hpp"
#include "common/bootstrap.hpp"
#include "common/error.hpp"
#include "common/stats.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

namespace {

// A trace holds one fully timed run of the registered policy in the column's setting, else an
// error names the key that differs. A key the registered columns differ in must be recorded:
// a trace without it could be any of them (the base's run given as a column's flips the gain).
void check_column_trace(const Registration& r, const Trace& t, const std::string& label, const std::string& policy) {
  const nlohmann::json& columns = r.doc["setting"]["columns"];
  const nlohmann::json& want = columns.at(label);
  const auto differs = [&](const std::string& key, const std::string& got, const std::string& expected) {
    throw InputError(t.path + ": " + key + " is " + got + ", column " + label + "'s in the registered prediction (" +
                     r.path + ") " + expected + ": a registered prediction is scored only against runs of its setting");
  };
  if (t.runs.size() != 1) differs("the number of policies", std::to_string(t.runs.size()), "1");
  const PolicyRun& run = t.runs.front();
  if (run.label != policy) differs("the policy", run.label, policy);
  if (run.G != want.at("world_size").get<int>())
    differs("training.world_size", std::to_string(run.G), want["world_size"].dump());
  int steps = 0, longest = 0;
  for (const RankStep& row : run.rows) {
    steps = std::max(steps, row.step + 1), longest = std::max(longest, row.max_len);
    if (std::isnan(row.step_ms))
      throw InputError(t.path + ": step " + std::to_string(row.step) + ", rank " + std::to_string(row.rank) +
                       " has no step_ms: a gain needs every step timed");
  }
  if (steps != want.at("steps").get<int>()) differs("training.steps", std::to_string(steps), want["steps"].dump());
  if (longest > want.at("max_length").get<int>())
    differs("training.max_length", "at least " + std::to_string(longest), want["max_length"].dump());
  for (const auto& [key, name] :
       {std::pair{"global_batch", "training.global_batch"}, {"seed", "training.seed"},
        {"data_parallel", "training.data_parallel"}, {"zero_partition", "training.zero_partition"},
        {"pad_to_multiple_of", "training.pad_to_multiple_of"}, {"attention", "training.attention"}}) {
    if (!want.contains(key)) continue;
    const nlohmann::json& value = want[key];
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (const auto it = t.metadata.find(key); it != t.metadata.end()) {
      if (it->second != text) differs(name, it->second, text);
      continue;
    }
    for (const auto& [other, setting] : columns.items())
      if (setting.contains(key) && setting[key] != value)
        throw InputError(t.path + " records no " + key + ", on which the registered columns (" + r.path +
                         ") differ: it cannot be told for column " + label + "'s run");
  }
}

}  // namespace

nlohmann::ordered_json column_setting(const Config& c, const std::vector<std::string>& sets) {
  const TrainingConfig& t = c.training;
  nlohmann::ordered_json setting{{"sets", sets},
                                 {"world_size", t.world_size},
                                 {"global_batch", t.global_batch},
                                 {"seed", t.seed},
                                 {"steps", t.steps},
                                 {"max_length", t.max_length},
                                 {"pad_to_multiple_of", t.pad_to_multiple_of},
                                 {"attention", t.attention},
                                 {"data_parallel", t.data_parallel}};
  if (t.data_parallel == "zero1") setting["zero_partition"] = t.zero_partition;
  return setting;
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
  check_column_trace(r, measured, label, policy);
  check_column_trace(r, baseline, base_label, policy);
  const PolicyRun &run = measured.runs.front(), &base = baseline.runs.front();
  const std::vector<double> own = max_step_ms(run), theirs = max_step_ms(base);
  const std::vector<double> own_samples = samples_per_step(run), their_samples = samples_per_step(base);
  MeasuredGain m;
  m.per_sample = changes_samples_per_step(mean(own_samples), mean(their_samples));
  const double scale = m.per_sample ? mean(their_samples) / mean(own_samples) : 1.0;
  m.gain_pct = 100 * (1 - scale * mean(own) / mean(theirs));
  m.ci = m.per_sample ? gain_interval_per_sample(own, own_samples, theirs, their_samples, false)
                      : gain_interval(own, theirs, false);
  m.mean_ms = mean(own);
  const nlohmann::json& predicted = r.doc["predicted"]["columns"];
  nlohmann::ordered_json score = gain_score(predicted.at(label), m);
  add_step_score(score, predicted.at(label), m.mean_ms, percentile(own, 95));
  nlohmann::ordered_json base_score{{"policy", base_label},
                                    {"registered_mean_ms", predicted.at(base_label).at("mean_max_step_ms").at("mean")},
                                    {"measured_mean_ms", mean(theirs)}};
  add_step_score(base_score, predicted.at(base_label), mean(theirs), percentile(theirs, 95));
  return {{"file", r.path},
          {"steps", "every step, as registered (the prediction simulates no warm-up); each column a run of its own"},
          {"column", label},
          {"baseline", std::move(base_score)},
          {"policies", {{label, std::move(score)}}}};
}

}  // namespace ddpsim
