// The links of a pipeline-parallel job as SimGrid links, and its three flow classes: forward
// activations to the next stage (fwd_prop), activation gradients to the previous stage
// (bwd_prop) and gradient sync among a stage's data-parallel peers (grad_sync).
//
// Channel models: `separate` gives every GPU one outgoing link per class (the "ideal" case);
// `shared` gives every GPU one outgoing link that its classes share, and with
// `receiver_limit` one incoming link too, so a GPU receiving from two neighbours at once takes
// no more than its link.
//
// Weights: SimGrid 3.32's S4U Comm has no weight setter, but its CM02 network model shares a
// link among flows in inverse proportion to their sharing penalty, which it sets to the
// route's latency. So each class reaches a shared link through its own latency-only "tag"
// link of latency K / weight, and a latency-factor callback (a public network-model hook)
// scales the delay back to the route's physical latency: the penalty sets the shares, the
// delay stays what the platform says. Exclusive priority: a flow of the exclusive class
// suspends the other flows on its links until it ends (S4U Activity suspend/resume).
#pragma once

#include <array>
#include <list>
#include <map>
#include <string>
#include <vector>

#include <simgrid/forward.h>

namespace ddpsim::pipeline {

enum class FlowClass { fwd_prop = 0, bwd_prop = 1, grad_sync = 2 };
constexpr int FLOW_CLASSES = 3;
const std::array<std::string, FLOW_CLASSES>& flow_class_names();

struct ChannelConfig {
  std::string model = "separate";  // separate | shared
  bool receiver_limit = true;      // shared: each GPU's incoming link is contended too
  std::array<double, FLOW_CLASSES> weights = {1, 1, 1};
  int exclusive = -1;      // the class with strict priority, or -1
  double bytes_per_s = 1;  // each link, per direction
  double latency_s = 0;    // per transfer
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
  // (src, dst, class) that will carry a flow.
  Network(const ChannelConfig& config, int gpus, const std::vector<std::array<int, 3>>& pairs);
  Network(const Network&) = delete;
  Network& operator=(const Network&) = delete;

  simgrid::s4u::Host* host(int gpu) const;
  // Moves `bytes` from `src` to `dst` as a flow of `flow_class`; returns, in the calling
  // actor, once they have arrived.
  void transfer(int src, int dst, FlowClass flow_class, double bytes);
  const std::array<FlowStats, FLOW_CLASSES>& stats() const { return stats_; }

 private:
  struct Active {
    simgrid::s4u::CommPtr comm;
    int flow_class = 0;
    std::vector<int> links;  // indices of the physical links it crosses
    bool suspended = false;
  };
  bool held_back(const Active& flow) const;  // another exclusive flow shares one of its links

  ChannelConfig config_;
  // endpoint_[gpu][class]: the host a class's flows leave from and arrive at.
  std::vector<std::array<simgrid::s4u::Host*, FLOW_CLASSES>> endpoint_;
  std::map<std::array<int, 3>, std::vector<int>> route_links_;  // (src, dst, class) → physical links
  std::list<Active> active_;
  std::array<FlowStats, FLOW_CLASSES> stats_{};
};

}  // namespace ddpsim::pipeline
