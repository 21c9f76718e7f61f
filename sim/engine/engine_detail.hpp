// What the fast and the full step engines share: a simulation's SimGrid world, and how rows
// and timeline spans are addressed. Internal to the engine.
#pragma once

#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <simgrid/s4u.hpp>

#include "engine/collective.hpp"
#include "engine/platform.hpp"
#include "engine/simgrid_engine.hpp"
#include "engine/step_sim.hpp"

namespace ddpsim::engine_detail {

namespace sg4 = simgrid::s4u;

// One simulation's world: a configured engine, then the platform, then the collectives bound
// to its hosts (SimGrid needs them in this order): the setup's algorithm's, or one of each of
// `algorithms` on the same platform (a user's XML platform loads once per process).
struct Stage {
  std::unique_ptr<sg4::Engine> engine = make_engine();
  std::vector<sg4::Host*> hosts;
  std::vector<std::unique_ptr<CollectiveRunner>> runners;
  const CollectiveRunner* runner = nullptr;  // the first

  explicit Stage(const EngineSetup& s, const std::vector<std::string>& algorithms = {}) {
    const std::vector<int> nodes = node_of_ranks(s.platform, s.G);
    std::vector<CollectivePlan> plans;
    for (const std::string& a : algorithms.empty() ? std::vector<std::string>{s.algorithm} : algorithms)
      plans.push_back(make_allreduce(a, nodes, s.shard_group));
    std::set<std::pair<int, int>> pairs;
    for (const CollectivePlan& plan : plans)
      for (const auto& pair : plan.pairs()) pairs.insert(pair);
    hosts = build_platform(s.platform, s.G, {pairs.begin(), pairs.end()});
    // A user's XML platform may give its links bandwidth profiles over time: every flow runs there.
    for (const CollectivePlan& plan : plans)
      runners.push_back(std::make_unique<CollectiveRunner>(plan, hosts, s.platform.topology != "xml"));
    runner = runners.front().get();
  }
};

// Full mode for `fsdp` and `hybrid` (sharded_full.cpp): simulate_full hands them on.
EngineResult simulate_full_sharded(const EngineSetup& setup, const StepBlocks& blocks,
                                   const std::function<void(long, long)>& progress);

// When `work` ms of compute started at `start` are done, if it runs `slowdown` times slower
// inside the `busy` intervals (sorted, disjoint) and at full speed outside them.
inline double compute_end(double start, double work, const std::vector<std::pair<double, double>>& busy,
                          double slowdown) {
  double now = start;
  const auto first = std::partition_point(busy.begin(), busy.end(), [&](const auto& b) { return b.second <= now; });
  for (auto it = first; it != busy.end(); ++it) {
    const auto [from, to] = *it;
    if (from > now) {  // full speed up to the interval
      if (from - now >= work) return now + work;
      work -= from - now;
      now = from;
    }
    if ((to - now) / slowdown >= work) return now + work * slowdown;
    work -= (to - now) / slowdown;
    now = to;
  }
  return now + work;
}

// When a collective of `work` ms started at `start` ends, if it runs `slowdown` times slower
// while compute runs on some rank (DDP: backward), which it does until `compute_until`.
inline double collective_end(double start, double work, double compute_until, double slowdown) {
  if (compute_until <= start) return start + work;
  if (compute_until >= start + work * slowdown) return start + work * slowdown;
  return compute_until + work - (compute_until - start) / slowdown;
}

inline std::size_t at(int step, int G, int g) {
  return static_cast<std::size_t>(step) * G + g;
}

inline bool in_timeline(const EngineSetup& s, int step) {
  return step >= s.timeline_from && step < s.timeline_to;
}

inline std::string bucket_name(std::size_t k) {
  return "allreduce bucket " + std::to_string(k);
}

inline std::string reduce_scatter_name(std::size_t k) {
  return "reduce-scatter bucket " + std::to_string(k);
}

}  // namespace ddpsim::engine_detail
