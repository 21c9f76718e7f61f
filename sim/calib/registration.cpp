#include "calib/registration.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "calib/registration_schema.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/input_file.hpp"
#include "common/json_util.hpp"
#include "model/perf_model.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace fs = std::filesystem;

namespace {

constexpr const char* kBuiltinPrefix = "built-in ";

std::string file_hash(const std::string& path) {
  return fnv1a64_hex(read_input_file(path, "file"));
}

// What a model was loaded from: {"builtin": NAME} or {"file": path relative to `dir`}, with
// the FNV-1a hash of its bytes.
nlohmann::ordered_json model_record(const PerfModel& m, const fs::path& dir) {
  if (m.origin.starts_with(kBuiltinPrefix)) {
    const std::string name = m.origin.substr(std::string(kBuiltinPrefix).size());
    return {{"builtin", name}, {"fnv1a64", fnv1a64_hex(builtin_model_text(name))}, {"source", m.source}};
  }
  return {{"file", fs::relative(fs::absolute(m.origin), dir).generic_string()},
          {"fnv1a64", file_hash(m.origin)},
          {"source", m.source}};
}

// The keys that replay takes from the trace (validate refuses to --set them): the registration
// checks them against the trace instead.
bool fixed_by_trace(const std::string& assignment) {
  const std::string key = assignment.substr(0, assignment.find('='));
  for (const char* fixed : {"training.steps", "training.global_batch", "training.max_length", "training.b_max",
                            "training.pad_to_multiple_of", "training.micro_batches", "policies", "data", "model"})
    if (key == fixed || key.starts_with(std::string(fixed) + ".")) return true;
  return false;
}

const nlohmann::json& field(const nlohmann::json& doc, const char* key, const std::string& where) {
  if (!doc.is_object() || !doc.contains(key))
    throw InputError(where + ": missing \"" + key + "\" (a registration is written by ddpsim compare --register)");
  return doc[key];
}

// The file a registration names, relative to its folder, holding the bytes it held then.
std::string checked_file(const Registration& r, const nlohmann::json& record, const char* what) {
  const fs::path dir = fs::path(r.path).parent_path();
  const std::string where = r.path + ": " + what;
  const std::string path =
      (dir / convert<std::string>(field(record, "file", where), where + ": key \"file\"")).string();
  const std::string want = convert<std::string>(field(record, "fnv1a64", where), where + ": key \"fnv1a64\"");
  if (!fs::exists(path)) throw InputError(r.path + ": " + what + " " + path + " is gone");
  if (const std::string got = file_hash(path); got != want)
    throw InputError(r.path + ": " + what + " " + path + " has changed since the prediction was registered (FNV-1a " +
                     got + ", registered " + want + "): score it with the files it was made with");
  return path;
}

}  // namespace

nlohmann::ordered_json registration_json(const std::string& file, const Config& config, const RegisteredInputs& inputs,
                                         const nlohmann::ordered_json& replicates) {
  const fs::path dir = fs::absolute(file).parent_path();
  nlohmann::ordered_json doc;
  doc["format"] = kRegistrationFormat;
  doc["what"] =
      "a prediction registered before its run; score a run of this setting with ddpsim validate --registered "
      "THIS_FILE --measured POLICY/steps.csv --baseline BASELINE/steps.csv";
  doc["command"] = inputs.command;
  nlohmann::ordered_json cfg;
  if (inputs.config_file.empty())
    cfg["file"] = nullptr;
  else
    cfg = {{"file", fs::relative(fs::absolute(inputs.config_file), dir).generic_string()},
           {"fnv1a64", file_hash(inputs.config_file)}};
  cfg["set"] = inputs.sets;
  doc["config"] = std::move(cfg);
  doc["model"] = model_record(*config.model, dir);
  const TrainingConfig& t = config.training;
  nlohmann::ordered_json policies = nlohmann::ordered_json::array();
  if (replicates.contains("columns"))  // configs against each other, under the config's one policy
    policies.push_back(config.policies.front().label());
  else
    for (const auto& [label, figures] : replicates.at("policies").items()) policies.push_back(label);
  doc["setting"] = {{"world_size", t.world_size},
                    {"global_batch", t.global_batch},
                    {"max_length", t.max_length},
                    {"seed", t.seed},
                    {"steps", t.steps},
                    {"pad_to_multiple_of", t.pad_to_multiple_of},
                    {"attention", t.attention},
                    {"micro_batches", t.micro_batches},
                    {"policies", std::move(policies)}};
  doc["predicted"] = replicates;
  return doc;
}

