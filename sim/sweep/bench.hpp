// The sweep throughput benchmark of `ddpsim bench`: a grid of the study's setting run the way
// `ddpsim sweep` runs it (every cell checked, forked workers, cells written, results.csv built).
#pragma once

namespace ddpsim {

struct SweepBenchResult {
  int cells = 0, jobs = 0, policies = 0, steps = 0;
  double wall_s = 0;
  double cells_per_s = 0;
  double target_s = 0;  // for the full 1,000 cells
};

// `scale` multiplies the cell count (1 = 1,000 cells, the target's grid).
SweepBenchResult run_sweep_bench(double scale, int jobs);

}  // namespace ddpsim
