// Gradient allreduce as real SimGrid communication. An algorithm is a sequence of phases;
// in each phase every rank sends its flows and receives its peers' concurrently, so links
// are shared and contended exactly as SimGrid's network model says. A flow carries the
// whole phase's volume between two ranks (the pipelined, bandwidth-optimal form NCCL runs),
// and a phase of h sequential algorithm steps pays its route latency h times.
#pragma once

#include <functional>
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
//
// Sharded data parallelism's, with `group` ranks a shard group (consecutive; 0: all G):
// allgather: a ring all-gather inside each group at once, (S−1)/S of S in S−1 steps (a
// reduce-scatter moves the same); replicas: a ring allreduce of a group's shard across the
// groups, one ring per position in the group (HSDP's), 2(R−1)/R of its size in 2(R−1) steps.
CollectivePlan make_allreduce(const std::string& algorithm, const std::vector<int>& node_of_rank, int group = 0);

// ZeRO-2's halves of an allreduce over every rank: the reduce-scatter (or the all-gather), as a
// ring ((G−1)/G of S in G−1 steps) or hierarchical: a ring inside each node ((M−1)/M of S), and
// one across the nodes per local index ((N−1)/N of the S/M shard); the all-gather in the
// opposite order.
CollectivePlan make_half_allreduce(bool reduce_scatter, const std::string& algorithm,
                                   const std::vector<int>& node_of_rank);

// Whether no link is on the routes of two of `plans` (a plan's own flows may share links): plans
// that run at once then meet nothing but their own flows, as CollectiveRunner's reduction needs.
// With `ignore_slack`, plans may share a link that no mix of their phases can fill (each flow
// at most its route's narrowest link, each plan in its busiest phase): max-min sharing never
// lets such a link bind, so it changes no rate.
bool disjoint_links(const std::vector<CollectivePlan>& plans, const std::vector<simgrid::s4u::Host*>& hosts,
                    bool ignore_slack = false);

// A plan bound to hosts: flows host to host and per-phase latencies resolved once.
//
// With `symmetric` set, run() simulates one of each set of identical parts of a phase: the
// flows of a phase fall into groups that share no link with another group (max-min sharing then
// sets each group's rates alone), and groups that are the same up to renaming their links (same
// bytes, same routes' latencies, links of the same bandwidth, latency and sharing policy, shared
// the same way) move at the same rates and end together. A phase of a hierarchical allreduce on
// 1,024 GPUs has 1,024 flows and a handful of such kinds. Only valid where links have no
// bandwidth or state profile over time: ddpsim's own topologies, not a user's XML platform.
class CollectiveRunner {
 public:
  // `latency` gives a route's latency where some of its links' latencies are not physical (a
  // pipeline's weight tags); by default, SimGrid's.
  using RouteLatency = std::function<double(const std::vector<simgrid::s4u::Link*>&)>;
  CollectiveRunner(const CollectivePlan& plan, const std::vector<simgrid::s4u::Host*>& hosts, bool symmetric,
                   const RouteLatency& latency = {});
  // One allreduce of `bytes` from the calling actor, every flow of a phase started host to host
  // at once; returns when every rank has sent and received everything (SimGrid time advances).
  // SimGrid 3.32 keeps such flows in one list and searches it as each ends, so a phase costs
  // O(flows²): a reason more to simulate one group of each kind.
  void run(double bytes) const;
  // Flows of one allreduce: in the plan, and those run() simulates.
  std::size_t plan_flows() const { return plan_flows_; }
  std::size_t simulated_flows() const;

  // A flow run() starts, standing for `copies` flows of the plan (those of its kind, 1 without
  // `symmetric`): what a caller that starts the flows itself needs to count what moved.
  struct HostFlow {
    simgrid::s4u::Host *src = nullptr, *dst = nullptr;
    double fraction = 0;
    double copies = 1;
  };
  struct RunPhase {
    std::vector<HostFlow> flows;  // one group of each kind, or all flows
    std::size_t plan_flows = 0;
    double extra_latency_s = 0;  // (hops − 1) × its longest route latency
  };
  const std::vector<RunPhase>& phases() const { return phases_; }

 private:
  std::vector<RunPhase> phases_;
  std::size_t plan_flows_ = 0;
};

}  // namespace ddpsim
