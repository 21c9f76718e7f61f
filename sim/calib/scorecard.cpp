#include "calib/scorecard.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "calib/registration.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_util.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace fs = std::filesystem;

namespace {

struct Gain {
  double predicted = 0, measured = 0;
  std::optional<std::pair<double, double>> measured_ci;  // validations before the bootstrap have none
  std::optional<std::pair<double, double>> interval;     // the prediction interval, where recorded
};

// A run's mean max step against its replay (steady state), and the prediction interval where recorded.
struct Step {
  double error_pct = 0, p95_error_pct = 0;
  std::optional<std::pair<double, double>> interval;  // ms
  double measured_ms = 0, predicted_ms = 0;
};

struct Registered {
  std::string file, validation, policy;
  nlohmann::json score;
  std::string regime_now;  // the validation's reading of the gain's regime, where it has one
  bool column = false;     // configs against each other (compare --against): no replay, so not in the table above
};

struct Found {
  std::vector<std::pair<std::string, std::string>> validations;  // (path, campaign)
  std::vector<std::string> registrations;
};

// Registrations are told by their format key, so any file name is found; files over 1 MiB
// (models, traces' summaries of long runs) are not predictions and are not read.
Found find_files(const std::vector<std::string>& roots) {
  Found found;
  for (const std::string& root : roots) {
    if (!fs::is_directory(root)) throw InputError(root + ": not a folder (scorecard reads the folders given)");
    std::vector<fs::path> paths;
    for (const auto& entry : fs::recursive_directory_iterator(root))
      if (entry.is_regular_file() && entry.path().extension() == ".json") paths.push_back(entry.path());
    std::sort(paths.begin(), paths.end());
    for (const fs::path& path : paths) {
      if (path.filename() == "validation.json") {
        const std::string campaign = fs::relative(path.parent_path().parent_path(), root).generic_string();
        found.validations.emplace_back(path.generic_string(), campaign);
      } else if (fs::file_size(path) <= MiB &&
                 read_input_file(path.string(), "JSON file").find(kRegistrationFormat) != std::string::npos) {
        found.registrations.push_back(path.generic_string());
      }
    }
  }
  return found;
}

std::string cell(const char* format, double v) {
  char text[48];
  std::snprintf(text, sizeof text, format, std::abs(v) < 5e-3 ? 0.0 : v);
  return text;
}

std::string count(int k, int n) {
  return n == 0 ? "—" : std::to_string(k) + " of " + std::to_string(n);
}

// The registered gains' coverage in one line: the table by campaign above counts only gains a
// validation replayed, which leaves out every config scored against another.
std::string registered_count(const std::vector<Registered>& rows) {
  int inside = 0, columns = 0, columns_inside = 0;
  for (const Registered& r : rows) {
    const bool in = r.score["measured_in_prediction_interval"].get<bool>();
    inside += in;
    columns += r.column;
    columns_inside += r.column && in;
  }
  return "Measured inside the registered prediction interval: " + count(inside, int(rows.size())) +
         " (configs against each other, which the table above leaves out: " + count(columns_inside, columns) +
         ").\n\n";
}

std::string group_row(const std::string& campaign, const std::string& regime, const std::vector<Gain>& gains) {
  int with_interval = 0, inside = 0, with_ci = 0, predicted_inside = 0;
  std::vector<double> widths, errors;
  for (const Gain& g : gains) {
    errors.push_back(std::abs(g.predicted - g.measured));
    if (g.measured_ci) {
      ++with_ci;
      predicted_inside += g.measured_ci->first <= g.predicted && g.predicted <= g.measured_ci->second;
    }
    if (!g.interval) continue;
    ++with_interval;
    inside += g.interval->first <= g.measured && g.measured <= g.interval->second;
    widths.push_back(g.interval->second - g.interval->first);
  }
  return "| " + campaign + " | " + regime + " | " + std::to_string(gains.size()) + " | " +
         count(inside, with_interval) + " | " + count(predicted_inside, with_ci) + " | " +
         (widths.empty() ? "—" : cell("%.1f", percentile(widths, 50))) + " | " + cell("%.2f", mean(errors)) + " | " +
         cell("%.2f", percentile(errors, 95)) + " |\n";
}

std::string step_row(const std::string& campaign, const std::vector<Step>& steps) {
  int with_interval = 0, inside = 0;
  std::vector<double> errors, p95_errors, widths;
  for (const Step& st : steps) {
    errors.push_back(std::abs(st.error_pct));
    p95_errors.push_back(std::abs(st.p95_error_pct));
    if (!st.interval) continue;
    ++with_interval;
    inside += st.interval->first <= st.measured_ms && st.measured_ms <= st.interval->second;
    widths.push_back(100 * (st.interval->second - st.interval->first) / 2 / st.predicted_ms);
  }
  return "| " + campaign + " | " + std::to_string(steps.size()) + " | " + count(inside, with_interval) + " | " +
         (widths.empty() ? "—" : "±" + cell("%.1f", percentile(widths, 50))) + " | " +
         cell("%.1f", percentile(errors, 50)) + " | " + cell("%.1f", *std::max_element(errors.begin(), errors.end())) +
         " | " + cell("%.1f", percentile(p95_errors, 50)) + " |\n";
}

// Step times by campaign: each run once (a baseline validated beside several policies, once).
std::string steps_table(const std::vector<std::pair<std::string, std::vector<Step>>>& campaigns) {
  std::string out =
      "\n## Step times\n\nEach run's mean max step in its steady state against the model's replay of its batches "
      "(`validate`), once per run. The prediction interval is the replay's steps interval widened by what the model "
      "does not know, the process's level with it ([intervals](intervals.md#a-step-times-interval)); validations "
      "written before it existed have none (—). Errors are |predicted − measured| in % of the measured.\n\n"
      "| campaign | runs | measured mean inside prediction interval | median half-width (%) | median error of the "
      "mean (%) | largest (%) | median error of the P95 (%) |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  std::vector<Step> all;
  for (const auto& [campaign, steps] : campaigns) {
    out += step_row(campaign, steps);
    all.insert(all.end(), steps.begin(), steps.end());
  }
  return out + step_row("**all**", all);
}

// The scorecard's step times: each run's steady-state mean once per campaign (a baseline
// validated beside several policies, once), and the mean steps registered with an interval.
class StepTally {
 public:
  void add(const std::string& campaign, const nlohmann::json& doc) {
    for (const auto& [policy, p] : doc["policies"].items()) add_run(campaign, policy, p);
    if (doc.contains("baseline") && doc["baseline"].is_object() && doc["baseline"].contains("figures"))
      add_run(campaign, doc["baseline"].value("policy", std::string()), doc["baseline"]["figures"]);
    if (!doc.contains("registered")) return;
    const auto& r = doc["registered"];
    const std::string file = r["file"].get<std::string>();
    add_registered(file, r["baseline"].value("policy", std::string()), r["baseline"]);
    for (const auto& [policy, score] : r["policies"].items()) add_registered(file, policy, score);
  }
  std::string table() const { return campaigns_.empty() ? "" : steps_table(campaigns_); }
  std::pair<int, int> registered() const { return registered_; }  // inside, of those with an interval
  const std::vector<double>& tail_errors() const { return tails_; }  // |registered − measured| P95/mean, %

