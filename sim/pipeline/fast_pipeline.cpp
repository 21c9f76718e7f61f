// The pipeline's fast mode: each group's passes and transfers timed in plain C++
// (group_timing.hpp), then every stage's syncs and ZeRO-2 gathers run on SimGrid as in full
// mode, started when their last peer joins them. Steps start together, so each is its own.
#include "pipeline/fast_pipeline.hpp"

#include <algorithm>
#include <memory>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "engine/simgrid_engine.hpp"
#include "pipeline/group_timing.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/sync_plans.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim::pipeline {

namespace {

// The route from `src` to its neighbour `dst` as network.cpp builds it in separate channels:
// the GPU's link inside a node; its NIC, and the two leaves' uplink and downlink, across. With
// GPUs placed group after group, only a leaf's last GPU sends forward out of it and only its
// first sends back, so each of these links carries one GPU's sends of a class.
Route route(const ChannelConfig& c, bool leaf_links, int src, int dst) {
  const Fabric& f = c.fabric;
  if (f.node_of(src) == f.node_of(dst)) return {c.bytes_per_s, c.latency_s};
  if (leaf_links && f.leaf_of(src) != f.leaf_of(dst))
    return {std::min(f.nic_bytes_per_s, f.leaf_bytes_per_s), 3 * f.nic_latency_s};
  return {f.nic_bytes_per_s, f.nic_latency_s};
}

// Every group's routes, by group.
std::vector<GroupRoutes> all_routes(const PipelineSetup& s) {
  const bool leaf_links = s.channels.fabric.has_leaf_links();
  std::vector<GroupRoutes> out(static_cast<std::size_t>(s.groups));
  for (int d = 0; d < s.groups; ++d)
    for (int st = 0; st < s.stages; ++st) {
      const int g = d * s.stages + st;
      GroupRoutes& r = out[static_cast<std::size_t>(d)];
      r.fwd.push_back(st + 1 < s.stages ? route(s.channels, leaf_links, g, g + 1) : Route{});
      r.bwd.push_back(st > 0 ? route(s.channels, leaf_links, g, g - 1) : Route{});
    }
  return out;
}

// What the stages' collectives need of one step: by GPU, its passes' time and end; by stage,
// when each sync's last peer joined it.
struct Passes {
  std::vector<double> busy_s, done_s;
  std::vector<double> ready_s;  // stage × syncs_per_step
};

// `routes`: each group's, by group.
Passes time_passes(const PipelineSetup& s, const StepWork& work, const std::vector<GroupRoutes>& routes,
                   std::array<FlowStats, FLOW_CLASSES>& flows) {
  Passes p;
  const auto syncs = static_cast<std::size_t>(s.syncs_per_step());
  p.ready_s.assign(static_cast<std::size_t>(s.stages) * syncs, 0);
  for (int d = 0; d < s.groups; ++d) {
    const GroupStep g = time_group(s, work, d, routes[static_cast<std::size_t>(d)]);
    p.busy_s.insert(p.busy_s.end(), g.busy_s.begin(), g.busy_s.end());
    p.done_s.insert(p.done_s.end(), g.done_s.begin(), g.done_s.end());
    for (std::size_t i = 0; i < p.ready_s.size(); ++i) p.ready_s[i] = std::max(p.ready_s[i], g.joins[i]);
    for (std::size_t c = 0; c < flows.size(); ++c) {
      flows[c].bytes += g.flows[c].bytes;
      flows[c].transfers += g.flows[c].transfers;
      flows[c].transfer_s += g.flows[c].transfer_s;
    }
  }
  return p;
}

// Every stage's syncs on SimGrid, one actor a stage, the steps one after another.
class Collectives {
 public:
  Collectives(const PipelineSetup& s, const std::vector<StepWork>& steps, const std::vector<Passes>& passes,
              PipelineResult& out)
      : s_(s),
        steps_(steps),
        passes_(passes),
        out_(out),
        plans_(stage_plans(s)),
        network_(s.channels, s.gpus(), sync_flows(plans_), {false, false, true}) {
    const std::vector<sg4::Host*> hosts = network_.hosts(FlowClass::grad_sync);
    const bool reduce = alike_groups_exact(s, plans_, hosts);
    for (const StagePlans& p : plans_) {
      sync_.push_back(std::make_unique<CollectiveRunner>(p.sync, hosts, reduce, Network::physical_latency));
      gather_.push_back(std::make_unique<CollectiveRunner>(p.gather, hosts, reduce, Network::physical_latency));
      for (const CollectiveRunner* runner : {sync_.back().get(), gather_.back().get()}) {
        out.sync_flows_planned += runner->plan_flows();
        out.sync_flows_simulated += runner->simulated_flows();
      }
    }
    barrier_ = sg4::Barrier::create(static_cast<unsigned>(s.stages));
  }

