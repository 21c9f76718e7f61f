// What the fast and the full step engines share: a simulation's SimGrid world, and how rows
// and timeline spans are addressed. Internal to the engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "engine/collective.hpp"
#include "engine/platform.hpp"
#include "engine/simgrid_engine.hpp"
#include "engine/step_sim.hpp"

namespace ddpsim::engine_detail {

namespace sg4 = simgrid::s4u;

// One simulation's world: a configured engine, then the platform, then the collective bound
// to its hosts (SimGrid needs them in this order).
struct Stage {
  std::unique_ptr<sg4::Engine> engine = make_engine();
  std::vector<sg4::Host*> hosts;
  std::unique_ptr<CollectiveRunner> runner;

  explicit Stage(const EngineSetup& s) {
    const CollectivePlan plan = make_allreduce(s.algorithm, node_of_ranks(s.platform, s.G), s.shard_group);
    hosts = build_platform(s.platform, s.G, plan.pairs());
    // A user's XML platform may give its links bandwidth profiles over time: every flow runs there.
    runner = std::make_unique<CollectiveRunner>(plan, hosts, s.platform.topology != "xml");
  }
};

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