Registration read_registration(const std::string& path) {
  Registration r{path, read_json_file(path)};
  if (!r.doc.is_object() || r.doc.value("format", nlohmann::json()) != kRegistrationFormat)
    throw InputError(path + ": not a registered prediction (expected \"format\": \"" + kRegistrationFormat +
                     "\", as ddpsim compare --register writes)");
  for (const char* key : {"config", "model", "setting", "predicted"}) field(r.doc, key, path);
  check_registration_figures(r.doc, path);
  const auto& model = r.doc["model"];
  if (model.contains("builtin")) {
    const std::string name = convert<std::string>(model["builtin"], path + ": model: key \"builtin\"");
    if (!is_builtin_model(name)) throw InputError(path + ": model: no built-in model \"" + name + "\"");
    if (fnv1a64_hex(builtin_model_text(name)) !=
        convert<std::string>(field(model, "fnv1a64", path + ": model"), path + ": model: key \"fnv1a64\""))
      throw InputError(path + ": the built-in model " + name +
                       " has changed since the prediction was registered: score it with the ddpsim that made it");
  } else {
    checked_file(r, model, "model");
  }
  if (!r.doc["config"]["file"].is_null()) checked_file(r, r.doc["config"], "config");
  return r;
}

std::vector<std::string> registered_validate_args(const Registration& r) {
  std::vector<std::string> args;
  const fs::path dir = fs::path(r.path).parent_path();
  if (!r.doc["config"]["file"].is_null()) args.push_back((dir / r.doc["config"]["file"].get<std::string>()).string());
  const auto& model = r.doc["model"];
  args.insert(args.end(), {"--model", model.contains("builtin") ? model["builtin"].get<std::string>()
                                                                : (dir / model["file"].get<std::string>()).string()});
  for (const auto& assignment : r.doc["config"].value("set", nlohmann::json::array()))
    if (!fixed_by_trace(assignment.get<std::string>()))
      args.insert(args.end(), {"--set", assignment.get<std::string>()});
  return args;
}

void check_registered_setting(const Registration& r, const Trace& measured, const Trace* baseline) {
  const nlohmann::json& s = r.doc["setting"];
  const std::vector<std::string> policies = s.at("policies").get<std::vector<std::string>>();
  const auto differs = [&](const Trace& t, const std::string& key, const std::string& got, const std::string& want) {
    throw InputError(t.path + ": " + key + " is " + got + ", the registered prediction's (" + r.path + ") " + want +
                     ": a registered prediction is scored only against runs of its setting");
  };
  const auto metadata = [&](const Trace& t, const char* name, const char* key, const nlohmann::json& want) {
    const auto it = t.metadata.find(name);
    const std::string text = want.is_string() ? want.get<std::string>() : want.dump();
    if (it != t.metadata.end() && it->second != text) differs(t, key, it->second, text);
  };
  for (const Trace* t : {&measured, baseline}) {
    if (!t) continue;
    for (const PolicyRun& run : t->runs) {
      if (run.G != s.at("world_size").get<int>())
        differs(*t, "training.world_size", std::to_string(run.G), s["world_size"].dump());
      int steps = 0, longest = 0;
      for (const RankStep& row : run.rows)
        steps = std::max(steps, row.step + 1), longest = std::max(longest, row.max_len);
      if (steps != s.at("steps").get<int>()) differs(*t, "training.steps", std::to_string(steps), s["steps"].dump());
      if (longest > s.at("max_length").get<int>())
        differs(*t, "training.max_length", "at least " + std::to_string(longest), s["max_length"].dump());
      if (std::find(policies.begin(), policies.end(), run.label) == policies.end())
        differs(*t, "the policy", run.label, "policies are " + s["policies"].dump());
      if (t == &measured && run.label == policies.front())
        throw InputError(t->path + ": the policy is " + run.label + ", the registered baseline (" + r.path +
                         "): give a run of another registered policy as --measured, whose gain over it is scored");
    }
    metadata(*t, "global_batch", "training.global_batch", s.at("global_batch"));
    metadata(*t, "seed", "training.seed", s.at("seed"));
    metadata(*t, "pad_to_multiple_of", "training.pad_to_multiple_of", s.at("pad_to_multiple_of"));
    metadata(*t, "attention", "training.attention", s.at("attention"));
  }
  if (baseline && baseline->runs.front().label != policies.front())
    differs(*baseline, "the baseline policy", baseline->runs.front().label, policies.front());
}

