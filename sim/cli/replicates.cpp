#include "cli/replicates.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "eval/pipeline_uncertainty.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"

namespace ddpsim::cli {

NoiseOff noise_off(const Config& config, std::span<const int> dataset, const SimulationRun& noisy) {
  if (noisy.runs.size() < 2 || !draws_compute_noise(config)) return {};
  if (!can_simulate_again(config))
    return {std::nullopt,
            std::string("\nthe gains with the compute noise off are not simulated here: ") + kXmlOncePerProcess +
                (config.model && !config.model->step_factors.empty()
                     ? "; the model draws measured training steps (noise.steps), which no setting turns off: give a "
                       "model without them\n"
                     : "; run again with --set simulation.noise_sigma=0 --set simulation.noise_shared_sigma=0 --set "
                       "simulation.spells=off\n")};
  SimulationRun quiet = simulate_streamed(without_compute_noise(config), dataset, {0, 0}, {}, {});
  std::string report = noise_off_report(noisy, quiet);
  return {std::move(quiet), std::move(report)};
}

std::string noise_off_report(const SimulationRun& noisy, const SimulationRun& quiet) {
  char line[400];
  std::snprintf(line, sizeof line,
                "\ngain over %s with the compute noise and with it off (σ's, slow spells, measured steps and unit "
                "jitter; the same samples):\n",
                noisy.runs[0].label.c_str());
  std::string out = line;
  int width = 0;
  for (const PolicyRun& run : noisy.runs) width = std::max(width, static_cast<int>(run.label.size()));
  std::vector<bool> per_sample;
  const std::vector<double> on = run_gains(noisy, &per_sample), off = run_gains(quiet);
  for (std::size_t p = 1; p < noisy.runs.size(); ++p) {
    std::snprintf(line, sizeof line, "  %-*s %+7.2f%%, noise off %+7.2f%%%s\n", width, noisy.runs[p].label.c_str(),
                  shown(on[p], 2), shown(off[p], 2), per_sample[p] ? " per sample" : "");
    out += line;
  }
  return out;
}

namespace {

std::string predictions_report(const Config& config, const std::vector<std::string>& labels,
                               const std::vector<GainPrediction>& gains) {
  std::string out =
      "\neach gain's 95% prediction interval: the seeds' range widened, in quadrature, by what the model does not "
      "know (half-widths in pp)\n";
  std::size_t width = 0;
  for (const std::string& label : labels) width = std::max(width, label.size());
  for (std::size_t p = 1; p < gains.size(); ++p)
    out += "  " + labels[p] + std::string(width - labels[p].size(), ' ') + "  " + gain_prediction_text(gains[p]) +
           (gains[p].per_sample ? " per sample" : "") + "\n  " + std::string(width, ' ') + "  " + terms_text(gains[p]) +
           "\n";
  out += "  session: " + session_spread(*config.model).source + "\n";
  if (config.model->run_level_spread > 0) out += "  run level: " + config.model->run_level_source + "\n";
  if (config.model->supported_forms.empty())
    out += "  model form: the model records no held-out error by form (calibrate writes them), so no form term\n";
  if (!can_simulate_again(config)) out += std::string("  no variant simulated: ") + kXmlOncePerProcess + "\n";
  return out;
}

// Where a run's mean step may land: every policy, the first too, which a gain takes as given.
std::string step_predictions_report(const PerfModel& model, const SeedFigures& f,
                                    const std::vector<StepPrediction>& steps) {
  const std::vector<std::string>& labels = f.labels;
  std::string out = "\neach mean " + std::string(f.figure == "step time" ? "step time" : "max step") +
                    "'s 95% prediction interval: the seeds' range widened, in quadrature, by what the model does not "
                    "know, the process's level with it (half-widths in % of the step)\n";
  std::size_t width = 0;
  for (const std::string& label : labels) width = std::max(width, label.size());
  for (std::size_t p = 0; p < steps.size(); ++p)
    out += "  " + labels[p] + std::string(width - labels[p].size(), ' ') + "  " + step_prediction_text(steps[p]) +
           "\n  " + std::string(width, ' ') + "  " + terms_text(steps[p].terms, "%") + "\n";
  out += "  " + step_level_source(model) + "\n";
  return out;
}

nlohmann::ordered_json replicates_json(const Config& config, const SeedFigures& f, int replicates,
                                       const std::vector<GainPrediction>& gains,
                                       const std::vector<StepPrediction>& steps) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  const auto figure = [](const std::vector<double>& x) {
    return nlohmann::ordered_json{{"mean", mean(x)}, {"interval95", {percentile(x, 2.5), percentile(x, 97.5)}}};
  };
  for (std::size_t p = 0; p < f.labels.size(); ++p) {
    const std::string key = f.figure == "step time" ? "step_ms" : "max_step_ms";
    nlohmann::ordered_json j{{"mean_" + key, figure(f.means[p])}, {"p95_" + key, figure(f.p95s[p])}};
    if (!steps.empty()) j["step"] = step_prediction_json(steps[p]);
    if (p > 0) j["gain"] = gain_prediction_json(gains[p]);
    policies[f.labels[p]] = std::move(j);
  }
  return {{"seeds", {config.training.seed, config.training.seed + replicates - 1}},
          {"baseline", f.labels[0]},
          {"session_source", session_spread(*config.model).source},
          {"policies", std::move(policies)}};
}

}  // namespace