 private:
  void add_run(const std::string& campaign, const std::string& policy, const nlohmann::json& f) {
    if (!f.contains("mean_error_pct") || !runs_.insert({campaign, policy}).second) return;
    Step st{f["mean_error_pct"].get<double>(), f.value("p95_error_pct", 0.0), std::nullopt,
            f.value("measured_mean_max_step_ms", 0.0), f.value("predicted_mean_max_step_ms", 0.0)};
    if (f.contains("predicted_mean_pi95"))
      st.interval = {f["predicted_mean_pi95"][0].get<double>(), f["predicted_mean_pi95"][1].get<double>()};
    if (campaigns_.empty() || campaigns_.back().first != campaign) campaigns_.push_back({campaign, {}});
    campaigns_.back().second.push_back(st);
  }
  void add_registered(const std::string& file, const std::string& policy, const nlohmann::json& score) {
    const std::tuple run{file, policy, score.value("measured_mean_ms", 0.0)};
    if (!registered_runs_.insert(run).second) return;
    if (score.contains("tail_error_pct")) tails_.push_back(std::abs(score["tail_error_pct"].get<double>()));
    if (!score.contains("measured_mean_in_prediction_interval")) return;
    ++registered_.second;
    registered_.first += score["measured_mean_in_prediction_interval"].get<bool>();
  }

