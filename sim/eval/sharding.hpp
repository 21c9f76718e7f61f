// Sharded data parallelism (training.data_parallel "fsdp" or "hybrid"): the units FSDP wraps,
// read from the model's parameter layout, the memory a rank holds once the state is sharded,
// and what a sharded config cannot take yet (docs/sharding.md).
#pragma once

#include <string>
#include <vector>

#include "engine/step_sim.hpp"
#include "eval/config.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

// One unit per transformer block ("layers.N.", "layer.N.", "h.N." in a parameter's name), in
// the order the blocks come, after a root unit of every other parameter (embeddings, final
// norm, heads): FSDP's auto-wrap policy per block. Bytes at the gradient dtype's size (the
// parameters FSDP gathers are in it); shares of compute by backward fraction.
// wrap "root": one unit of every parameter; "size": PyTorch's size_based_auto_wrap_policy with
// `min_num_params` over the module tree of the layout's dotted names, the root after the rest.
std::vector<ShardUnit> shard_units(const PerfModel& model, const std::string& wrap = "layer",
                                   double min_num_params = 1e8);

// zero1: each rank's share of the parameters whose optimizer state it holds (they sum to
// 1): a G-th each under zero_partition "even"; under "parameters", the layout's entries (one a
// parameter in a write_layout layout) taken largest first, each to the rank holding fewest so far,
// the lowest such rank on a tie, as PyTorch's ZeroRedundancyOptimizer partitions them.
std::vector<double> zero_shares(const PerfModel& model, int G, const std::string& partition);

// Sets training.shard_group: G under fsdp, a node's GPUs by default under hybrid; refuses a
// group that does not divide the world size, naming the key.
void resolve_shard_group(Config& config, const std::string& origin);

// What sharding changes in a rank's peak memory, in MiB: weights, gradients and AdamW state
// (16 B a parameter, fp32 or mixed precision alike) held 1/shard_group each (under ZeRO, the
// optimizer state of the largest shard zero_shares gives), plus the units
// gathered at once: the root (kept from its forward through its backward) and the 1 + the
// deeper prefetch's (forward's or backward's) largest others (the one computing and those
// prefetched), or every unit where
// reshard_after_forward is off (each stays gathered from its forward to its backward).
double sharded_memory_offset_mib(const Config& config);

// Whether a step may run several micro-batches: training.micro_batches, or a policy that forms
// its own (verl).
bool accumulates(const Config& config);

// Under hybrid, what the model's interference factors leave out, in a note: HSDP's allreduce
// across groups; with groups of one rank, everything (nothing is gathered in a group).
void interference_notes(Config& config);

// Under fsdp and hybrid, a note for each key given that the config leaves nothing to act on:
// prefetching or resharding with one unit, backward's prefetch where nothing or one unit is
// re-gathered, no_sync without micro-batches. Only a value other than the default is a request
// (a sweep may set defaults).
void unused_sharding_notes(Config& config);

// Refuses what a sharded config cannot take yet, naming the key.
void check_sharded(const Config& config, const std::string& origin);

// Under zero2, fsdp and hybrid (not zero1, which accumulates as DDP does) every rank of a step must run as many
// micro-batches (each gathers every unit or reduce-scatters its buckets, collectives of all the ranks): refuses a run
// where a policy's step does not, naming the policy, the step and the ranks.
void check_equal_micro_batches(const Config& config, const PolicyRun& run);

}  // namespace ddpsim