Replicates replicates_result(const Config& config, const SeedFigures& f, int replicates,
                             const std::vector<GainPrediction>& predicted, const std::vector<StepPrediction>& steps) {
  const std::size_t P = f.labels.size();
  const bool quiet = !f.quiet_gains.empty();
  const auto cell = [](const std::vector<double>& x, const char* format) {
    char text[96];
    std::snprintf(text, sizeof text, format, shown(mean(x), 2), shown(percentile(x, 2.5), 2),
                  shown(percentile(x, 97.5), 2));
    return std::string(text);
  };
  // The table's cells, each column as wide as its widest cell (at least the widths the table
  // has always had): a long label, a large figure or a gain per sample never runs into the next.
  std::vector<std::array<std::string, 5>> rows{{f.column, f.figure + ", mean (ms)", f.figure + ", P95 (ms)",
                                                "gain over " + f.labels[0], quiet ? " gain, compute noise off" : ""}};
  for (std::size_t p = 0; p < P; ++p) {
    const std::string suffix = f.per_sample[p] ? " per sample" : "";
    const std::string gain = p == 0 ? "-" : cell(f.gains[p], "%+.2f%% [%+.2f, %+.2f]") + suffix;
    const std::string off = !quiet   ? ""
                            : p == 0 ? " -"
                                     : " " + cell(f.quiet_gains[p], "%+.2f%% [%+.2f, %+.2f]") + suffix;
    rows.push_back({f.labels[p], cell(f.means[p], "%.2f [%.2f, %.2f]"), cell(f.p95s[p], "%.2f [%.2f, %.2f]"), gain, off});
  }
  std::array<std::size_t, 4> width{30, 28, 28, 30};
  for (const auto& row : rows)
    for (std::size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  char head[160];
  std::snprintf(head, sizeof head, "\nover %d seeds (%lld to %lld), %d steps each: the mean over the seeds [2.5-97.5%% range]\n",
                replicates, static_cast<long long>(config.training.seed),
                static_cast<long long>(config.training.seed) + replicates - 1, config.training.steps);
  std::string out = head;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < width.size(); ++c) line += row[c] + std::string(width[c] - row[c].size() + 1, ' ');
    line.pop_back();  // the space after the last padded column
    line += row[4];
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  if (!steps.empty()) out += step_predictions_report(*config.model, f, steps);
  if (P > 1) out += predictions_report(config, f.labels, predicted);
  return {out, replicates_json(config, f, replicates, predicted, steps)};
}

