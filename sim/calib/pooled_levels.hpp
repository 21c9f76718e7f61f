// Run levels that earlier calibrations of the same machine measured (calibrate
// --pool-run-levels). A session's few pre-runs estimate how far two runs' levels differ with
// two or three degrees of freedom: on the 2-core VM, sessions' own 95% figures ran from 5% to
// 23% while repeated runs of one setting sat 9% apart. Pooling the sessions' deviations, each
// about its own session's mean, estimates the one machine's spread from all of them.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ddpsim {

// One earlier model's run levels: its file, its machine (the model's "gpu"), each run's level,
// and its training traces (file, FNV-1a hash) as its calibration recorded them.
struct PooledRunLevels {
  std::string model, gpu;
  std::vector<double> levels;
  std::vector<std::pair<std::string, std::string>> traces;
};

// Reads each model's run_level.levels. Throws InputError naming the file when it is no model
// with two levels or more, or when it was fitted from a trace of `own` (this calibration's
// training traces: path, hash) or of another pooled model: a run counted twice narrows the
// spread it should widen.
std::vector<PooledRunLevels> read_pooled_run_levels(const std::vector<std::string>& paths,
                                                    const std::vector<std::pair<std::string, std::string>>& own);

// The sum of the logs' squared deviations, each model's about its own mean, and the degrees of
// freedom they carry (levels − models).
struct LevelSquares {
  double squares = 0, df = 0;
};
LevelSquares pooled_squares(const std::vector<PooledRunLevels>& pooled);

}  // namespace ddpsim
