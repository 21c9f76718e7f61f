// A process's first steps after step 0 can still run far slower than the rest (DDP rebuilds its
// buckets after its first step; allocators and thread pools fill): the thirty-fifth registration's
// pre-runs ran their step 1 at 2.6-3.6× their settled compute. calibrate --training draws the runs'
// steps as the model's noise, so such a step, one in forty, would strike any simulated step; the
// fit leaves each process's slow leading steps out, and says which.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "calib/calibrate.hpp"
#include "calib/trace_reader.hpp"

namespace ddpsim {

// Above this, a step is far slower than the settled ones it is compared with, so a leading one
// is warm-up: their P99, not their maximum, so that a late outlier does not keep it; at least
// 1.5× their median, so that a quiet run's slightly slower start stays.
double far_slower(std::span<const double> settled);

// A rank-step's forward and backward on the profile's surface, over its micro-batches.
double surface_ms(const Calibration& c, const RankStep& r);

// A rank-step in the order its process ran it, and whether it met a (micro-)batch shape its
// process had not met (a first use, whose cost the fit measures apart).
struct RanRankStep {
  int run;  // its run's index in the trace
  const RankStep* row;
  bool first;
};

// A trace's rank-steps in the order they ran: step by step, the policies in turn, then ranks.
// The ranks share one process where ddptrain played them in turn (--emulate-ranks).
std::vector<RanRankStep> in_run_order(const Trace& t);

// One process's slow leading steps: the traces of its runs, the first step kept, how many were
// left out, and the slowest of them's compute over the settled median (0: none left out).
struct LeadingSteps {
  std::vector<std::string> paths;
  int first_kept = 1, left_out = 0;
  double slowest = 0;
};

// A warm-up to find from the steps themselves (validate --warmup, calibrate --training-warmup).
constexpr int AUTO_WARMUP = -1;

// Fewer steps after step 0 than this: too few to tell a slow start from the run's spread.
inline constexpr int kMinWarmupSteps = 12;

// Per process (the traces session_key groups), the leading steps after step 0 whose slowest
// rank-step's compute over the surface is far_slower() than the process's second half's, a first
// use's median extra taken out; at most a quarter of its steps. A `warmup` of N ≥ 0 leaves out
// the first N steps after step 0 of every process instead.
std::vector<LeadingSteps> leading_steps(const std::vector<Trace>& training, const Calibration& c,
                                        int warmup = AUTO_WARMUP);

// The first step of `path`'s trace that the fit keeps (1 where no warm-up was found).
int first_kept_step(const std::vector<LeadingSteps>& warmups, const std::string& path);

}  // namespace ddpsim
