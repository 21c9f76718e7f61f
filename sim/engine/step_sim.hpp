// The SimGrid DDP step engine. Each rank runs its step as DDP does: the scheduling decision,
// forward, backward in gradient buckets (reverse layer order), each bucket's allreduce
// started once its gradients exist on that rank and the previous bucket is reduced (one
// communication stream, as in NCCL), overlapping the rest of backward; then the optimizer
// once the last bucket is reduced. Compute durations come in precomputed (model, noise,
// speed factors); the engine decides when things happen, how long communication takes, and
// how much slower backward runs while a collective is in flight beside it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine/platform.hpp"
#include "model/buckets.hpp"

namespace ddpsim {

// One micro-batch's compute on one rank, in ms.
struct Phases {
  double fwd_ms = 0, bwd_ms = 0;
};

// What one rank computes in one step, in ms. With gradient accumulation, fwd_ms and bwd_ms
// are the last micro-batch's, whose backward overlaps the gradients' collectives; `earlier`
// holds the micro-batches before it, in training order (under DDP they run with no
// communication beside them: its no_sync; under FSDP each gathers its units again).
struct RankWork {
  double sched_ms = 0, fwd_ms = 0, bwd_ms = 0, opt_ms = 0;
  std::vector<Phases> earlier{};
  double accum_fwd_ms() const {
    double sum = 0;
    for (const Phases& p : earlier) sum += p.fwd_ms;
    return sum;
  }
  double accum_bwd_ms() const {
    double sum = 0;
    for (const Phases& p : earlier) sum += p.bwd_ms;
    return sum;
  }
  double accum_ms() const { return accum_fwd_ms() + accum_bwd_ms(); }
  std::size_t micro_batches() const { return earlier.size() + 1; }
  Phases micro(std::size_t m) const { return m < earlier.size() ? earlier[m] : Phases{fwd_ms, bwd_ms}; }
};

// What the simulation says it took, in ms, forward and backward over all micro-batches. step_ms runs from the end of
// the rank's previous step (waiting included) to the end of its optimizer step.
struct RankTiming {
  double fwd_ms = 0, bwd_ms = 0, comm_wait_ms = 0, opt_ms = 0, step_ms = 0;
};

// One box of the timeline: a compute phase or a bucket's allreduce on one rank.
struct Span {
  int step = 0, rank = 0;
  bool comm = false;  // track: compute or communication
  std::string name;
  double start_ms = 0, dur_ms = 0;  // start from the policy's first step
};

// HSDP's allreduce of unit u's shard across the groups: its span's name. It runs on a stream of
// its own, beside the group's, so a timeline gives it a track of its own.
inline constexpr std::string_view across_groups_prefix = "allreduce across groups unit ";
inline std::string across_groups_name(std::size_t unit) {
  return std::string(across_groups_prefix) + std::to_string(unit);
}
inline bool across_groups(const Span& span) {
  return span.comm && span.name.starts_with(across_groups_prefix);
}

struct PolicyWork {
  int steps = 0;
  // Ranks all-gather costs before deciding (every policy but static), which synchronises
  // the step start.
  bool synchronized = false;
  std::vector<RankWork> work;  // step-major, then rank
};

struct PolicyTimes {
  std::vector<RankTiming> timing;  // step-major, then rank
  std::vector<Span> spans;         // only steps in the timeline range
};

// A unit FSDP shards and gathers whole (a transformer block, or the root: the parameters of no
// block): its parameters' bytes and its share of forward and backward compute.
struct ShardUnit {
  double bytes = 0;
  double share = 0;
  bool root = false;  // gathered once a step and kept through backward, as FSDP keeps its root
};

struct EngineSetup {
  int G = 4;
  // "ddp": bucketed allreduce (below); "zero1": the same allreduce, a G-th of the optimizer's update, the
  // parameters all-gathered after it; "zero2": as zero1 with the buckets reduce-scattered; "fsdp": full sharding over
  // `units`: each unit all-gathered before its forward and its backward, reduce-scattered after its backward; "hybrid":
  // the same inside groups of `shard_group` consecutive ranks, each unit's gradient shard then allreduced across the
  // groups.
  std::string sharding = "ddp";
  bool shards_optimizer() const { return sharding == "zero1" || sharding == "zero2"; }
  double optimizer_update_share = 1;  // zero1, zero2: the share of the optimizer that ZeRO divides over the ranks
  std::vector<double> shard_shares;   // zero1: each rank's share of the parameters it updates (empty: a G-th)
  // Rank g's optimizer under ZeRO: its shard's part of the update, the rest whole.
  double shard_opt_ms(double opt_ms, std::size_t g) const {
    const double share = shard_shares.empty() ? 1.0 / G : shard_shares.at(g);
    return opt_ms * (1 - optimizer_update_share + optimizer_update_share * share);
  }
  std::vector<ShardUnit> units;
  int shard_group = 0;                // 0: all G
  bool reshard_after_forward = true;  // false: a unit stays gathered from its forward to its backward
  // fsdp, hybrid with micro-batches: only the last one reduce-scatters (FSDP's no_sync, the
  // gradients kept unsharded until then); false: every one does.
  bool no_sync = false;
  // fsdp, hybrid: when backward issues a unit's re-gather, FSDP's BackwardPrefetch:
  // "backward_pre" (as the unit after it begins), "backward_post" (as that one ends, before its
  // reduce-scatter) or "none" (after that reduce-scatter).
  std::string backward_prefetch = "backward_pre";
  int forward_prefetch = 1;         // fsdp, hybrid: units gathered ahead of the one computing in forward
  int backward_prefetch_depth = 1;  // fsdp, hybrid, backward_pre: the same in backward
  // fsdp, hybrid: log-normal σ of each unit's share of a rank's compute (unit_shares); 0: the
  // units' own shares, the same on every rank.
  double unit_jitter = 0;
  std::uint64_t jitter_seed = 0;
  PlatformConfig platform;
  std::string algorithm = "ring";
  std::vector<Bucket> buckets;
  bool overlap = true;
  // Backward (under fsdp and hybrid, a unit's forward too) runs this many times slower while a
  // collective is in flight on its rank (PerfModel::comm_slowdown); only compute that overlaps
  // communication is stretched.
  double comm_slowdown = 1;
  // A collective runs this many times slower while any rank is in backward (under fsdp and
  // hybrid: while any rank of its group computes; PerfModel::allreduce_slowdown): a collective
  // moves at the pace of its slowest member.
  double allreduce_slowdown = 1;
  // zero1, zero2: the parameters' all-gather takes this many times the ring's (PerfModel::allgather_factor).
  double allgather_factor = 1;
  // DDP and ZeRO-1/2: each rank's wait after the step's last collective before its optimizer
  // (PerfModel::sync_ms); fsdp and hybrid take none.
  double sync_ms = 0;
  std::string mode = "fast";               // fast | full
  int timeline_from = 0, timeline_to = 0;  // steps [from, to) get spans
};

struct EngineResult {
  std::vector<PolicyTimes> policies;
  std::map<double, double> allreduce_ms;  // fast mode: bytes → isolated allreduce time
};

// Fast mode a block of steps at a time, so that a long run need not hold all its steps: the
// ranks' clocks carry over from one block to the next, and spans are numbered by step within
// the policy's run. Blocks concatenate to what simulate_steps() gives in one go.
class FastEngine {
 public:
  explicit FastEngine(const EngineSetup& setup);  // times each bucket's allreduce once
  // The next policy starts from time 0 with the ranks idle.
  void start_policy();
  // Appends the block's timings (and spans in the timeline range) to `out`; `progress` gets
  // the steps done since its last call, now and then.
  void advance(const PolicyWork& block, PolicyTimes& out, const std::function<void(int)>& progress = {});
  const std::map<double, double>& allreduce_ms() const { return allreduce_ms_; }
  // FSDP: the time of one ring all-gather (and of one reduce-scatter, which moves the same
  // bytes over the same flows) of each unit's bytes, on an idle platform.
  const std::map<double, double>& gather_ms() const { return gather_ms_; }
  // hybrid: the time of one allreduce of each unit's shard across the groups.
  const std::map<double, double>& replica_ms() const { return replica_ms_; }

