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
  double target_us = 0;  // the mean it should stay within (0: no target)
  bool met() const { return target_us <= 0 || mean_us <= target_us; }
};

// One simulator speed case: a whole `ddpsim compare` run timed end to end (planning, compute
// charging, SimGrid), at the scales the targets name, each in a child process of its own so
// that its CPU time and peak memory are its own.
struct SimBenchResult {
  std::string name, mode, topology, algorithm;
  int G = 0, steps = 0, policies = 0;
  double wall_s = 0;
  double cpu_s = 0;             // user + system CPU time: the figure to compare on a shared machine
  double peak_rss_mib = 0;      // the case's peak resident memory (getrusage's ru_maxrss)
  double rank_steps_per_s = 0;  // simulated rank-steps (policies × steps × G) per wall second
  double target_s = 0;          // the wall time it should stay under (0: no target)
  bool met() const { return target_s <= 0 || wall_s < target_s; }
};

// `scale` < 1 (--quick) shortens every case and leaves out the frontier ones (G = 16,384 fast,
// G = 1,024 full), which take minutes.
std::vector<SimBenchResult> run_sim_bench(double scale, const std::function<void(const std::string&)>& progress);

// `scale` multiplies the number of timed decisions (1 = the full benchmark); `progress`
// is called before each case with a one-line description.
std::vector<SchedBenchResult> run_sched_bench(double scale, const std::function<void(const std::string&)>& progress);

}  // namespace ddpsim
