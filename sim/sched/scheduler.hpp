// The one interface every batch-scheduling policy implements (docs/method.md, "Policy names"): given the
// step's per-rank prefetch buffers, decide which samples each rank trains on and the weight
// G·b_g/B that scales its mean loss so the averaged gradient equals the global-batch mean.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "data/sampler.hpp"
#include "sched/cost.hpp"

namespace ddpsim {

// A policy as a user names it: "minmax:cost=tokens_sq:buffer=32" is minmax with two options.
struct PolicySpec {
  std::string name;
  std::map<std::string, std::string> options;
  // Options a config's policy object gave as JSON strings: an integer option refuses them
  // ("64" is not 64 there), as config keys refuse a quoted number.
  std::set<std::string> quoted;

  // The canonical spelling, used as the policy's column and key in every output.
  std::string label() const;
};

// Parses "name[:key=value]..."; throws UsageError on a malformed spec.
PolicySpec parse_policy_spec(std::string_view text);
// Policy names in the order outputs list them.
const std::vector<std::string>& policy_names();
// Throws InputError "unknown policy" (with the closest name, case aside) where `name` is none of
// policy_names(): for callers that take policy names long before they build a scheduler.
void require_known_policy(const std::string& name);
// A policy that cuts a rank's batch into micro-batches itself (verl, by its max_token_len), so
// that a micro-batch count is for the other policies: the one test compare, the Python sampler
// and ddptrain apply before any scheduler exists.
bool forms_own_micro_batches(const std::string& name);
// Why a micro-batch count given where only such policies train is refused: `count` names it
// ("training.micro_batches 2").
std::string own_micro_batches_refusal(const std::string& count);

// What every policy needs to know about the run.
struct StepShape {
  int G = 4;               // ranks
  int B = 48;              // global batch (token_budget: ignored, the budget decides)
  int max_length = 256;    // longest sample after truncation
  std::vector<int> b_max;  // per-rank batch cap b_g^max; empty = no cap
  // Micro-batches per rank and step with gradient accumulation (training.micro_batches): each
  // rank's batch cut into this many in order, for every policy that does not form its own.
  int micro_batches = 1;
  // How those micro-batches are formed from the rank's samples: even (in order), sorted (by
  // length, so each holds similar lengths) or kk (VeRL's: Karmarkar–Karp on its workload
  // 24576·s + s², free sizes, the lighter ones first and last). See micro_batching_names().
  std::string micro_batching = "even";
  // Packed sequences (remove-padding, varlen attention): a micro-batch costs by Σ s and Σ s²
  // (CostModel::packed_cost) instead of b·L and b·L².
  bool packed = false;
  // Each batch padded up to a multiple of this many tokens after the policy decided (report/
  // policy_run.hpp: pad_row); 1 = to its longest sample.
  int pad_to_multiple_of = 1;
  std::uint64_t seed = 0;
  // Predicted compute time per rank, for cost=model; null when no performance model is in force.
  std::shared_ptr<const CostModel> time_cost;

  int cap(int g) const { return b_max.empty() ? INT32_MAX : b_max[static_cast<std::size_t>(g)]; }
};

struct StepPlan {
  std::vector<std::vector<Sample>> batches;  // per rank, in training order
  std::vector<double> loss_weights;          // G·b_g/B_t; they average to 1
  int global_batch = 0;                      // B_t = Σ b_g (varies per step for token_budget)
  // Per rank, the sizes of its micro-batches in training order (batches[g] is their
  // concatenation), when the step accumulates gradients over several; empty: one micro-batch
  // per rank. The gradient allreduce follows the last micro-batch's backward only.
  std::vector<std::vector<int>> micro_sizes;
};

const std::vector<std::string>& micro_batching_names();  // even, sorted, kk

// Cuts b samples into `count` consecutive micro-batches as even as can be (the first ones one
// larger), fewer when b < count, and one (possibly empty) when b = 0.
std::vector<int> even_micro_sizes(int b, int count);

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Samples each rank's buffer must hold when plan() is called (the prefetch depth).
  virtual std::size_t buffer_size() const = 0;
  // Decides one step and takes the chosen samples out of the buffers; the rest stay.
  virtual void plan(RankBuffers& buffers, StepPlan& out) = 0;
  // Which solver decided, for reports ("exact", "enumerate"); empty where there is no choice.
  virtual std::string solver() const { return ""; }
  // True for a policy that cuts each rank's batch into micro-batches itself (training.micro_batches
  // does not apply to it).
  virtual bool forms_micro_batches() const { return false; }
};

// Builds a policy; unknown names, unknown options and impossible shapes (B < G, B not
// divisible by G where a policy needs it, B > Σ min(K, b_max)) throw InputError.
std::unique_ptr<Scheduler> make_scheduler(const PolicySpec& spec, const StepShape& shape);
// The spec with every option the policy reads at its value in force (defaults filled in,
// integers normalised), so that two spellings of one policy (minmax, minmax:buffer=64) compare
// equal. Throws as make_scheduler does.
PolicySpec resolved_policy(const PolicySpec& spec, const StepShape& shape);

}  // namespace ddpsim
