#include "cli/replicates.hpp"

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/stats.hpp"
#include "report/policy_run.hpp"

namespace ddpsim::cli {

std::string replicates_report(const Config& config, const LengthSource& source, const SimulationRun& first,
                              int replicates, const std::function<void(long, long)>& progress) {
  const std::size_t P = first.runs.size();
  std::vector<std::vector<double>> means(P), p95s(P), gains(P);
  std::vector<bool> per_sample(P, false);
  const auto add = [&](const SimulationRun& sim) {
    const TokenSummary& base = sim.summaries[0];
    for (std::size_t p = 0; p < P; ++p) {
      const TokenSummary& s = sim.summaries[p];
      means[p].push_back(s.mean_max_step_ms);
      p95s[p].push_back(s.p95_max_step_ms);
      per_sample[p] = changes_samples_per_step(s.mean_global_batch, base.mean_global_batch);
      const double scale = per_sample[p] ? base.mean_global_batch / s.mean_global_batch : 1.0;
      gains[p].push_back(100 * (1 - s.mean_max_step_ms * scale / base.mean_max_step_ms));
    }
  };
  add(first);
  for (int r = 1; r < replicates; ++r) {
    Config seeded = config;
    seeded.training.seed = config.training.seed + r;
    const std::vector<int> dataset = config_dataset(seeded, source);
    add(simulate_streamed(seeded, dataset, {0, 0}, {}, {}));  // the summaries alone
    if (progress) progress(r + 1, replicates);
  }
  const auto cell = [](const std::vector<double>& x, const char* format) {
    char text[96];
    std::snprintf(text, sizeof text, format, mean(x), percentile(x, 2.5), percentile(x, 97.5));
    return std::string(text);
  };
  char line[400];
  std::snprintf(line, sizeof line,
                "\nover %d seeds (%lld to %lld), %d steps each: the mean over the seeds [2.5-97.5%% range]\n"
                "%-30s %-28s %-28s %s\n",
                replicates, static_cast<long long>(config.training.seed),
                static_cast<long long>(config.training.seed) + replicates - 1, config.training.steps, "policy",
                "max step time, mean (ms)", "max step time, P95 (ms)", ("gain over " + first.runs[0].label).c_str());
  std::string out = line;
  for (std::size_t p = 0; p < P; ++p) {
    const std::string gain =
        p == 0 ? "-" : cell(gains[p], "%+.2f%% [%+.2f, %+.2f]") + (per_sample[p] ? " per sample" : "");
    std::snprintf(line, sizeof line, "%-30s %-28s %-28s %s\n", first.runs[p].label.c_str(),
                  cell(means[p], "%.2f [%.2f, %.2f]").c_str(), cell(p95s[p], "%.2f [%.2f, %.2f]").c_str(),
                  gain.c_str());
    out += line;
  }
  return out;
}

}  // namespace ddpsim::cli
