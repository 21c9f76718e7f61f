// The validation's outputs: the printed report (steady state and every step, gains with their
// verdicts, the phases' table), validation.json and validation.csv.
#include "calib/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/stats.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {

std::string report_table(const ValidationSet& set, bool has_baseline) {
  const auto& policies = set.policies;
  const auto &measured_gain = set.measured_gain_pct, &predicted_gain = set.predicted_gain_pct;
  char line[512];
  std::string out;
  std::snprintf(line, sizeof line, "%-28s %6s %6s %22s %22s %20s %10s %12s\n", "policy", "from", "steps",
                "mean max step ms", "P95 max step ms", "samples/s", "step MAPE", "step P95 |e|");
  out += line;
  std::snprintf(line, sizeof line, "%-28s %6s %6s %22s %22s %20s %10s %12s\n", "", "step", "", "meas -> pred (err)",
                "meas -> pred (err)", "meas -> pred", "%", "ms");
  out += line;
  auto row = [&](const PolicyValidation& p, const std::string& label) {
    char mean_text[64], p95_text[64], sps[64];
    std::snprintf(mean_text, sizeof mean_text, "%.2f -> %.2f (%+.1f%%)", p.measured_mean_ms, p.predicted_mean_ms,
                  shown(p.mean_error_pct, 1));
    std::snprintf(p95_text, sizeof p95_text, "%.2f -> %.2f (%+.1f%%)", p.measured_p95_ms, p.predicted_p95_ms,
                  shown(p.p95_error_pct, 1));
    std::snprintf(sps, sizeof sps, "%.1f -> %.1f", p.measured_samples_per_s, p.predicted_samples_per_s);
    std::snprintf(line, sizeof line, "%-28s %6d %6d %22s %22s %20s %10.2f %12.3f\n", label.c_str(), p.first_step,
                  p.steps, mean_text, p95_text, sps, p.step_mape_pct, p.step_p95_abs_error_ms);
    out += line;
  };
  for (const auto& p : policies) row(p, p.policy);
  if (has_baseline) row(set.baseline, set.baseline.policy + " (baseline)");
  out += "measured, 95% intervals (block bootstrap over the steps):\n";
  auto intervals = [&](const PolicyValidation& p, const std::string& label) {
    std::snprintf(line, sizeof line, "  %-26s mean %.2f .. %.2f ms, P95 %.2f .. %.2f ms\n", label.c_str(),
                  p.measured_mean_ci.low, p.measured_mean_ci.high, p.measured_p95_ci.low, p.measured_p95_ci.high);
    out += line;
  };
  for (const auto& p : policies) intervals(p, p.policy);
  if (has_baseline) intervals(set.baseline, set.baseline.policy + " (baseline)");
  out += "predicted, 95% prediction intervals (the replay's steps widened by what the model does not know):\n";
  auto predicted = [&](const PolicyValidation& p, const std::string& label) {
    const StepPrediction& s = p.predicted_mean_pi;
    std::snprintf(line, sizeof line, "  %-26s mean %.2f .. %.2f ms, mostly: %s; the measured mean %s\n    %s\n",
                  label.c_str(), s.lo_ms, s.hi_ms, s.mostly == "seeds" ? "steps" : s.mostly.c_str(),
                  s.holds(p.measured_mean_ms) ? "inside" : "outside", terms_text(s.terms, "%").c_str());
    out += line;
  };
  for (const auto& p : policies) predicted(p, p.policy);
  if (!has_baseline) return out;
  predicted(set.baseline, set.baseline.policy + " (baseline)");
  for (std::size_t i = 0; i < policies.size(); ++i) {
    const Interval &m = set.measured_gain_ci[i], &p = set.predicted_gain_ci[i];
    const std::string verdict = m.contains(0) ? "the measured gain cannot be told from noise (its interval holds 0)"
                                : m.contains(predicted_gain[i]) ? "the prediction lies inside the measured interval"
                                                                : "the prediction lies outside the measured interval";
    char quiet[64] = "";
    if (!std::isnan(set.predicted_quiet_gain_pct[i]))
      std::snprintf(quiet, sizeof quiet, ", noise off %+.2f%%", shown(set.predicted_quiet_gain_pct[i], 2));
    std::snprintf(
        line, sizeof line,
        "gain of %s over the baseline%s%s: measured %+.2f%% (%+.2f .. %+.2f), predicted %+.2f%% "
        "(%+.2f .. %+.2f%s), %+.2f pp; %s\n",
        policies[i].policy.c_str(),
        set.gain_per_sample[i] ? ", per sample (it trains another number of samples a step)" : "",
        !set.gain_restricted[i] ? ""
        : set.gain_end_cut[i]   ? (", both over " + steps_text(set.gain_from_step[i], set.gain_end_step[i])).c_str()
                                : (", both from step " + std::to_string(set.gain_from_step[i])).c_str(),
        shown(measured_gain[i], 2), shown(m.low, 2), shown(m.high, 2), shown(predicted_gain[i], 2), shown(p.low, 2),
        shown(p.high, 2), quiet, shown(predicted_gain[i] - measured_gain[i], 2), verdict.c_str());
    out += line;
    if (i < set.predicted_gain_pi.size()) {
      const GainPrediction& g = set.predicted_gain_pi[i];
      out += "  predicted " + gain_prediction_text(g, "steps") + "\n    " + terms_text(g) + "; the measured gain " +
             (g.lo <= measured_gain[i] && measured_gain[i] <= g.hi ? "inside" : "outside") +
             " the prediction interval\n";
    }
  }
  if (!policies.empty())
    out += set.paired ? "  (gains paired step by step: the runs were trained in turn)\n"
                      : "  (gains from runs resampled apart: they ran at different times, and the intervals do "
                        "not hold the variation between runs)\n";
  return out;
}

