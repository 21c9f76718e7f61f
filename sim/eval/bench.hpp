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

// `scale` multiplies the number of timed decisions (1 = the full benchmark); `progress`
// is called before each case with a one-line description.
std::vector<SchedBenchResult> run_sched_bench(double scale, const std::function<void(const std::string&)>& progress);

}  // namespace ddpsim