SeedFigures::SeedFigures(std::vector<std::string> labels_, bool quiet) : labels(std::move(labels_)) {
  const std::size_t n = labels.size();
  means.resize(n), p95s.resize(n), gains.resize(n), per_sample.assign(n, false);
  if (quiet) quiet_gains.resize(n);
}

void SeedFigures::add(const SimulationRun& sim, bool quiet) {
  std::vector<bool> each;
  const std::vector<double> g = run_gains(sim, &each);
  for (std::size_t p = 0; p < labels.size(); ++p) {
    const TokenSummary& s = sim.summaries[p];
    if (!quiet) means[p].push_back(s.mean_max_step_ms), p95s[p].push_back(s.p95_max_step_ms);
    (quiet ? quiet_gains : gains)[p].push_back(g[p]);
    per_sample[p] = each[p];
  }
}

Replicates replicates_report(const Config& config, const LengthSource& source, const SimulationRun& first,
                             const SimulationRun* first_quiet, int replicates,
                             const std::function<void(long, long)>& progress) {
  std::vector<std::string> labels;
  for (const PolicyRun& run : first.runs) labels.push_back(run.label);
  SeedFigures f(std::move(labels), first_quiet != nullptr);
  f.add(first);
  if (first_quiet) f.add(*first_quiet, true);
  for (int r = 1; r < replicates; ++r) {
    Config seeded = config;
    seeded.training.seed = config.training.seed + r;
    as_replicate(seeded.training.seed, r, replicates, [&] {
      const std::vector<int> dataset = config_dataset(seeded, source);
      f.add(simulate_streamed(seeded, dataset, {0, 0}, {}, {}));  // the summaries alone
      if (first_quiet) f.add(simulate_streamed(without_compute_noise(seeded), dataset, {0, 0}, {}, {}), true);
    });
    if (progress) progress(r + 1, replicates);
  }
  const std::vector<VariantRun> variants = simulate_variants(config, config_dataset(config, source));
  return replicates_result(config, f, replicates, gain_predictions(config, variants, first, first_quiet, f.gains),
                           step_predictions(config, variants, first, first_quiet, f.means));
}

Replicates pipeline_replicates(const Config& config, const std::vector<PipelineFigures>& first, int replicates,
                               const std::function<void(long, long)>& progress) {
  const std::size_t P = first.size();
  SeedFigures f;
  f.figure = "step time";
  for (const PipelineFigures& column : first) f.labels.push_back(column.label);
  f.means.resize(P), f.p95s.resize(P), f.gains.resize(P), f.per_sample.assign(P, false);
  const auto add = [&](const std::vector<PipelineFigures>& columns, std::vector<std::vector<double>>& into,
                       bool figures) {
    const std::vector<double> g = pipeline_gains(columns);
    for (std::size_t p = 0; p < P; ++p) {
      if (figures) f.means[p].push_back(columns[p].step_mean), f.p95s[p].push_back(columns[p].step_p95);
      into[p].push_back(g[p]);
    }
  };
  std::optional<std::vector<PipelineFigures>> quiet;  // a step's noise term, and with policies to compare their gains
  if (draws_compute_noise(config)) {
    quiet = simulate_parallel(without_compute_noise(config));
    if (P > 1) f.quiet_gains.resize(P), add(*quiet, f.quiet_gains, false);
  }
  add(first, f.gains, true);
  for (int r = 1; r < replicates; ++r) {
    Config seeded = config;
    seeded.training.seed = config.training.seed + r;
    as_replicate(seeded.training.seed, r, replicates, [&] {
      add(simulate_parallel(seeded), f.gains, true);
      if (!f.quiet_gains.empty()) add(simulate_parallel(without_compute_noise(seeded)), f.quiet_gains, false);
    });
    if (progress) progress(r + 1, replicates);
  }
  const PipelinePredictions predicted =
      pipeline_predictions(config, first, quiet ? &*quiet : nullptr, f.gains, f.means);
  return replicates_result(config, f, replicates, predicted.gains, predicted.steps);
}

}  // namespace ddpsim::cli