// Runs trained in turn do the same optimizer work, so its times far apart say that the machine
// ran each run's model at a level of its own (calibrate --training's control, for the run itself).
std::string own_level_notes(const ValidationSet& set) {
  const double base = set.baseline.measured_optimizer_median_ms;
  std::string out;
  char line[384];
  for (const auto& p : set.policies) {
    const double own = p.measured_optimizer_median_ms;
    if (!(own > 0 && base > 0)) continue;  // NaN too: not timed
    const double apart = levels_apart(std::vector{own, base});
    if (apart <= kOwnLevelApart) continue;
    std::snprintf(line, sizeof line,
                  "  the optimizer, the same work in both runs, took %.1f ms a rank-step under %s and %.1f under the "
                  "baseline (medians, %.1f%% apart): the machine ran each model at a level of its own, and the "
                  "measured gain carries it\n",
                  own, p.policy.c_str(), base, 100 * apart);
    out += line;
  }
  return out;
}

// The phases' table: which of them a mean error comes from.
std::string phases_table(const ValidationSet& set, bool has_baseline) {
  std::vector<const PolicyValidation*> rows;
  for (const auto& p : set.policies) rows.push_back(&p);
  if (has_baseline) rows.push_back(&set.baseline);
  std::vector<std::string> names;  // every phase any run measured, in step order
  for (const auto* p : rows)
    for (const auto& f : p->phases)
      if (std::find(names.begin(), names.end(), f.phase) == names.end()) names.push_back(f.phase);
  if (names.empty()) return "";
  char cell[96];
  std::string out = "phases, mean ms per rank-step, meas -> pred (err):\n";
  std::snprintf(cell, sizeof cell, "%-28s", "policy");
  out += cell;
  for (const auto& name : names) {
    std::snprintf(cell, sizeof cell, " %24s", name.c_str());
    out += cell;
  }
  out += "\n";
  for (const auto* p : rows) {
    std::snprintf(cell, sizeof cell, "%-28s", (p == &set.baseline ? p->policy + " (baseline)" : p->policy).c_str());
    out += cell;
    for (const auto& name : names) {
      const auto f = std::find_if(p->phases.begin(), p->phases.end(), [&](auto& x) { return x.phase == name; });
      char text[64] = "-";
      if (f != p->phases.end())
        std::snprintf(text, sizeof text, "%.1f -> %.1f (%+.1f%s)", shown(f->measured_ms, 1), shown(f->predicted_ms, 1),
                      shown(f->error(), 1), f->relative ? "%" : " ms");
      std::snprintf(cell, sizeof cell, " %24s", text);
      out += cell;
    }
    out += "\n";
  }
  if (has_baseline && set.paired) out += own_level_notes(set);
  return out;
}

nlohmann::ordered_json phases_json(const PolicyValidation& p) {
  auto out = nlohmann::ordered_json::object();
  for (const auto& f : p.phases)
    out[f.phase] = {{"measured_ms", f.measured_ms},
                    {"predicted_ms", f.predicted_ms},
                    {f.relative ? "error_pct" : "error_ms", f.error()}};
  return out;
}

nlohmann::ordered_json figures(const PolicyValidation& p) {
  return nlohmann::ordered_json{{"warmup_steps", p.first_step},
                                {"steps", p.steps},
                                {"measured_mean_max_step_ms", p.measured_mean_ms},
                                {"predicted_mean_max_step_ms", p.predicted_mean_ms},
                                {"mean_error_pct", p.mean_error_pct},
                                {"measured_p95_max_step_ms", p.measured_p95_ms},
                                {"predicted_p95_max_step_ms", p.predicted_p95_ms},
                                {"p95_error_pct", p.p95_error_pct},
                                {"measured_samples_per_s", p.measured_samples_per_s},
                                {"predicted_samples_per_s", p.predicted_samples_per_s},
                                {"step_mape_pct", p.step_mape_pct},
                                {"step_p95_abs_error_ms", p.step_p95_abs_error_ms},
                                {"measured_mean_ci95", {p.measured_mean_ci.low, p.measured_mean_ci.high}},
                                {"measured_p95_ci95", {p.measured_p95_ci.low, p.measured_p95_ci.high}},
                                {"predicted_mean_pi95", {p.predicted_mean_pi.lo_ms, p.predicted_mean_pi.hi_ms}},
                                {"predicted_mean_pi_terms_pct", terms_json(p.predicted_mean_pi.terms)},
                                {"predicted_mean_pi_mostly", p.predicted_mean_pi.mostly},
                                {"measured_mean_in_prediction_interval", p.predicted_mean_pi.holds(p.measured_mean_ms)},
                                {"phases", phases_json(p)}};
}

}  // namespace

