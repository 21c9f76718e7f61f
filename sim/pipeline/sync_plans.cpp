#include "pipeline/sync_plans.hpp"

#include <map>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim::pipeline {

namespace {

// A plan over a stage's peers (0 … D − 1) moved onto their GPUs (peer·S + stage).
CollectivePlan on_gpus(CollectivePlan plan, int stages, int stage) {
  for (auto& phase : plan.phases)
    for (auto& f : phase.flows) {
      f.src = f.src * stages + stage;
      f.dst = f.dst * stages + stage;
    }
  return plan;
}

// Each peer's node: consecutive peers share one, as GPUs do.
std::vector<int> peer_nodes(const PipelineSetup& s, int stage) {
  std::vector<int> out;
  for (int d = 0; d < s.groups; ++d) out.push_back(s.channels.fabric.node_of(d * s.stages + stage));
  // Renumbered from 0, as the plans count nodes.
  int last = -1, renumbered = -1;
  for (int& n : out) {
    if (n != last) ++renumbered;
    last = n;
    n = renumbered;
  }
  return out;
}

void check_even(const std::vector<int>& nodes, int stage) {
  std::map<int, int> per_node;
  for (const int n : nodes) ++per_node[n];
  for (const auto& [n, count] : per_node)
    if (count != per_node.begin()->second)
      throw InputError("simulation.algorithm \"hierarchical\": stage " + std::to_string(stage) + " has " +
                       std::to_string(per_node.begin()->second) + " data-parallel peers on its first node and " +
                       std::to_string(count) +
                       " on another; a hierarchical collective needs as many on every node (make "
                       "platform.gpus_per_node a multiple or a divisor of parallel.stages, or use \"ring\")");
}

}  // namespace

std::vector<StagePlans> stage_plans(const PipelineSetup& s) {
  std::vector<StagePlans> out;
  if (s.groups < 2) return out;
  for (int stage = 0; stage < s.stages; ++stage) {
    const std::vector<int> nodes = peer_nodes(s, stage);
    if (s.algorithm == "hierarchical") check_even(nodes, stage);
    StagePlans& p = out.emplace_back();
    if (s.data_parallel == "ddp") {
      p.sync = on_gpus(make_allreduce(s.algorithm, nodes), s.stages, stage);
    } else {
      p.sync = on_gpus(make_half_allreduce(true, s.algorithm, nodes), s.stages, stage);
      p.gather = on_gpus(make_half_allreduce(false, s.algorithm, nodes), s.stages, stage);
    }
  }
  return out;
}

double sent_per_byte(const CollectivePlan& plan) {
  double sent = 0;
  for (const auto& phase : plan.phases)
    if (!phase.flows.empty()) sent += phase.flows.front().fraction;
  return sent;
}

std::vector<std::array<int, 3>> sync_flows(const std::vector<StagePlans>& plans) {
  std::vector<std::array<int, 3>> out;
  for (const StagePlans& p : plans)
    for (const CollectivePlan* plan : {&p.sync, &p.gather})
      for (const auto& [src, dst] : plan->pairs()) out.push_back({src, dst, static_cast<int>(FlowClass::grad_sync)});
  return out;
}

bool alike_groups_exact(const PipelineSetup& s, const std::vector<StagePlans>& plans,
                        const std::vector<sg4::Host*>& hosts) {
  if (!s.reduce_flows || s.channels.model != "separate") return false;
  std::vector<CollectivePlan> stages;  // a stage's sync and gather never run at once
  for (const StagePlans& p : plans) {
    CollectivePlan& both = stages.emplace_back(p.sync);
    both.phases.insert(both.phases.end(), p.gather.phases.begin(), p.gather.phases.end());
  }
  return disjoint_links(stages, hosts, true);
}

}  // namespace ddpsim::pipeline
