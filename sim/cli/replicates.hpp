// `ddpsim run/compare --replicates R`: the config again under R seeds (sample streams and noise
// draws), so that a predicted figure or gain comes with the spread that R real runs of the same
// length would show, instead of one seed's draw.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "data/lengths.hpp"
#include "eval/config.hpp"
#include "eval/pipeline_eval.hpp"
#include "eval/simulate.hpp"
#include "eval/step_interval.hpp"
#include "eval/uncertainty.hpp"

namespace ddpsim::cli {

// The config's run at its seed with the compute noise off (eval/simulate.hpp,
// without_compute_noise), and the report of each policy's gain over the first beside the same
// gain with the noise off: how much of a predicted gain the noise model makes. No run where the
// config draws no noise or simulates one policy (no report either), or where it cannot simulate
// again in this process (the report says why).
struct NoiseOff {
  std::optional<SimulationRun> run;
  std::string report;
};
NoiseOff noise_off(const Config& config, std::span<const int> dataset, const SimulationRun& noisy);
// That report for two runs of the same columns, with the noise and without.
std::string noise_off_report(const SimulationRun& noisy, const SimulationRun& quiet);

// `first` is the run already simulated at the config's seed, `first_quiet` that seed's run with
// the compute noise off (null: none); seeds seed+1 ... seed+R-1 follow. The table gives each
// policy's mean max step time, P95 and gain over the first policy, as the mean over the seeds
// with the 2.5-97.5% range, and with `first_quiet`, each gain with the noise off over the seeds;
// then each gain's prediction interval (eval/uncertainty.hpp), the model's variants simulated at
// the config's seed. `json` holds per policy its figures over the seeds and that interval.
struct Replicates {
  std::string report;
  nlohmann::ordered_json json;
};
Replicates replicates_report(const Config& config, const LengthSource& source, const SimulationRun& first,
                             const SimulationRun* first_quiet, int replicates,
                             const std::function<void(long, long)>& progress);

// Each policy's figures over the seeds, the first seed's first: its label, mean and P95 step
// times, gain over the first policy, and that gain with the compute noise off (empty: none).
struct SeedFigures {
  std::string figure = "max step time";  // what means and p95s are of: a pipeline's is its "step time"
  std::string column = "policy";         // what a row is: a "config" under compare --against
  std::vector<std::string> labels;
  std::vector<std::vector<double>> means, p95s, gains, quiet_gains;
  std::vector<bool> per_sample;

  SeedFigures() = default;
  // No seed yet for these labels; `quiet`: the noise-off gains are gathered too.
  SeedFigures(std::vector<std::string> labels, bool quiet);
  // One seed's run of every label: its mean, P95 and gain over the first, or with `quiet` the
  // run with the compute noise off, its gains alone.
  void add(const SimulationRun& sim, bool quiet = false);
};

// Runs one replicate's `body`; an input error names its seed, since the run printed before it
// had another and passed.
template <class Body>
void as_replicate(long long seed, int r, int replicates, Body&& body) {
  try {
    body();
  } catch (const InputError& e) {
    throw InputError("replicate " + std::to_string(r + 1) + " of " + std::to_string(replicates) + " (training.seed " +
                     std::to_string(seed) + "): " + e.what());
  }
}
// The report and JSON that replicates_report gives, for figures gathered by any engine; each
// policy's mean step's prediction interval where `steps` holds one per policy.
Replicates replicates_result(const Config& config, const SeedFigures& figures, int replicates,
                             const std::vector<GainPrediction>& predicted,
                             const std::vector<StepPrediction>& steps = {});

// replicates_report for a model-mode pipeline job (`first`: its columns at the config's seed):
// the gains in mean pipeline step time, their intervals from eval/pipeline_uncertainty.hpp.
Replicates pipeline_replicates(const Config& config, const std::vector<PipelineFigures>& first, int replicates,
                               const std::function<void(long, long)>& progress);

}  // namespace ddpsim::cli
