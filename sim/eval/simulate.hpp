// A timed run: every policy of a config planned on the same sample stream (token level),
// each rank-step's compute charged from the performance model (noise and speed factors
// included), then the SimGrid engine deciding when each rank's step ends.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "engine/step_sim.hpp"
#include "eval/config.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

struct SimulationRun {
  std::vector<PolicyRun> runs;  // rows with every timing column filled
  EngineSetup setup;
  EngineResult engine;
};

// `timeline` = [from, to) steps to keep spans for (empty range: none).
SimulationRun simulate(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline = {0, 0},
                       const std::function<void(long, long)>& progress = {});
// The same for runs already planned at token level (a trace's recorded batches: replay).
SimulationRun simulate_runs(const Config& config, std::vector<PolicyRun> runs, std::pair<int, int> timeline = {0, 0},
                            const std::function<void(long, long)>& progress = {});

// Each rank-step's compute (ms) for one policy's token-level rows. The noise is drawn in the
// same order for every policy (common random numbers), so policies differ only by their plan.
PolicyWork charge_compute(const Config& config, const PolicyRun& run);

// The per-rank gradient buckets the config's model and training section give.
std::vector<Bucket> config_buckets(const Config& config);

// Chrome trace JSON (chrome://tracing, Perfetto): one process per rank, a compute and a
// communication track each, for the spans the run kept.
std::string chrome_trace(const SimulationRun& sim);

}  // namespace ddpsim
