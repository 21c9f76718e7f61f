// Run levels that earlier calibrations of the same machine measured (calibrate
// --pool-run-levels). A session's few pre-runs estimate how far two runs' levels differ with
// two or three degrees of freedom: on the 2-core VM, sessions' own 95% figures ran from 2% to
// 31% while repeated runs of one setting sat within ±9.5% (95%). Pooling the sessions' deviations,
// each about its own session's mean, estimates the one machine's spread from all of them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace ddpsim {

// One earlier model's run levels: its file, its machine (the model's "gpu"), whether its levels
// were read about levels by shape (noise.steps_levels or steps_levels_by_samples), each run's
// level and session (as
// session_key gave it from the metadata calibrate recorded), and its training traces (file,
// FNV-1a hash).
struct PooledRunLevels {
  std::string model, gpu;
  bool by_tokens = false;
  std::vector<double> levels;
  std::vector<std::string> sessions;
  std::vector<std::pair<std::string, std::string>> traces;
};

// The process a training run trained in, so that runs trained in turn in it are compared about
// their own mean: a trace holding several policies is one process; else every metadata line but
// the policy and what the run measured (ddptrain and zero1_pytorch.py write each policy's trace
// of a process with the same lines).
std::string session_key(const std::string& path, const std::map<std::string, std::string>& metadata,
                        bool several_policies);

// Reads each model's run_level.levels. Throws InputError naming the file when it is no model
// with two levels or more, or when it was fitted from a trace of `own` (this calibration's
// training traces: path, hash) or of another pooled model: a run counted twice narrows the
// spread it should widen. Throws UsageError for a file given twice.
std::vector<PooledRunLevels> read_pooled_run_levels(const std::vector<std::string>& paths,
                                                    const std::vector<std::pair<std::string, std::string>>& own);

// The sum of the logs' squared deviations, each about its session's mean within its model, and
// the degrees of freedom they carry (levels − sessions; a model none of whose sessions holds two
// runs is one session, as calibrate took it).
struct LevelSquares {
  double squares = 0, df = 0;
};
LevelSquares pooled_squares(const std::vector<PooledRunLevels>& pooled);

// Each log about its session's mean, over N − S degrees of freedom (N logs in S sessions), as
// calibrate and pooled_squares read a model's runs: where no session holds two logs, all of them
// are one session (`pooled`). `logs[i]` is a run's, `sessions[i]` its session.
struct SessionSquares : LevelSquares {
  int sessions = 0;
  bool pooled = false;
};
SessionSquares within_session_squares(const std::vector<double>& logs, const std::vector<std::string>& sessions);

// Each session's mean log level (a process's) about the mean of the sessions, over sessions − 1
// degrees of freedom (none from one session): `logs[i]` is a run's, `sessions[i]` its session.
LevelSquares session_mean_squares(const std::vector<double>& logs, const std::vector<std::string>& sessions);

// session_mean_squares of each earlier model's runs, about its own model's mean, summed.
LevelSquares pooled_process_squares(const std::vector<PooledRunLevels>& pooled);

}  // namespace ddpsim
