// Token-level run of a policy: run it for N steps over a dataset's lengths and record
// what each rank got. Timing columns stay NaN (written empty) until the simulator fills them.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sched/scheduler.hpp"

namespace ddpsim {

inline constexpr double NOT_MEASURED = std::numeric_limits<double>::quiet_NaN();

// One micro-batch of a step that accumulates gradients over several.
struct MicroBatchShape {
  int batch_size = 0;
  int max_len = 0;
  std::int64_t real_tokens = 0;
  std::int64_t sq_tokens = 0;  // Σ s², the attention pairs of packed sequences
  bool operator==(const MicroBatchShape&) const = default;
};

// Whether Σ s² = `pairs` is possible for `samples` samples of 1 to `longest` tokens, `tokens` in
// all: at least tokens²/samples (all equal) and tokens (every s ≥ 1), at most longest·tokens
// (every s ≤ longest). The trace reader and the Python tracer check packed rows by it alike.
inline bool possible_sq_tokens(long long pairs, long long tokens, long long samples, long long longest) {
  const long double p = pairs, t = tokens, b = samples, L = longest;
  return samples == 0 ? pairs == 0 && tokens == 0 : t >= b && p >= t && t * t <= b * p && p <= L * t;
}

// One rank in one step: the columns of the trace schema (docs/method.md, "The trace").
struct RankStep {
  int step = 0;
  int rank = 0;
  int batch_size = 0;
  int max_len = 0;
  std::int64_t real_tokens = 0;
  // The tokens computed on: Σ over micro-batches of batch_size · max_len, or with packed
  // sequences real_tokens.
  std::int64_t padded_tokens = 0;
  std::int64_t sq_tokens = 0;  // Σ s² (packed attention's pairs)
  int global_batch = 0;        // B_t, the same for every rank of the step
  double loss_weight = 0.0;    // G·b_g/B_t
  double fwd_ms = NOT_MEASURED, bwd_ms = NOT_MEASURED, comm_wait_ms = NOT_MEASURED, opt_ms = NOT_MEASURED;
  double step_ms = NOT_MEASURED;  // wall time from the rank's previous step end, waiting included
  double peak_mem_mib = NOT_MEASURED;
  double loss = NOT_MEASURED;  // the rank's mean loss (measured runs only)
  // A communication profile row (ddptrain --profile over several ranks): one allreduce of
  // this many bytes and its time; written as two extra columns only when a trace has them.
  double allreduce_bytes = NOT_MEASURED, allreduce_ms = NOT_MEASURED;
  // An interference profile row: bwd_ms measured while allreduces of this many bytes ran
  // back to back for the whole backward (0: backward alone); an extra column, like the above.
  double concurrent_allreduce_bytes = NOT_MEASURED;
  // The step's micro-batches in training order when it accumulates gradients over several
  // (written as four extra columns); empty: one micro-batch of batch_size × max_len.
  std::vector<MicroBatchShape> micro;
};

// Optimizer medians of runs trained in turn further apart than this: the machine ran each model
// of the process at a level of its own (the optimizer is the same work in each; on a 2-core
// Intel VM 10–42%, one session 9.8%, on an AMD VM under 3%). ddptrain, calibrate --training and
// validate judge by it, with levels_apart.
inline constexpr double kOwnLevelApart = 0.10;

// How far apart such medians lie: the largest over the smallest, less 1; < 0 with fewer than
// two, or a smallest ≤ 0 (nothing timed).
double levels_apart(std::span<const double> medians);

// The line a trainer prints after policies' runs in one process: each policy's optimizer median
// (ms) and how far apart they lie, then, past kOwnLevelApart, a warning that the gains between
// the runs carry the machine's levels, worded for runs trained in turn or one after another.
// "" with fewer than two medians. ddptrain and scripts/zero1_pytorch.py print the same text.
std::string optimizer_levels_text(const std::vector<std::pair<std::string, double>>& medians, bool interleaved);

struct PolicyRun {
  std::string label;   // PolicySpec::label()
  std::string solver;  // Scheduler::solver()
  int G = 0;
  std::vector<RankStep> rows;       // step-major, then rank
  std::vector<double> decision_us;  // per step: the policy's plan() on filled buffers
  bool packed = false;              // sequences packed without padding (StepShape::packed)
};

// Rank g's row of a planned step: its batch's shape and micro-batches, B_t and the loss weight;
// the timing columns stay NaN. The simulator and the trainer record steps through it alike.
RankStep plan_row(const StepPlan& plan, int step, int g, bool packed);

// pad_to_multiple_of N: a batch padded past its longest sample up to a multiple of N (never
// past max_length), because each new (b, L) costs a GPU a first use and rounding L cuts their
// number. The length a batch whose longest sample has `longest` tokens is padded to (0 stays
// 0: a rank given no samples computes nothing).
int padded_length(int longest, int multiple, int max_length);
// A row's lengths and padded tokens after that padding (the policies decide on the lengths
// before it, in the simulator and the trainer alike).
void pad_row(RankStep& row, int multiple, int max_length);

// A policy run a block of steps at a time: the scheduler, sampler and buffers carry over, so
// blocks concatenate to the run that run_policy() makes in one go.
class PolicyStream {
 public:
  PolicyStream(const PolicySpec& spec, const StepShape& shape, std::span<const int> dataset);
  // The next `steps` steps, numbered on from the last block's.
  PolicyRun next(int steps);

