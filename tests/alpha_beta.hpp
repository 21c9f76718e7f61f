// The platform the engine tests compute steps on by hand: G ranks on pcie, each with its own
// 24 GB/s, 5 µs link and no shared root complex, so every ring flow has its links to itself and
// a ring pass over n ranks takes n−1 route latencies (two links) plus (n−1)/n of the bytes over
// one link (the α–β model, which SimGrid's max-min sharing gives exactly here).
#pragma once

#include <vector>

#include "engine/step_sim.hpp"

namespace ddpsim::test {

constexpr double GBps = 24, LATENCY_US = 5;

inline EngineSetup alpha_beta_setup(int G) {
  EngineSetup s;
  s.G = G;
  s.platform.topology = "pcie";
  s.platform.link_GBps = GBps;
  s.platform.latency_us = LATENCY_US;
  s.platform.host_GBps = 0;
  return s;
}

// G ranks on the cluster preset in 8-GPU nodes, two nodes a leaf: where the engine tests put
// groups inside nodes and collectives between them.
inline EngineSetup cluster_setup(int G) {
  EngineSetup s;
  s.G = G;
  s.platform.topology = "cluster";
  s.platform.gpus_per_node = 8;
  s.platform.nodes_per_leaf = 2;
  return s;
}

// A ring collective over n ranks, in ms: one pass for an all-gather or a reduce-scatter, two for
// an allreduce.
inline double ring_ms(int n, double bytes, int passes) {
  const double route_latency_s = 2 * LATENCY_US * 1e-6;
  return (double(passes) * (n - 1) * route_latency_s + double(passes) * (n - 1) / n * bytes / (GBps * 1e9)) * 1e3;
}

// One step of `ranks` in the fast engine, from idle ranks: each rank's timing.
inline std::vector<RankTiming> one_step(const EngineSetup& s, const std::vector<RankWork>& ranks) {
  FastEngine engine(s);
  engine.start_policy();
  PolicyTimes out;
  engine.advance(PolicyWork{1, false, ranks}, out);
  return out.timing;
}

}  // namespace ddpsim::test