  std::vector<std::pair<std::string, std::vector<Step>>> campaigns_;  // in the order met
  std::set<std::pair<std::string, std::string>> runs_;                // (campaign, policy)
  std::pair<int, int> registered_{0, 0};
  std::set<std::tuple<std::string, std::string, double>> registered_runs_;  // (registration, policy, measured mean)
  std::vector<double> tails_;
};

// "Registered P95 / mean of the max step against the measured: ..." (none: "").
std::string tail_line(const std::vector<double>& errors) {
  if (errors.empty()) return "";
  int within = 0;
  for (double e : errors) within += e <= 5;
  return "Registered P95 / mean of the max step against the measured (the noise model's tail, which the process's "
         "level cancels out of): within 5% in " +
         count(within, static_cast<int>(errors.size())) + ", median " + cell("%.1f", percentile(errors, 50)) +
         "%, largest " + cell("%.1f", *std::max_element(errors.begin(), errors.end())) + "%.\n\n";
}

std::string registered_table(const std::vector<Registered>& rows, std::pair<int, int> steps,
                             const std::vector<double>& tails) {
  std::string out =
      "\n## Registered predictions, scored\n\n"
      "Each made before its run (`ddpsim compare --register`), scored by `ddpsim validate --registered`; where the "
      "prediction set configs against each other (`compare --against`), the policy column names the config's column, "
      "scored against the base column's run. The regime is the one the registered session term was read for; where "
      "the validation reads the same model otherwise, the brackets say so. Registrations made before a correction "
      "read a model calibrated with `--training` runs as two regimes: a compute-bound or mixed row took the "
      "compute-bound session figure for rank-steps now read as one regime (whose figure is the launch-bound one), "
      "a launch-bound row kept its figure and is only relabelled. Configs against each other are scored from their "
      "runs alone, without the model, so their regime is not read again.\n\n" +
      registered_count(rows) +
      (steps.second ? "Registered mean steps measured inside their prediction interval: " +
                          count(steps.first, steps.second) + " (registrations whose step times carry one).\n\n"
                    : std::string()) +
      tail_line(tails) +
      "| validation | policy | regime | registered gain [seeds] [prediction] | measured [95%] | measured inside "
      "prediction | registered inside measured |\n| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Registered& r : rows) {
    const auto& s = r.score;
    const auto seeds = s["registered_seeds_interval"], pi = s["registered_prediction_interval"],
               ci = s["measured_gain_ci95"];
    // A gain per sample (a policy that trains another number of samples a step) says so, and a
    // registration and a run that disagree on which it is say that too.
    const bool per_sample = s.value("registered_per_sample", false);
    const std::string unit = per_sample ? " per sample" : "";
    const std::string mismatch = s.value("per_sample", per_sample) == per_sample ? "" : " (measured per step)";
    // The regime the registered session term used, and the validation's reading where that differs.
    std::string regime = s.value("regime", std::string());
    if (regime.empty())
      regime = "—";
    else if (!r.regime_now.empty() && r.regime_now != regime)
      regime += " (now " + r.regime_now + ")";
    out += "| " + r.validation + " | " + r.policy + " | " + regime + " | " +
           cell("%+.2f", s["registered_gain_pct"].get<double>()) + "%" + unit + " [" +
           cell("%+.2f", seeds[0].get<double>()) + ", " + cell("%+.2f", seeds[1].get<double>()) + "] [" +
           cell("%+.1f", pi[0].get<double>()) + ", " + cell("%+.1f", pi[1].get<double>()) + "] | " +
           cell("%+.2f", s["measured_gain_pct"].get<double>()) + "%" + mismatch + " [" +
           cell("%+.2f", ci[0].get<double>()) + ", " + cell("%+.2f", ci[1].get<double>()) + "] | " +
           (s["measured_in_prediction_interval"].get<bool>() ? "yes" : "**no**") + " | " +
           (s["registered_in_measured_ci"].get<bool>() ? "yes" : "no") + " |\n";
  }
  return out;
}

}  // namespace