 private:
  std::string label_;
  StepShape shape_;
  std::unique_ptr<Scheduler> policy_;
  std::unique_ptr<DistributedSampler> sampler_;  // buffers_ draws from it
  std::unique_ptr<RankBuffers> buffers_;
  StepPlan plan_;
  int step_ = 0;
};

// Runs `steps` steps of the policy on a fresh sampler seeded with shape.seed, so every
// policy sees the same sample stream.
PolicyRun run_policy(const PolicySpec& spec, const StepShape& shape, int steps, std::span<const int> dataset);

// The figures the tables print and summary.json carries (docs/method.md, "Metrics"); the timed ones are
// NaN for a token-level run.
struct TokenSummary {
  int steps = 0;
  double mean_max_padded_tokens = 0;  // mean over steps of max_g padded tokens
  double p95_max_padded_tokens = 0;
  double mean_std_padded_tokens = 0;  // mean over steps of the population std across ranks
  double padding_waste = 0;           // (padded − real) / padded over the whole run
  std::int64_t samples = 0;           // samples consumed
  double mean_global_batch = 0;
  // Micro-batches per rank and step, mean over both; whether any step accumulates gradients.
  double mean_micro_batches = 1;
  bool micro_batched = false;
  double mean_sched_us = 0;
  double p95_sched_us = 0;
  double mean_max_step_ms = NOT_MEASURED, p95_max_step_ms = NOT_MEASURED;
  double mean_samples_per_s = NOT_MEASURED, p95_samples_per_s = NOT_MEASURED;
  double mean_tokens_per_s = NOT_MEASURED, p95_tokens_per_s = NOT_MEASURED;  // padded tokens
  double mean_real_tokens_per_s = NOT_MEASURED;  // the samples' own tokens: padding earns nothing
  // Distinct (b, L) shapes a rank computed on, mean over ranks: each is a first use on a GPU.
  double mean_distinct_shapes = 0;
  double mean_std_step_ms = NOT_MEASURED, mean_std_compute_ms = NOT_MEASURED;
  double mean_max_compute_ms = NOT_MEASURED;  // the straggler's forward + backward
  double mean_comm_wait_ms = NOT_MEASURED;    // exposed communication, mean over ranks and steps
  double mean_max_peak_mem_mib = NOT_MEASURED, mean_std_peak_mem_mib = NOT_MEASURED;
  // Steps where some rank's peak memory passes the device's capacity (when one is known): a real
  // run would have run out of memory there.
  int steps_over_capacity = 0;
  double max_peak_mem_mib = NOT_MEASURED;  // the largest over every rank and step

  bool timed() const { return !std::isnan(mean_max_step_ms); }
};

// A policy that takes another mean number of samples per step than the baseline (token_budget):
// its step times measure other work, so its gains are taken per sample. One test for the table,
// the replicates and the sweeps.
inline bool changes_samples_per_step(double batch, double baseline_batch) {
  return batch > 0 && baseline_batch > 0 && std::abs(batch - baseline_batch) > 1e-6 * baseline_batch;
}

// capacity_mib: the device memory steps_over_capacity counts against; 0 = unknown.
TokenSummary summarize(const PolicyRun& run, double capacity_mib = 0);

// summarize(), step by step: a streamed run hands each step's rows over and drops them, keeping
// the five numbers per step that its percentiles need instead of every rank's row.
class SummaryBuilder {
 public:
  explicit SummaryBuilder(int G, double capacity_mib = 0);
  // One step's G rows, in rank order; timed or not as the first step was.
  void add_step(std::span<const RankStep> rows);
  void add_decision(double us) { decision_us_.push_back(us); }
  // Every step of a run or of a block of one, and its decision times.
  void add_steps(const PolicyRun& block);
  TokenSummary finish() const;

 private:
  std::size_t G_, steps_ = 0;
  double capacity_mib_;
  int over_capacity_ = 0;
  bool timed_ = false, micro_batched_ = false;
  std::int64_t padded_ = 0, real_ = 0, samples_ = 0;
  double micro_ = 0, comm_wait_ = 0;
  std::vector<double> per_rank_, compute_, mem_;  // scratch, one per rank
  // Per rank, the (b, L) shapes met, as sorted b << 32 | L keys: a contiguous search per
  // rank-step where a tree's nodes missed the cache at G = 16,384.
  std::vector<std::vector<std::uint64_t>> shapes_;
  void add_shape(std::size_t g, int b, int L);
  // Per step, what a percentile needs; the means need only sums.
  std::vector<double> max_padded_, decision_us_, max_step_, samples_per_s_, tokens_per_s_;
  double sum_std_padded_ = 0, sum_global_batch_ = 0, sum_std_step_ = 0, sum_std_compute_ = 0, sum_max_compute_ = 0,
         sum_max_mem_ = 0, sum_std_mem_ = 0, max_mem_ = 0, sum_real_tokens_per_s_ = 0;
};
// Per step, the slowest rank's step_ms (the step's wall time, docs/method.md, "Metrics").
std::vector<double> max_step_ms(const PolicyRun& run);
// Per step, the samples all ranks took: what a gain per sample divides by.
std::vector<double> samples_per_step(const PolicyRun& run);

}  // namespace ddpsim
