// Scheduler decision latency on fixed seeded inputs (SST-2 lengths): what `ddpsim bench`
// reports against the targets. A decision is one plan() call on already-filled buffers.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace ddpsim {

struct SchedBenchResult {
  std::string policy;
  std::string solver;
  int G = 0, B = 0, K = 0;
  int decisions = 0;
  double mean_us = 0, p95_us = 0;
};

// One simulator speed case: a whole `ddpsim compare` run timed end to end (planning, compute
// charging, SimGrid), at the scales the targets name.
struct SimBenchResult {
  std::string name, mode, topology, algorithm;
  int G = 0, steps = 0, policies = 0;
  double wall_s = 0;
  double rank_steps_per_s = 0;  // simulated rank-steps (policies × steps × G) per wall second
  double target_s = 0;          // the wall time it should stay under (0: no target)
};

std::vector<SimBenchResult> run_sim_bench(double scale, const std::function<void(const std::string&)>& progress);

// `scale` multiplies the number of timed decisions (1 = the full benchmark); `progress`
// is called before each case with a one-line description.
std::vector<SchedBenchResult> run_sched_bench(double scale, const std::function<void(const std::string&)>& progress);

}  // namespace ddpsim