std::string scorecard(const std::vector<std::string>& roots) {
  const Found found = find_files(roots);
  std::vector<std::pair<std::string, std::string>> order;  // (campaign, regime) as first met
  std::map<std::pair<std::string, std::string>, std::vector<Gain>> groups;
  std::vector<Gain> all;
  std::vector<Registered> registered;
  std::set<std::string> scored;  // registrations a validation scored
  StepTally steps;
  for (const auto& [path, campaign] : found.validations) {
    const nlohmann::json doc = read_json_file(path);
    if (!doc.contains("policies") || !doc["policies"].is_object())
      throw InputError(path + ": a validation.json without \"policies\" (ddpsim validate writes them)");
    steps.add(campaign, doc);
    for (const auto& [policy, p] : doc["policies"].items()) {
      if (!p.contains("measured_gain_pct")) continue;  // validated without a baseline: no gain
      Gain g{p["predicted_gain_pct"].get<double>(), p["measured_gain_pct"].get<double>(), std::nullopt, std::nullopt};
      if (p.contains("measured_gain_ci95") && p["measured_gain_ci95"].is_array())
        g.measured_ci = {p["measured_gain_ci95"][0].get<double>(), p["measured_gain_ci95"][1].get<double>()};
      if (p.contains("predicted_gain_pi95"))
        g.interval = {p["predicted_gain_pi95"][0].get<double>(), p["predicted_gain_pi95"][1].get<double>()};
      const std::pair key{campaign, p.value("predicted_gain_regime", std::string("not recorded"))};
      if (!groups.count(key)) order.push_back(key);
      groups[key].push_back(g);
      all.push_back(g);
    }
    if (doc.contains("registered")) {
      const auto& r = doc["registered"];
      scored.insert(fs::weakly_canonical(r["file"].get<std::string>()).generic_string());
      for (const auto& [policy, score] : r["policies"].items()) {
        std::string now;
        if (const auto& read = doc["policies"]; read.contains(policy))
          now = read[policy].value("predicted_gain_regime", std::string());
        registered.push_back({r["file"].get<std::string>(), campaign, policy, score, now, r.contains("column")});
      }
    }
  }
  std::string out =
      "# Scorecard\n\nWritten by `ddpsim scorecard`: every predicted gain of a `validation.json` against its "
      "measured gain. The prediction interval is the predicted gain's steps interval widened by what the model "
      "does not know ([intervals](intervals.md)); validations written before it existed have none (—), and the oldest "
      "have no measured interval "
      "either. Errors are |predicted − measured| in percentage points.\n\n"
      "| campaign | regime | gains | measured inside prediction interval | predicted inside measured interval "
      "| median interval width (pp) | mean error (pp) | P95 error (pp) |\n| --- | --- | --- | --- | --- | --- | --- "
      "| --- |\n";
  for (const auto& key : order) out += group_row(key.first, key.second, groups[key]);
  if (!all.empty()) out += group_row("**all**", "", all);
  out += steps.table();
  if (!registered.empty()) out += registered_table(registered, steps.registered(), steps.tail_errors());
  std::string awaiting;
  for (const std::string& file : found.registrations)
    if (!scored.count(fs::weakly_canonical(file).generic_string())) awaiting += "- " + file + "\n";
  if (!awaiting.empty()) out += "\n## Registered predictions awaiting their run\n\n" + awaiting;
  return out;
}

}  // namespace ddpsim