nlohmann::ordered_json gain_score(const nlohmann::json& registered, const MeasuredGain& m) {
  const nlohmann::json& gain = registered.at("gain");
  const double g = gain.at("gain_pct").get<double>();
  const auto seeds = gain.at("seeds_interval").get<std::vector<double>>();
  const auto pi = gain.at("prediction_interval").get<std::vector<double>>();
  return {{"registered_gain_pct", g},
          {"registered_seeds_interval", seeds},
          {"registered_prediction_interval", pi},
          {"registered_mostly", gain.at("mostly")},
          {"regime", gain.value("regime", "")},
          {"measured_from_step", m.from_step},
          {"measured_gain_pct", m.gain_pct},
          {"measured_gain_ci95", {m.ci.low, m.ci.high}},
          {"gain_error_pp", g - m.gain_pct},
          {"measured_in_prediction_interval", pi[0] <= m.gain_pct && m.gain_pct <= pi[1]},
          {"measured_in_seeds_interval", seeds[0] <= m.gain_pct && m.gain_pct <= seeds[1]},
          {"registered_in_measured_ci", m.ci.contains(g)},
          {"measured_gain_resolved", !m.ci.contains(0)},
          {"per_sample", m.per_sample},
          {"registered_per_sample", gain.value("per_sample", false)},
          {"registered_mean_ms", registered.at("mean_max_step_ms").at("mean")},
          {"measured_mean_ms", m.mean_ms}};
}

void add_step_score(nlohmann::ordered_json& score, const nlohmann::json& registered, double measured_ms,
                    double measured_p95_ms) {
  if (registered.contains("step")) {
    const auto pi = registered["step"].at("prediction_interval_ms").get<std::vector<double>>();
    score["registered_mean_pi95"] = pi;
    score["measured_mean_in_prediction_interval"] = pi.at(0) <= measured_ms && measured_ms <= pi.at(1);
  }
  const double mean_ms = registered.at("mean_max_step_ms").at("mean").get<double>();
  if (!registered.contains("p95_max_step_ms") || !(mean_ms > 0 && measured_ms > 0 && measured_p95_ms > 0)) return;
  const double ratio = registered["p95_max_step_ms"].at("mean").get<double>() / mean_ms;
  score["registered_p95_over_mean"] = ratio;
  score["measured_p95_over_mean"] = measured_p95_ms / measured_ms;
  score["tail_error_pct"] = 100 * (ratio * measured_ms / measured_p95_ms - 1);
}

namespace {

// One validation set's measured gains and mean steps against the registered ones.
nlohmann::ordered_json score_set(const nlohmann::json& predicted, const ValidationSet& set) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < set.policies.size(); ++i) {
    const std::string& label = set.policies[i].policy;
    policies[label] = gain_score(predicted.at(label), {set.measured_gain_pct[i], set.measured_gain_ci[i],
                                                       set.gain_per_sample[i], set.policies[i].measured_mean_ms,
                                                       set.gain_from_step[i]});
    add_step_score(policies[label], predicted.at(label), set.policies[i].measured_mean_ms,
                   set.policies[i].measured_p95_ms);
  }
  const std::string base = set.baseline.policy;
  nlohmann::ordered_json baseline{{"policy", base},
                                  {"registered_mean_ms", predicted.at(base).at("mean_max_step_ms").at("mean")},
                                  {"measured_mean_ms", set.baseline.measured_mean_ms}};
  add_step_score(baseline, predicted.at(base), set.baseline.measured_mean_ms, set.baseline.measured_p95_ms);
  return {{"baseline", std::move(baseline)}, {"policies", std::move(policies)}};
}

}  // namespace