 private:
  void advance_sharded(const PolicyWork& block, PolicyTimes& out, const std::function<void(int)>& progress);
  double compute_and_reduce(const std::function<const RankWork&(std::size_t)>& work, double sync,
                            std::vector<double>& fwd_end, std::vector<double>& bwd_end, std::vector<double>& stretched,
                            int step, PolicyTimes& out) const;
  double reduce_buckets(const std::function<double(std::size_t)>& bwd_ms, const std::vector<double>& fwd_end,
                        std::vector<double>& bwd_end, double stream_free, int step, PolicyTimes& out) const;

  EngineSetup s_;
  std::map<double, double> allreduce_ms_, gather_ms_, replica_ms_;
  double param_gather_ms_ = 0;  // zero1, zero2: all-gathering the updated parameters
  std::vector<double> prev_end_;
  int step_ = 0;
};

// Full mode's steps a block at a time, so that a long run need not hold them all: `work` gives
// policy p's steps [first, first + count), `done` takes their timings (step-major, then rank)
// once every rank has finished them, block after block. What they throw is thrown by
// simulate_full.
struct StepBlocks {
  std::vector<int> steps;  // of each policy
  int block_steps = 1;
  std::function<PolicyWork(int p, int first, int count)> work;
  std::function<void(int p, int first, std::vector<RankTiming>& timing)> done;
};

// Full mode over blocks: every policy in turn, each from time 0 with the ranks idle; the
// result's policies hold the spans only.
EngineResult simulate_full(const EngineSetup& setup, const StepBlocks& blocks,
                           const std::function<void(long, long)>& progress = {});

// Simulates every policy in turn (each from time 0, with the ranks idle). `progress` gets
// (steps done, steps in all) now and then.
EngineResult simulate_steps(const EngineSetup& setup, const std::vector<PolicyWork>& policies,
                            const std::function<void(long, long)>& progress = {});

// Time of one allreduce of each size on an idle platform, all ranks starting together (of the
// setup's algorithm: "allgather" times FSDP's ring all-gather instead).
std::map<double, double> measure_allreduce_ms(const EngineSetup& setup, const std::vector<double>& sizes);

// Several collectives' times on one platform, each request's sizes one after another: a
// (make_allreduce algorithm, sizes) pair each, its times in the same place of the result.
using CollectiveRequest = std::pair<std::string, std::vector<double>>;
std::vector<std::map<double, double>> measure_collectives_ms(const EngineSetup& setup,
                                                             const std::vector<CollectiveRequest>& requests);

}  // namespace ddpsim
