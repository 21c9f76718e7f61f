// The sweep throughput benchmarks of `ddpsim bench`: grids run the way `ddpsim sweep` runs them
// (every cell checked, forked workers, cells written, results.csv built). `study`: 1,000 cells
// of the study's setting; `small`: 10,000 cells of 5 steps and 2 policies, where what a cell
// costs beside its simulation (checking, forking, writing) is most of it.
#pragma once

#include <string>

namespace ddpsim {

struct SweepBenchResult {
  std::string grid;  // study | small
  int cells = 0, jobs = 0, policies = 0, steps = 0;
  double wall_s = 0, cpu_s = 0;  // CPU: this process and its workers, user and system
  double cells_per_s = 0;
  double target_s = 0;       // for the full grid
  double target_cpu_ms = 0;  // CPU a cell, 0 where there is none
  double cpu_ms_per_cell() const { return cells > 0 ? 1e3 * cpu_s / cells : 0; }
};

// `scale` multiplies the grid's cell count (1 = the target's grid).
SweepBenchResult run_sweep_bench(const std::string& grid, double scale, int jobs);

}  // namespace ddpsim
