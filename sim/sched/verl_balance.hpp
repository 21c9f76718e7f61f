// VeRL's dynamic batching as a pure function of one step's sample lengths: the split over
// data-parallel ranks of its PPO trainer's _balance_batch, then rearrange_micro_batches on each
// rank (verl/utils/seqlen_balancing.py). Kept apart from the policy so that tests can check its
// decisions on hand-worked lengths.
#pragma once

#include <span>
#include <vector>

#include "sched/karmarkar_karp.hpp"

namespace ddpsim {

struct VerlOptions {
  int max_token_len = 16384;  // VeRL's ppo_max_token_len_per_gpu default
  // calculate_workload: linear·s + quadratic·s², VeRL's constants for a 7B model by default.
  long long linear = 24576, quadratic = 1;
  bool balance = true;        // _balance_batch across ranks (off: each rank keeps its slice)
  bool micro_balance = true;  // use_dynamic_bsz_balance: micro-batches ordered light, heavy, light
};

// Per rank, its micro-batches in training order, each a list of positions in `lengths`.
using VerlPlan = std::vector<std::vector<std::vector<int>>>;

// rearrange_micro_batches on one rank: `count` micro-batches of free size whose workloads
// Karmarkar–Karp balances, each listing positions in `workload` in ascending order; with
// `light_heavy_light`, ordered by workload so that the lighter ones run first and last.
std::vector<std::vector<int>> balanced_micro_batches(std::span<const double> workload, int count,
                                                     bool light_heavy_light, KarmarkarKarp& kk);

// `lengths` is the global batch, rank g's own draw at [g·n/G, (g+1)·n/G) (n a multiple of G).
// Every length must be ≤ max_token_len (InputError otherwise, where VeRL asserts).
VerlPlan verl_balance(std::span<const int> lengths, int G, const VerlOptions& options, KarmarkarKarp& kk);

}  // namespace ddpsim
