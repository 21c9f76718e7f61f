// Gradient allreduce as real SimGrid communication. An algorithm is a sequence of phases;
// in each phase every rank sends its flows and receives its peers' concurrently, so links
// are shared and contended exactly as SimGrid's network model says. A flow carries the
// whole phase's volume between two ranks (the pipelined, bandwidth-optimal form NCCL runs),
// and a phase of h sequential algorithm steps pays its route latency h times.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <simgrid/forward.h>

namespace ddpsim {

struct Flow {
  int src = 0, dst = 0;
  double fraction = 0;  // of the collective's bytes S
};

struct Phase {
  std::vector<Flow> flows;
  int hops = 1;  // sequential algorithm steps, each paying the route latency
};

struct CollectivePlan {
  std::string algorithm;
  std::vector<Phase> phases;

  // Every (src, dst) the plan sends over, for routing.
  std::vector<std::pair<int, int>> pairs() const;
};

const std::vector<std::string>& allreduce_algorithms();

// ring: each rank sends 2(G−1)/G·S to its successor in 2(G−1) steps. tree: a binary tree
// reduces S up to rank 0 and broadcasts it down (2·depth steps). hierarchical: ring
// reduce-scatter inside each node, ring allreduce of the S/M shards across nodes (one ring
// per local GPU index, concurrently), ring all-gather inside each node; ranks of one node
// are consecutive. Throws InputError for an unknown name or uneven nodes.
CollectivePlan make_allreduce(const std::string& algorithm, const std::vector<int>& node_of_rank);

// A plan bound to hosts: mailboxes, flows host to host and per-phase latencies resolved once.
class CollectiveRunner {
 public:
  CollectiveRunner(const CollectivePlan& plan, const std::vector<simgrid::s4u::Host*>& hosts);
  // Rank g's part of one allreduce of `bytes`; call from g's actor, every rank at once. Returns
  // when every rank has sent and received everything (SimGrid time advances).
  void run(int g, double bytes) const;
  // The whole allreduce from one actor, every flow started host to host: the same flows at the
  // same times as run() on every rank, with a fraction of the simulated calls. SimGrid 3.32's
  // CommImpl::finish searches a list as long as the flows in flight, so a phase costs
  // O(flows²): 5x slower than run() at G = 16,384, faster up to a few thousand ranks.
  void run_all(double bytes) const;

 private:
  struct RankPhase {
    std::vector<std::pair<simgrid::s4u::Mailbox*, double>> sends;  // destination inbox, fraction
    int receives = 0;
    simgrid::s4u::Mailbox* inbox = nullptr;
    double extra_latency_s = 0;  // (hops − 1) × the phase's longest route latency
  };
  struct HostFlow {
    simgrid::s4u::Host *src = nullptr, *dst = nullptr;
    double fraction = 0;
  };
  std::vector<std::vector<RankPhase>> ranks_;  // [rank][phase]
  std::vector<std::vector<HostFlow>> flows_;   // [phase]
  simgrid::s4u::BarrierPtr phase_done_;
};

}  // namespace ddpsim
