// Simulating one group of flows of each kind ends every phase when simulating them all does.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <simgrid/s4u.hpp>

#include "engine/collective.hpp"
#include "engine/platform.hpp"
#include "engine/simgrid_engine.hpp"

using namespace ddpsim;
namespace sg4 = simgrid::s4u;

namespace {

struct Allreduces {
  std::vector<double> ms;  // one allreduce of each size after the other
  std::size_t plan_flows = 0, simulated_flows = 0;
};

Allreduces run_allreduces(const PlatformConfig& platform, int G, const std::string& algorithm, bool symmetric) {
  auto engine = make_engine();
  const CollectivePlan plan = make_allreduce(algorithm, node_of_ranks(platform, G));
  const auto hosts = build_platform(platform, G, plan.pairs());
  const CollectiveRunner runner(plan, hosts, symmetric);
  Allreduces out{{}, runner.plan_flows(), runner.simulated_flows()};
  sg4::Actor::create("collectives", hosts.front(), [&] {
    for (const double bytes : {1e3, 4e6, 25e6, 100e6}) {
      const double start = sg4::Engine::get_clock();
      runner.run(bytes);
      out.ms.push_back((sg4::Engine::get_clock() - start) * 1e3);
    }
  });
  engine->run();
  return out;
}

PlatformConfig cluster(int nodes_per_leaf, double oversubscription) {
  PlatformConfig p;
  p.topology = "cluster";
  p.link_GBps = 450;
  p.latency_us = 2;
  p.nodes_per_leaf = nodes_per_leaf;
  p.oversubscription = oversubscription;
  return p;
}

void check_same_times(const PlatformConfig& platform, int G, const std::string& algorithm) {
  CAPTURE(platform.topology);
  CAPTURE(G);
  CAPTURE(algorithm);
  const Allreduces all = run_allreduces(platform, G, algorithm, false);
  const Allreduces kinds = run_allreduces(platform, G, algorithm, true);
  CHECK(all.simulated_flows == all.plan_flows);
  CHECK(kinds.plan_flows == all.plan_flows);
  REQUIRE(kinds.ms.size() == all.ms.size());
  // Same rates, but fewer events: SimGrid's clock then rounds differently in the last bits.
  for (std::size_t i = 0; i < all.ms.size(); ++i) CHECK(kinds.ms[i] == doctest::Approx(all.ms[i]).epsilon(1e-12));
}

}  // namespace

TEST_CASE("a cluster's allreduce takes the same time with one group of flows of each kind") {
  // 12 nodes on leaves of 3 behind 2.5x oversubscribed uplinks; 5 nodes on leaves of 2, the last
  // leaf half full, so that groups crossing it differ from the others.
  for (const auto& [G, platform] : {std::pair{96, cluster(3, 2.5)}, std::pair{40, cluster(2, 1)}})
    for (const char* algorithm : {"ring", "tree", "hierarchical"}) check_same_times(platform, G, algorithm);
}

TEST_CASE("one node's allreduce takes the same time with one group of flows of each kind") {
  PlatformConfig pcie;  // every flow crosses the shared root complex: one group
  pcie.topology = "pcie";
  PlatformConfig nvlink;
  nvlink.topology = "nvlink";
  nvlink.link_GBps = 450;
  nvlink.latency_us = 2;
  for (const char* algorithm : {"ring", "tree"}) {
    check_same_times(pcie, 4, algorithm);
    check_same_times(nvlink, 8, algorithm);
  }
}

TEST_CASE("a phase of a hierarchical allreduce on 1,024 GPUs simulates a handful of its flows") {
  const Allreduces kinds = run_allreduces(cluster(4, 1), 1024, "hierarchical", true);
  CHECK(kinds.plan_flows == 3 * 1024);
  // Reduce-scatter and all-gather: an NVLink hop, alone on its links. Across nodes: a rail hop
  // inside a leaf, alone on its NICs; the 8 rails' hops out of a leaf, sharing its uplink.
  CHECK(kinds.simulated_flows == 1 + (1 + 8) + 1);
  PlatformConfig pcie;
  pcie.topology = "pcie";
  const Allreduces shared = run_allreduces(pcie, 4, "ring", true);
  CHECK(shared.simulated_flows == shared.plan_flows);  // the root complex joins every flow
}
