// Token-level evaluation of a policy: run it for N steps over a dataset's lengths and record
// what each rank got. No timing model: padded tokens are the study's proxy for step time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sched/scheduler.hpp"

namespace ddpsim {

// One rank in one step; the token-level columns of the trace schema (design.md §3.1).
struct RankStep {
  int step = 0;
  int rank = 0;
  int batch_size = 0;
  int max_len = 0;
  std::int64_t real_tokens = 0;
  std::int64_t padded_tokens = 0;  // batch_size · max_len
  int global_batch = 0;            // B_t, the same for every rank of the step
  double loss_weight = 0.0;        // G·b_g/B_t
};

struct PolicyRun {
  std::string label;   // PolicySpec::label()
  std::string solver;  // Scheduler::solver()
  int G = 0;
  std::vector<RankStep> rows;       // step-major, then rank
  std::vector<double> decision_us;  // per step: the policy's plan() on filled buffers
};

// Runs `steps` steps of the policy on a fresh sampler seeded with shape.seed, so every
// policy sees the same sample stream.
PolicyRun run_policy(const PolicySpec& spec, const StepShape& shape, int steps, std::span<const int> dataset);

// The token-level figures `ddpsim balance` prints and summary.json carries.
struct TokenSummary {
  int steps = 0;
  double mean_max_padded_tokens = 0;  // mean over steps of max_g padded tokens
  double p95_max_padded_tokens = 0;
  double mean_std_padded_tokens = 0;  // mean over steps of the population std across ranks
  double padding_waste = 0;           // (padded − real) / padded over the whole run
  std::int64_t samples = 0;           // samples consumed
  double mean_global_batch = 0;
  double mean_sched_us = 0;
  double p95_sched_us = 0;
};

TokenSummary summarize(const PolicyRun& run);

}  // namespace ddpsim