std::string validation_report(const Validation& v) {
  const std::string from = v.shared_warmup < 0
                               ? "each run from the step given; --warmup"
                               : "policies trained in turn, all from step " + std::to_string(v.shared_warmup) +
                                     ", where the last of them settles";
  return "steady state (" + from + "):\n" + report_table(v.steady, v.has_baseline) +
         phases_table(v.steady, v.has_baseline) + "\nevery step:\n" + report_table(v.all, v.has_baseline);
}

nlohmann::ordered_json validation_json(const Validation& v, const Trace& measured, const std::string& model_origin) {
  auto policy = [&](const ValidationSet& set, std::size_t i) {
    auto f = figures(set.policies[i]);
    if (v.has_baseline) {
      f["measured_gain_pct"] = set.measured_gain_pct[i];
      f["predicted_gain_pct"] = set.predicted_gain_pct[i];
      if (!std::isnan(set.predicted_quiet_gain_pct[i]))
        f["predicted_gain_noise_off_pct"] = set.predicted_quiet_gain_pct[i];
      f["gain_error_pp"] = set.predicted_gain_pct[i] - set.measured_gain_pct[i];
      if (set.gain_per_sample[i]) f["gain_per_sample"] = true;
      f["gain_from_step"] = set.gain_from_step[i];
      f["gain_to_step"] = set.gain_end_step[i] - 1;
      const Interval &m = set.measured_gain_ci[i], &p = set.predicted_gain_ci[i];
      f["measured_gain_ci95"] = {m.low, m.high};
      f["predicted_gain_ci95"] = {p.low, p.high};
      f["gain_paired"] = set.paired;
      f["gain_resolved"] = !m.contains(0);  // false: the measured gain cannot be told from noise
      f["predicted_gain_in_measured_ci"] = m.contains(set.predicted_gain_pct[i]);
      const GainPrediction& g = set.predicted_gain_pi[i];
      f["predicted_gain_pi95"] = {g.lo, g.hi};
      f["predicted_gain_pi_terms_pp"] = gain_prediction_json(g)["terms_half_width_pp"];
      f["predicted_gain_pi_mostly"] = g.mostly;
      f["predicted_gain_regime"] = g.regime;
      f["measured_gain_in_prediction_interval"] = g.lo <= set.measured_gain_pct[i] && set.measured_gain_pct[i] <= g.hi;
    }
    return f;
  };
  nlohmann::ordered_json doc;
  doc["measured"] = {{"file", measured.path}, {"fnv1a64", measured.hash}};
  doc["model"] = model_origin;
  if (v.shared_warmup >= 0) doc["shared_warmup_steps"] = v.shared_warmup;
  doc["policies"] = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < v.steady.policies.size(); ++i) {
    auto p = policy(v.steady, i);
    p["all_steps"] = policy(v.all, i);
    doc["policies"][v.steady.policies[i].policy] = p;
  }
  if (v.has_baseline) {
    auto f = figures(v.steady.baseline);
    f["all_steps"] = figures(v.all.baseline);
    doc["baseline"] = {{"policy", v.steady.baseline.policy}, {"figures", f}};
  }
  return doc;
}

std::string validation_csv(const Validation& v) {
  std::string out = "policy,step,measured_max_step_ms,predicted_max_step_ms,error_pct,steady\n";
  char line[256];
  auto rows = [&](const PolicyValidation& p, const std::string& label, int first) {
    for (std::size_t i = 0; i < p.measured_steps_ms.size(); ++i) {
      std::snprintf(line, sizeof line, "%s,%zu,%.4f,%.4f,%.3f,%d\n", label.c_str(), i, p.measured_steps_ms[i],
                    p.predicted_steps_ms[i],
                    100 * (p.predicted_steps_ms[i] - p.measured_steps_ms[i]) / p.measured_steps_ms[i],
                    static_cast<int>(i) >= first ? 1 : 0);
      out += line;
    }
  };
  for (std::size_t i = 0; i < v.steady.policies.size(); ++i)
    rows(v.all.policies[i], v.steady.policies[i].policy, v.steady.policies[i].first_step);
  if (v.has_baseline) rows(v.all.baseline, v.steady.baseline.policy + " (baseline)", v.steady.baseline.first_step);
  return out;
}

}  // namespace ddpsim