  void run(sg4::Engine& engine) {
    for (int st = 0; st < s_.stages; ++st)
      sg4::Actor::create("stage" + std::to_string(st), network_.host(st), [this, st] { stage_actor(st); });
    engine.run();
    out_.flows[static_cast<std::size_t>(FlowClass::grad_sync)] =
        network_.stats()[static_cast<std::size_t>(FlowClass::grad_sync)];
  }

 private:
  void stage_actor(int st) {
    const auto syncs = static_cast<std::size_t>(s_.syncs_per_step());
    std::vector<double> phase_end;
    for (std::size_t t = 0; t < steps_.size(); ++t) {
      barrier_->wait();
      const double origin = sg4::Engine::get_clock();
      const Passes& p = passes_[t];
      const GpuWork& first = steps_[t][static_cast<std::size_t>(st)];  // a stage's peers sync alike sizes
      for (std::size_t k = 0; k < syncs; ++k) {
        sg4::this_actor::sleep_until(origin + p.ready_s[static_cast<std::size_t>(st) * syncs + k]);
        network_.collective(*sync_[static_cast<std::size_t>(st)], FlowClass::grad_sync, first.sync_bytes, phase_end);
      }
      const double synced = sg4::Engine::get_clock() - origin;
      double last = 0;
      std::vector<double> end;
      for (int d = 0; d < s_.groups; ++d) {
        const auto g = static_cast<std::size_t>(d * s_.stages + st);
        end.push_back(std::max(p.done_s[g], synced) + steps_[t][g].opt_s);
        last = std::max(last, end.back());
      }
      if (s_.data_parallel == "zero2" && first.gather_bytes > 0) {
        sg4::this_actor::sleep_until(origin + last);
        network_.collective(*gather_[static_cast<std::size_t>(st)], FlowClass::grad_sync, first.gather_bytes,
                            phase_end);
        std::fill(end.begin(), end.end(), last = sg4::Engine::get_clock() - origin);
      }
      for (int d = 0; d < s_.groups; ++d) {
        const auto g = static_cast<std::size_t>(d * s_.stages + st);
        out_.steps[t].gpus[g] = {p.busy_s[g] + steps_[t][g].opt_s, end[static_cast<std::size_t>(d)]};
      }
      sg4::this_actor::sleep_until(origin + last);  // the next step starts when every stage is done
    }
  }

  const PipelineSetup& s_;
  const std::vector<StepWork>& steps_;
  const std::vector<Passes>& passes_;
  PipelineResult& out_;
  const std::vector<StagePlans> plans_;
  Network network_;
  std::vector<std::unique_ptr<CollectiveRunner>> sync_, gather_;
  sg4::BarrierPtr barrier_;
};

}  // namespace

bool syncs_zoned(const PipelineSetup& s) {
  return s.channels.fabric.has_leaf_links();
}

std::string fast_mode_obstacle(const PipelineSetup& s) {
  if (s.channels.model != "separate" && s.stages > 1)
    return "parallel.channels.model is \"" + s.channels.model +
           "\": a GPU's flow classes share its link (and, with receiver_limit, its incoming one), so its sends "
           "meet other flows";
  if (s.channels.fabric.host_bytes_per_s > 0 && s.stages > 1)
    return "the platform's PCIe root complex carries every GPU's transfers at once (platform.topology \"pcie\")";
  if (s.syncs_per_step() > 1 && (s.fwd_impact > 0 || s.bwd_impact > 0))
    return "passes slow down beside syncs that run mid-step (parallel.sync_every with fwd_impact or bwd_impact)";
  return "";
}

PipelineResult simulate_fast(const PipelineSetup& s, const std::vector<StepWork>& steps) {
  PipelineResult out;
  out.steps.resize(steps.size());
  for (auto& step : out.steps) step.gpus.resize(static_cast<std::size_t>(s.gpus()));
  for (int stage = 0; stage < s.stages; ++stage)
    out.max_in_flight.push_back(max_in_flight(stage_ops(s.schedule, s.stages, stage, s.micro_batches)));
  const std::vector<GroupRoutes> routes = all_routes(s);
  std::vector<Passes> passes;
  passes.reserve(steps.size());
  for (const StepWork& work : steps) passes.push_back(time_passes(s, work, routes, out.flows));
  if (s.syncs_per_step() > 0) {
    auto engine = make_engine();
    Collectives(s, steps, passes, out).run(*engine);
    reinstall_interrupt_handler();  // SimGrid installs its own while running
  } else {
    for (std::size_t t = 0; t < steps.size(); ++t)
      for (std::size_t g = 0; g < steps[t].size(); ++g)
        out.steps[t].gpus[g] = {passes[t].busy_s[g] + steps[t][g].opt_s, passes[t].done_s[g] + steps[t][g].opt_s};
  }
  for (auto& step : out.steps) {
    for (const auto& gpu : step.gpus) step.step_s = std::max(step.step_s, gpu.end_s);
    out.total_s += step.step_s;
  }
  return out;
}

}  // namespace ddpsim::pipeline
