#include "calib/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/error.hpp"
#include "common/stats.hpp"

namespace ddpsim {

SimulationRun replay(const Trace& trace, Config config) {
  const int G = trace.runs.front().G;
  for (const auto& run : trace.runs)
    if (run.G != G)
      throw InputError(trace.path + ": policies with different rank counts (" + std::to_string(run.G) + " and " +
                       std::to_string(G) + "): replay one world size at a time");
  if (config.training.world_size != G) {
    if (config.platform.topology == "xml" && static_cast<int>(config.platform.hosts.size()) != G)
      throw InputError(trace.path + ": the trace has " + std::to_string(G) + " ranks, the platform maps " +
                       std::to_string(config.platform.hosts.size()));
    if (config.platform.topology == "cluster" && G % config.platform.gpus_per_node != 0)
      throw InputError(trace.path + ": " + std::to_string(G) + " ranks are not whole nodes of " +
                       std::to_string(config.platform.gpus_per_node) + " GPUs");
    config.training.world_size = G;
  }
  std::vector<PolicyRun> runs = trace.runs;
  for (auto& run : runs) {
    run.decision_us.clear();
    for (auto& r : run.rows) {  // keep only what was planned: the simulator fills the rest
      r.fwd_ms = r.bwd_ms = r.comm_wait_ms = r.opt_ms = r.step_ms = r.peak_mem_mib = r.loss = NOT_MEASURED;
      r.step = static_cast<int>(&r - run.rows.data()) / run.G;
    }
  }
  return simulate_runs(config, std::move(runs));
}

namespace {

PolicyValidation compare(const PolicyRun& measured, const PolicyRun& predicted, const std::string& path) {
  for (const auto& r : measured.rows)
    if (std::isnan(r.step_ms))
      throw InputError(path + ": policy " + measured.label + ", step " + std::to_string(r.step) + ", rank " +
                       std::to_string(r.rank) + ": step_ms is empty; validation needs measured step times");
  PolicyValidation v;
  v.policy = measured.label;
  v.measured_steps_ms = max_step_ms(measured);
  v.predicted_steps_ms = max_step_ms(predicted);
  v.steps = static_cast<int>(v.measured_steps_ms.size());
  const TokenSummary m = summarize(measured), p = summarize(predicted);
  v.measured_mean_ms = m.mean_max_step_ms, v.predicted_mean_ms = p.mean_max_step_ms;
  v.measured_p95_ms = m.p95_max_step_ms, v.predicted_p95_ms = p.p95_max_step_ms;
  v.measured_samples_per_s = m.mean_samples_per_s, v.predicted_samples_per_s = p.mean_samples_per_s;
  v.mean_error_pct = 100 * (v.predicted_mean_ms - v.measured_mean_ms) / v.measured_mean_ms;
  v.p95_error_pct = 100 * (v.predicted_p95_ms - v.measured_p95_ms) / v.measured_p95_ms;
  std::vector<double> ape, abs_error;
  for (std::size_t i = 0; i < v.measured_steps_ms.size(); ++i) {
    abs_error.push_back(std::abs(v.predicted_steps_ms[i] - v.measured_steps_ms[i]));
    ape.push_back(100 * abs_error.back() / v.measured_steps_ms[i]);
  }
  v.step_mape_pct = mean(ape);
  v.step_p95_abs_error_ms = percentile(abs_error, 95);
  return v;
}

}  // namespace

Validation validate(const Trace& measured, const Config& config, const Trace* baseline) {
  Validation v;
  const SimulationRun sim = replay(measured, config);
  for (std::size_t p = 0; p < measured.runs.size(); ++p)
    v.policies.push_back(compare(measured.runs[p], sim.runs[p], measured.path));
  if (baseline) {
    if (baseline->runs.size() != 1)
      throw InputError(baseline->path + ": a baseline trace holds one policy, this one " +
                       std::to_string(baseline->runs.size()));
    const SimulationRun base = replay(*baseline, config);
    v.has_baseline = true;
    v.baseline = compare(baseline->runs[0], base.runs[0], baseline->path);
    for (const auto& p : v.policies) {
      v.measured_gain_pct.push_back(100 * (1 - p.measured_mean_ms / v.baseline.measured_mean_ms));
      v.predicted_gain_pct.push_back(100 * (1 - p.predicted_mean_ms / v.baseline.predicted_mean_ms));
    }
  }
  return v;
}

std::string validation_report(const Validation& v) {
  char line[320];
  std::string out;
  std::snprintf(line, sizeof line, "%-28s %6s %22s %22s %20s %10s %12s\n", "policy", "steps", "mean max step ms",
                "P95 max step ms", "samples/s", "step MAPE", "step P95 |e|");
  out += line;
  std::snprintf(line, sizeof line, "%-28s %6s %22s %22s %20s %10s %12s\n", "", "", "meas -> pred (err)",
                "meas -> pred (err)", "meas -> pred", "%", "ms");
  out += line;
  auto row = [&](const PolicyValidation& p, const std::string& label) {
    char mean_text[64], p95_text[64], sps[64];
    std::snprintf(mean_text, sizeof mean_text, "%.2f -> %.2f (%+.1f%%)", p.measured_mean_ms, p.predicted_mean_ms,
                  p.mean_error_pct);
    std::snprintf(p95_text, sizeof p95_text, "%.2f -> %.2f (%+.1f%%)", p.measured_p95_ms, p.predicted_p95_ms,
                  p.p95_error_pct);
    std::snprintf(sps, sizeof sps, "%.1f -> %.1f", p.measured_samples_per_s, p.predicted_samples_per_s);
    std::snprintf(line, sizeof line, "%-28s %6d %22s %22s %20s %10.2f %12.3f\n", label.c_str(), p.steps, mean_text,
                  p95_text, sps, p.step_mape_pct, p.step_p95_abs_error_ms);
    out += line;
  };
  for (const auto& p : v.policies) row(p, p.policy);
  if (v.has_baseline) {
    row(v.baseline, v.baseline.policy + " (baseline)");
    for (std::size_t i = 0; i < v.policies.size(); ++i) {
      std::snprintf(line, sizeof line, "gain of %s over the baseline: measured %+.2f%%, predicted %+.2f%% (%+.2f pp)\n",
                    v.policies[i].policy.c_str(), v.measured_gain_pct[i], v.predicted_gain_pct[i],
                    v.predicted_gain_pct[i] - v.measured_gain_pct[i]);
      out += line;
    }
  }
  return out;
}

nlohmann::ordered_json validation_json(const Validation& v, const Trace& measured, const std::string& model_origin) {
  auto one = [](const PolicyValidation& p) {
    return nlohmann::ordered_json{{"steps", p.steps},
                                  {"measured_mean_max_step_ms", p.measured_mean_ms},
                                  {"predicted_mean_max_step_ms", p.predicted_mean_ms},
                                  {"mean_error_pct", p.mean_error_pct},
                                  {"measured_p95_max_step_ms", p.measured_p95_ms},
                                  {"predicted_p95_max_step_ms", p.predicted_p95_ms},
                                  {"p95_error_pct", p.p95_error_pct},
                                  {"measured_samples_per_s", p.measured_samples_per_s},
                                  {"predicted_samples_per_s", p.predicted_samples_per_s},
                                  {"step_mape_pct", p.step_mape_pct},
                                  {"step_p95_abs_error_ms", p.step_p95_abs_error_ms}};
  };
  nlohmann::ordered_json doc;
  doc["measured"] = {{"file", measured.path}, {"fnv1a64", measured.hash}};
  doc["model"] = model_origin;
  doc["policies"] = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < v.policies.size(); ++i) {
    auto p = one(v.policies[i]);
    if (v.has_baseline) {
      p["measured_gain_pct"] = v.measured_gain_pct[i];
      p["predicted_gain_pct"] = v.predicted_gain_pct[i];
      p["gain_error_pp"] = v.predicted_gain_pct[i] - v.measured_gain_pct[i];
    }
    doc["policies"][v.policies[i].policy] = p;
  }
  if (v.has_baseline) doc["baseline"] = {{"policy", v.baseline.policy}, {"figures", one(v.baseline)}};
  return doc;
}

std::string validation_csv(const Validation& v) {
  std::string out = "policy,step,measured_max_step_ms,predicted_max_step_ms,error_pct\n";
  char line[256];
  auto rows = [&](const PolicyValidation& p, const std::string& label) {
    for (std::size_t i = 0; i < p.measured_steps_ms.size(); ++i) {
      std::snprintf(line, sizeof line, "%s,%zu,%.4f,%.4f,%.3f\n", label.c_str(), i, p.measured_steps_ms[i],
                    p.predicted_steps_ms[i],
                    100 * (p.predicted_steps_ms[i] - p.measured_steps_ms[i]) / p.measured_steps_ms[i]);
      out += line;
    }
  };
  for (const auto& p : v.policies) rows(p, p.policy);
  if (v.has_baseline) rows(v.baseline, v.baseline.policy + " (baseline)");
  return out;
}

}  // namespace ddpsim