nlohmann::ordered_json score_registered(const Registration& r, const Validation& v) {
  const nlohmann::json& predicted = r.doc["predicted"]["policies"];
  nlohmann::ordered_json score = score_set(predicted, v.all);
  score["file"] = r.path;
  score["steps"] = "every step, as registered (the prediction simulates no warm-up)";
  score["steady_state"] = score_set(predicted, v.steady);
  return score;
}

namespace {

// "mean 420.43 ms registered [343.9, 497.0], 407.23 measured (+3.2%): inside the prediction interval;
// P95 / mean 1.233 registered, 1.212 measured (+1.7%)"
std::string step_score_text(const nlohmann::ordered_json& s) {
  char line[256];
  const double registered = s["registered_mean_ms"].get<double>(), measured = s["measured_mean_ms"].get<double>();
  std::string pi;
  if (s.contains("registered_mean_pi95")) {
    std::snprintf(line, sizeof line, " [%.1f, %.1f]", s["registered_mean_pi95"][0].get<double>(),
                  s["registered_mean_pi95"][1].get<double>());
    pi = line;
  }
  std::snprintf(line, sizeof line, "mean %.2f ms registered%s, %.2f measured (%+.1f%%)", registered, pi.c_str(),
                measured, shown(100 * (registered / measured - 1), 1));
  std::string out = line;
  if (s.contains("measured_mean_in_prediction_interval"))
    out += s["measured_mean_in_prediction_interval"].get<bool>() ? ": inside the prediction interval"
                                                                 : ": OUTSIDE the prediction interval";
  if (!s.contains("tail_error_pct")) return out;
  std::snprintf(line, sizeof line, "; P95 / mean %.3f registered, %.3f measured (%+.1f%%)",
                s["registered_p95_over_mean"].get<double>(), s["measured_p95_over_mean"].get<double>(),
                shown(s["tail_error_pct"].get<double>(), 1));
  return out + line;
}

std::string set_report(const nlohmann::ordered_json& score) {
  std::string out;
  char line[640];
  const auto& b = score["baseline"];
  out += "  " + b["policy"].get<std::string>() + " (baseline): " + step_score_text(b) + "\n";
  for (const auto& [label, p] : score["policies"].items()) {
    const auto seeds = p["registered_seeds_interval"], pi = p["registered_prediction_interval"],
               ci = p["measured_gain_ci95"];
    const bool inside = p["measured_in_prediction_interval"].get<bool>();
    const std::string verdict =
        std::string(inside ? "the measured gain inside the prediction interval"
                           : "the measured gain OUTSIDE the prediction interval") +
        (p["registered_in_measured_ci"].get<bool>() ? "; the registered gain inside the measured interval" : "") +
        (p["measured_gain_resolved"].get<bool>() ? "" : "; the measured gain cannot be told from noise") +
        (p["per_sample"] == p["registered_per_sample"]
             ? ""
             : "; NOT the same quantity: the one gain per sample, the other per step (another number of samples a "
               "step in one of the runs)");
    std::snprintf(line, sizeof line,
                  "  %s: gain%s registered %+.2f%% (seeds [%+.2f, %+.2f]; prediction [%+.1f, %+.1f]), measured %+.2f%% "
                  "[%+.2f, %+.2f], %+.2f pp: %s\n",
                  label.c_str(), p["per_sample"].get<bool>() ? " per sample" : "",
                  shown(p["registered_gain_pct"].get<double>(), 2), shown(seeds[0].get<double>(), 2),
                  shown(seeds[1].get<double>(), 2), shown(pi[0].get<double>(), 1), shown(pi[1].get<double>(), 1),
                  shown(p["measured_gain_pct"].get<double>(), 2), shown(ci[0].get<double>(), 2),
                  shown(ci[1].get<double>(), 2), shown(p["gain_error_pp"].get<double>(), 2), verdict.c_str());
    out += line;
    if (p.contains("registered_mean_pi95")) out += "    its " + step_score_text(p) + "\n";
  }
  return out;
}

}  // namespace

std::string registered_report(const nlohmann::ordered_json& score) {
  const std::string all = "\nthe registered prediction (" + score["file"].get<std::string>() +
                          "), over every step as it was registered:\n" + set_report(score);
  if (!score.contains("steady_state")) return all;
  return all + "and over the steady state (each run's warm-up left out, which the prediction does not model):\n" +
         set_report(score["steady_state"]);
}

}  // namespace ddpsim
