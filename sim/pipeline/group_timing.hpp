// One data-parallel group's step of forward and backward passes and the transfers between its
// stages, timed in plain C++ instead of on SimGrid: the heart of the pipeline's fast mode.
// Exact (to SimGrid's own rounding) where each transfer's route is its sender's alone for its
// class, as `separate` channels inside a node or a leaf give: the flows on a route then share
// only its narrowest link, equally among those past their latency, as SimGrid's CM02 model
// shares them. A simulator per flow costs microseconds an event; this costs a heap operation.
#pragma once

#include <array>
#include <vector>

#include "pipeline/pipeline_sim.hpp"

namespace ddpsim::pipeline {

// A route between neighbouring stages: its narrowest link and its summed latency.
struct Route {
  double bytes_per_s = 0;
  double latency_s = 0;
};

// The group's routes by stage: fwd[st] from st to st + 1, bwd[st] from st to st − 1.
struct GroupRoutes {
  std::vector<Route> fwd, bwd;
};

// What one step of the group did, by stage, times from the step's start.
struct GroupStep {
  std::vector<double> busy_s;  // summed forward and backward time
  std::vector<double> done_s;  // the last pass's end
  std::vector<double> joins;   // by stage × syncs_per_step: when the stage joined each sync
  std::array<FlowStats, FLOW_CLASSES> flows{};
};

// `work` = the step's work of every GPU; `group` picks the group's GPUs (group·S + stage).
GroupStep time_group(const PipelineSetup& s, const StepWork& work, int group, const GroupRoutes& routes);

}  // namespace ddpsim::pipeline
