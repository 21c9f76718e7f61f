// The links of a pipeline-parallel job as SimGrid links, and its three flow classes: forward
// activations to the next stage (fwd_prop), activation gradients to the previous stage
// (bwd_prop) and gradient sync among a stage's data-parallel peers (grad_sync).
//
// Channel models: `separate` gives every GPU one outgoing link per class (the "ideal" case);
// `shared` gives every GPU one outgoing link that its classes share, and with
// `receiver_limit` one incoming link too, so a GPU receiving from two neighbours at once takes
// no more than its link.
//
// Fabric: the links behind the channels have the platform's shape. Inside a node a flow crosses
// the sender's GPU link (and the receiver's, with the receiver limit) and, on PCIe, the root
// complex; between nodes it crosses the sender's NIC (and the receiver's), and the leaf
// switches' spine uplinks when the two nodes sit under different leaves. `separate` gives every
// class its own copy of the whole fabric; `shared`, one copy for all three.
//
// Weights: SimGrid 3.32's S4U Comm has no weight setter, but its CM02 network model shares a
// link among flows in inverse proportion to their sharing penalty, which it sets to the
// route's latency. So each class reaches a shared link through its own latency-only "tag"
// link of latency K · (largest weight / weight), and a latency-factor callback (a public network-model hook)
// scales the delay back to the route's physical latency: the penalty sets the shares, the
// delay stays what the platform says. Exclusive (strict) priority is a weight 10⁶ times the
// largest other: the other classes keep a millionth of a link the exclusive class uses, and
// whatever it cannot use, as a strict-priority queue would. (S4U suspend/resume cannot do it
// in 3.32: Activity::resume leaves the activity marked suspended, so a second suspend of
// the same flow does nothing.)
#pragma once

#include <array>
#include <list>
#include <set>
#include <string>
#include <vector>

#include <simgrid/forward.h>

#include "engine/collective.hpp"

namespace ddpsim::pipeline {

enum class FlowClass { fwd_prop = 0, bwd_prop = 1, grad_sync = 2 };
constexpr int FLOW_CLASSES = 3;
const std::array<std::string, FLOW_CLASSES>& flow_class_names();

// Shared links split among classes within this ratio of weights (the kernel's solver works to
// an absolute precision of 1e-5 on the shares).
constexpr double MAX_WEIGHT_RATIO = 1e3;

// The platform's shape, in model mode; empty in abstract mode (every GPU on one node).
struct Fabric {
  std::vector<int> node;        // each GPU's node; empty: all on one
  double nic_bytes_per_s = 0;   // each GPU's NIC, per direction (needed with several nodes)
  double nic_latency_s = 0;     // per NIC link
  int nodes_per_leaf = 0;       // nodes under one leaf switch; 0: one switch joins every NIC
  double leaf_bytes_per_s = 0;  // each leaf's uplink to the spine, per direction
  double host_bytes_per_s = 0;  // the PCIe root complex every copy inside a node crosses; 0: none

  int node_of(int gpu) const { return node.empty() ? 0 : node[static_cast<std::size_t>(gpu)]; }
  int leaf_of(int gpu) const { return nodes_per_leaf > 0 ? node_of(gpu) / nodes_per_leaf : 0; }
  int nodes() const;
  int leaves() const;  // leaf switches over the nodes (1 without nodes_per_leaf)
  // Whether flows between leaves cross uplinks (several leaves, with a bandwidth).
  bool has_leaf_links() const { return leaves() > 1 && leaf_bytes_per_s > 0; }
};

struct ChannelConfig {
  std::string model = "separate";  // separate | shared
  bool receiver_limit = true;      // shared: each GPU's incoming link is contended too
  std::array<double, FLOW_CLASSES> weights = {1, 1, 1};
  int exclusive = -1;      // shared: the class with strict priority, or -1
  double bytes_per_s = 1;  // each GPU link, per direction
  double latency_s = 0;    // per GPU link
  Fabric fabric;
};

// Per class, over a run.
struct FlowStats {
  double bytes = 0;
  long transfers = 0;
  double transfer_s = 0;  // summed from start to arrival
};

class Network {
 public:
  // Builds `gpus` GPUs' hosts and links in the current SimGrid engine. `pairs` lists every
  // (src, dst, class) that will carry a flow. Only the `built` classes get endpoints (and, in
  // separate channels, links): SimGrid's routing table grows with the square of the endpoints.
  Network(const ChannelConfig& config, int gpus, const std::vector<std::array<int, 3>>& pairs,
          const std::array<bool, FLOW_CLASSES>& built = {true, true, true});
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  simgrid::s4u::Host* host(int gpu) const;  // the first built class's endpoint
  // Every GPU's endpoint for a class's flows, by GPU: what a CollectiveRunner runs between.
  std::vector<simgrid::s4u::Host*> hosts(FlowClass flow_class) const;
  // A route's latency without its weight tag: what a flow pays, and a collective per step.
  static double physical_latency(const std::vector<simgrid::s4u::Link*>& route);
  // Moves `bytes` from `src` to `dst` as a flow of `flow_class`; returns, in the calling
  // actor, once they have arrived.
  void transfer(int src, int dst, FlowClass flow_class, double bytes);
  // The same flow, started here and waited for by whoever needs its bytes (then counted with
  // `arrived`): no actor per flow, which would map and protect a stack of its own. Unsampled:
  // while recording, use transfer().
  simgrid::s4u::CommPtr start(int src, int dst, FlowClass flow_class, double bytes);
  void arrived(const simgrid::s4u::Comm& comm, FlowClass flow_class, double bytes);
  // One collective of `bytes` on `flow_class`'s endpoints, phase after phase, each phase's flows
  // at once; a flow standing for several alike ones counts as all of them. Returns when
  // the last phase ends, with each phase's end time in `phase_end`.
  void collective(const CollectiveRunner& runner, FlowClass flow_class, double bytes, std::vector<double>& phase_end);
  const std::array<FlowStats, FLOW_CLASSES>& stats() const { return stats_; }

  // Link-utilisation series: while on, every flow start and end (the only moments the shares
  // change) appends the time and each class's bytes moved so far; between two samples every
  // class moves at a constant rate (a transfer's latency aside).
  struct Sample {
    double time_s = 0;
    std::array<double, FLOW_CLASSES> moved{};
  };
  void record(bool on);
  const std::vector<Sample>& samples() const { return samples_; }

 private:
  struct Active {
    simgrid::s4u::CommPtr comm;
    int flow_class = 0;
    double bytes = 0;
    double copies = 1;  // alike flows it stands for
  };
  void sample();
  // A flow of class `flow_class` on its route, not started; throws where the run named no route.
  simgrid::s4u::CommPtr flow(int src, int dst, int flow_class, double bytes) const;

  ChannelConfig config_;
  int first_built_ = 0;
  // endpoint_[gpu][class]: the host a class's flows leave from and arrive at.
  std::vector<std::array<simgrid::s4u::Host*, FLOW_CLASSES>> endpoint_;
  std::set<std::array<int, 3>> routes_;  // (src, dst, class)
  std::list<Active> active_;
  std::array<FlowStats, FLOW_CLASSES> stats_{};
  bool recording_ = false;
  std::vector<Sample> samples_;
};

}  // namespace ddpsim::pipeline
