#include "cli/replicates.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "common/stats.hpp"
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
  char line[400];
  std::snprintf(line, sizeof line,
                "\ngain over %s with the compute noise and with it off (σ's, slow spells and measured steps; the "
                "same samples):\n",
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
  return {std::move(quiet), out};
}

namespace {

std::string predictions_report(const Config& config, const SimulationRun& first,
                               const std::vector<GainPrediction>& gains) {
  std::string out =
      "\neach gain's 95% prediction interval: the seeds' range widened, in quadrature, by what the model does not "
      "know (half-widths in pp)\n";
  int width = 0;
  for (const PolicyRun& run : first.runs) width = std::max(width, static_cast<int>(run.label.size()));
  for (std::size_t p = 1; p < gains.size(); ++p)
    out += "  " + first.runs[p].label + std::string(width - first.runs[p].label.size(), ' ') + "  " +
           gain_prediction_text(gains[p]) + (gains[p].per_sample ? " per sample" : "") + "\n  " +
           std::string(width, ' ') + "  " + terms_text(gains[p]) + "\n";
  out += "  session: " + session_spread(*config.model).source + "\n";
  if (config.model->supported_forms.empty())
    out += "  model form: the model records no held-out error by form (calibrate writes them), so no form term\n";
  if (!can_simulate_again(config)) out += std::string("  no variant simulated: ") + kXmlOncePerProcess + "\n";
  return out;
}

nlohmann::ordered_json replicates_json(const Config& config, const SimulationRun& first, int replicates,
                                       const std::vector<std::vector<double>>& means,
                                       const std::vector<std::vector<double>>& p95s,
                                       const std::vector<GainPrediction>& gains) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  const auto figure = [](const std::vector<double>& x) {
    return nlohmann::ordered_json{{"mean", mean(x)}, {"interval95", {percentile(x, 2.5), percentile(x, 97.5)}}};
  };
  for (std::size_t p = 0; p < first.runs.size(); ++p) {
    nlohmann::ordered_json j{{"mean_max_step_ms", figure(means[p])}, {"p95_max_step_ms", figure(p95s[p])}};
    if (p > 0) j["gain"] = gain_prediction_json(gains[p]);
    policies[first.runs[p].label] = std::move(j);
  }
  return {{"seeds", {config.training.seed, config.training.seed + replicates - 1}},
          {"baseline", first.runs[0].label},
          {"session_source", session_spread(*config.model).source},
          {"policies", std::move(policies)}};
}

}  // namespace

Replicates replicates_report(const Config& config, const LengthSource& source, const SimulationRun& first,
                             const SimulationRun* first_quiet, int replicates,
                             const std::function<void(long, long)>& progress) {
  const std::size_t P = first.runs.size();
  const bool quiet = first_quiet != nullptr;
  std::vector<std::vector<double>> means(P), p95s(P), gains(P), quiet_gains(P);
  std::vector<bool> per_sample(P, false);
  const auto add = [&](const SimulationRun& sim, std::vector<std::vector<double>>& into, bool figures) {
    std::vector<bool> each;
    const std::vector<double> g = run_gains(sim, &each);
    for (std::size_t p = 0; p < P; ++p) {
      const TokenSummary& s = sim.summaries[p];
      if (figures) means[p].push_back(s.mean_max_step_ms), p95s[p].push_back(s.p95_max_step_ms);
      into[p].push_back(g[p]);
      per_sample[p] = each[p];
    }
  };
  add(first, gains, true);
  if (quiet) add(*first_quiet, quiet_gains, false);
  for (int r = 1; r < replicates; ++r) {
    Config seeded = config;
    seeded.training.seed = config.training.seed + r;
    const std::vector<int> dataset = config_dataset(seeded, source);
    add(simulate_streamed(seeded, dataset, {0, 0}, {}, {}), gains, true);  // the summaries alone
    if (quiet) add(simulate_streamed(without_compute_noise(seeded), dataset, {0, 0}, {}, {}), quiet_gains, false);
    if (progress) progress(r + 1, replicates);
  }
  const std::vector<GainPrediction> predicted =
      gain_predictions(config, config_dataset(config, source), first, first_quiet, gains);
  const auto cell = [](const std::vector<double>& x, const char* format) {
    char text[96];
    std::snprintf(text, sizeof text, format, shown(mean(x), 2), shown(percentile(x, 2.5), 2),
                  shown(percentile(x, 97.5), 2));
    return std::string(text);
  };
  char line[480];
  std::snprintf(line, sizeof line,
                "\nover %d seeds (%lld to %lld), %d steps each: the mean over the seeds [2.5-97.5%% range]\n"
                "%-30s %-28s %-28s %-30s%s\n",
                replicates, static_cast<long long>(config.training.seed),
                static_cast<long long>(config.training.seed) + replicates - 1, config.training.steps, "policy",
                "max step time, mean (ms)", "max step time, P95 (ms)", ("gain over " + first.runs[0].label).c_str(),
                quiet ? " gain, compute noise off" : "");
  std::string out = line;
  for (std::size_t p = 0; p < P; ++p) {
    const std::string suffix = per_sample[p] ? " per sample" : "";
    const std::string gain = p == 0 ? "-" : cell(gains[p], "%+.2f%% [%+.2f, %+.2f]") + suffix;
    const std::string off = !quiet ? "" : p == 0 ? " -" : " " + cell(quiet_gains[p], "%+.2f%% [%+.2f, %+.2f]") + suffix;
    std::snprintf(line, sizeof line, "%-30s %-28s %-28s %-30s%s", first.runs[p].label.c_str(),
                  cell(means[p], "%.2f [%.2f, %.2f]").c_str(), cell(p95s[p], "%.2f [%.2f, %.2f]").c_str(), gain.c_str(),
                  off.c_str());
    out += line;
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  if (P > 1) out += predictions_report(config, first, predicted);
  return {out, replicates_json(config, first, replicates, means, p95s, predicted)};
}

}  // namespace ddpsim::cli
