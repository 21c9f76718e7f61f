#include "pipeline/pipeline_sim.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "engine/interference.hpp"
#include "engine/simgrid_engine.hpp"
#include "pipeline/fast_pipeline.hpp"
#include "pipeline/schedule.hpp"
#include "pipeline/sync_plans.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim::pipeline {

int PipelineSetup::syncs_per_step() const {
  if (groups < 2) return 0;
  const int every = sync_every > 0 ? sync_every : micro_batches;
  return (micro_batches + every - 1) / every;
}

void check_setup(const PipelineSetup& s, const std::string& where) {
  auto fail = [&](const std::string& what) { throw InputError(where + ": " + what); };
  if (std::find(schedule_names().begin(), schedule_names().end(), s.schedule) == schedule_names().end())
    fail("schedule is \"gpipe\" or \"1f1b\", got \"" + s.schedule + "\"");
  if (s.data_parallel != "ddp" && s.data_parallel != "zero2")
    fail("data_parallel is \"ddp\" or \"zero2\", got \"" + s.data_parallel + "\"");
  if (s.algorithm != "ring" && s.algorithm != "hierarchical")
    fail("a pipeline's syncs run \"ring\" or \"hierarchical\" collectives (simulation.algorithm), got \"" +
         s.algorithm + "\"");
  if (s.schedule == "1f1b" && s.micro_batches < s.stages)
    fail("1f1b needs at least as many micro-batches as stages (micro_batches " + std::to_string(s.micro_batches) +
         " < stages " + std::to_string(s.stages) + "): with fewer, its warm-up never reaches the last stage");
  if (s.sync_every > s.micro_batches)
    fail("sync_every (" + std::to_string(s.sync_every) + ") is more than micro_batches (" +
         std::to_string(s.micro_batches) + ")");
  if (s.channels.model != "separate" && s.channels.model != "shared")
    fail("channels.model is \"separate\" or \"shared\", got \"" + s.channels.model + "\"");
  if (s.mode == "fast") {
    if (const std::string why = fast_mode_obstacle(s); !why.empty())
      throw InputError("simulation.mode \"fast\" would not give this job full mode's steps: " + why + "; use \"full\"");
  } else if (s.mode != "full") {
    fail("mode is \"fast\" or \"full\", got \"" + s.mode + "\"");
  }
}

namespace {

// The simulation's actors share this state; SimGrid runs them one at a time.
class Run {
 public:
  Run(const PipelineSetup& s, const std::vector<StepWork>& steps, std::pair<int, int> record)
      : s_(s),
        steps_(steps),
        G_(s.gpus()),
        plans_(stage_plans(s)),
        network_(s.channels, G_, flows(s, plans_)),
        interference_(G_) {
    result_.recording.from = std::max(0, record.first);
    result_.recording.to = std::min(static_cast<int>(steps.size()), record.second);
    barrier_ = sg4::Barrier::create(static_cast<unsigned>(G_));
    for (int g = 0; g < G_; ++g) {
      auto& gpu = gpus_.emplace_back();
      gpu.activations.resize(static_cast<std::size_t>(s.micro_batches));
      gpu.gradients.resize(static_cast<std::size_t>(s.micro_batches));
      for (auto* inbox : {&gpu.activations, &gpu.gradients})
        for (Inbox& in : *inbox) in.posted = sg4::Semaphore::create(0);
      gpu.synced = sg4::Semaphore::create(0);
      gpu.gathered = sg4::Semaphore::create(0);
    }
    const std::vector<sg4::Host*> hosts = network_.hosts(FlowClass::grad_sync);
    const bool reduce = alike_groups_exact(s, plans_, hosts);
    for (const StagePlans& plans : plans_) {
      auto& stage = stages_.emplace_back();
      stage.sync = std::make_unique<CollectiveRunner>(plans.sync, hosts, reduce, Network::physical_latency);
      stage.gather = std::make_unique<CollectiveRunner>(plans.gather, hosts, reduce, Network::physical_latency);
      stage.go = sg4::Semaphore::create(0);
      for (const CollectiveRunner* runner : {stage.sync.get(), stage.gather.get()}) {
        result_.sync_flows_planned += runner->plan_flows();
        result_.sync_flows_simulated += runner->simulated_flows();
      }
    }
    result_.steps.resize(steps.size());
    for (auto& step : result_.steps) step.gpus.resize(static_cast<std::size_t>(G_));
    for (int stage = 0; stage < s.stages; ++stage)
      result_.max_in_flight.push_back(max_in_flight(stage_ops(s.schedule, s.stages, stage, s.micro_batches)));
  }

  PipelineResult run(sg4::Engine& engine) {
    for (int g = 0; g < G_; ++g)
      sg4::Actor::create("compute" + std::to_string(g), network_.host(g), [this, g] { compute_actor(g); });
    for (int stage = 0; stage < static_cast<int>(stages_.size()); ++stage)
      sg4::Actor::create("collectives" + std::to_string(stage), network_.host(stage), [this, stage] {
        collective_actor(stage);
      })->daemonize();
    engine.run();
    reinstall_interrupt_handler();  // SimGrid installs its own while running
    if (result_.recording.to == static_cast<int>(steps_.size()) && result_.recording.from < result_.recording.to)
      network_.record(false);
    for (auto& sample : result_.recording.samples = network_.samples()) sample.time_s -= origin_;
    for (auto& step : result_.steps) {
      for (const auto& gpu : step.gpus) step.step_s = std::max(step.step_s, gpu.end_s);
      result_.total_s += step.step_s;
    }
    result_.flows = network_.stats();
    return std::move(result_);
  }

 private:
  // Where a micro-batch's activations (or their gradients) come in: the flow, once started.
  struct Inbox {
    sg4::SemaphorePtr posted;
    sg4::CommPtr flow;  // null once waited for, or when sent from an actor (recorded steps)
    double bytes = 0;
  };
  struct Gpu {
    std::vector<Inbox> activations, gradients;  // per micro-batch
    sg4::SemaphorePtr synced, gathered;         // a sync (or the all-gather) it joined has ended
    long joins = 0;                             // collectives it has joined in the run
  };
  // A collective the last peer to join asks of its stage's collectives' actor.
  struct Request {
    std::size_t step = 0;
    bool gather = false;
    double bytes = 0;
  };
  struct Stage {
    std::unique_ptr<CollectiveRunner> sync, gather;
    std::map<long, int> joined;  // by collective (each GPU's count of joins): peers in it
    std::deque<Request> ready;   // collectives every peer has joined, in order
    sg4::SemaphorePtr go;
  };

  // Every (src, dst, class) the run sends on.
  static std::vector<std::array<int, 3>> flows(const PipelineSetup& s, const std::vector<StagePlans>& plans) {
    std::vector<std::array<int, 3>> out;
    for (int d = 0; d < s.groups; ++d)
      for (int st = 0; st < s.stages; ++st) {
        const int g = d * s.stages + st;
        if (st + 1 < s.stages) out.push_back({g, g + 1, static_cast<int>(FlowClass::fwd_prop)});
        if (st > 0) out.push_back({g, g - 1, static_cast<int>(FlowClass::bwd_prop)});
      }
    const auto syncs = sync_flows(plans);
    out.insert(out.end(), syncs.begin(), syncs.end());
    return out;
  }

  Gpu& gpu(int g) { return gpus_[static_cast<std::size_t>(g)]; }

  bool recorded(std::size_t step) const {
    return static_cast<int>(step) >= result_.recording.from && static_cast<int>(step) < result_.recording.to;
  }
  // A box of the timeline, from `start` to `end` (absolute; default now).
  void span(std::size_t step, int g, int lane, std::string name, int micro, int peer, double start, double end = -1) {
    if (recorded(step))
      result_.recording.spans.push_back({static_cast<int>(step), g, lane, std::move(name), micro, peer, start - origin_,
                                         (end < 0 ? sg4::Engine::get_clock() : end) - start});
  }

  // Starts a send, so the sender's compute goes on. A recorded step's sends run from an actor
  // of their own, so that the network samples each one's end as it happens.
  void send(std::size_t step, int micro, int src, int dst, FlowClass c, double bytes, Inbox& to) {
    if (!recorded(step)) {
      to.flow = network_.start(src, dst, c, bytes);
      to.bytes = bytes;
      to.posted->release();
      return;
    }
    sg4::Actor::create("send", network_.host(src), [this, step, micro, src, dst, c, bytes, &to] {
      const double start = sg4::Engine::get_clock();
      network_.transfer(src, dst, c, bytes);
      span(step, src, 1 + static_cast<int>(c), c == FlowClass::fwd_prop ? "activations" : "gradients", micro, dst,
           start);
      to.posted->release();
    });
  }

  // Returns once the bytes sent to `from` are there.
  void receive(Inbox& from, FlowClass c) {
    from.posted->acquire();
    if (!from.flow) return;
    from.flow->wait();
    network_.arrived(*from.flow, c, from.bytes);
    from.flow = nullptr;
  }

  // GPU g joins its stage's next collective and goes on; `synced` (`gathered`) is released once
  // it has ended. A collective moves only once every peer is in it (each ring step needs the
  // previous peer's), as DDP's do; a GPU computes slower from joining a sync until it ends.
  void join(int g, std::size_t step, bool gather, double bytes) {
    Stage& stage = stages_[static_cast<std::size_t>(g % s_.stages)];
    if (!gather) interference_.communicating(g, +1);
    const long collective = gpu(g).joins++;
    if (++stage.joined[collective] < s_.groups) return;
    stage.joined.erase(collective);  // every peer joined it after its earlier ones: they are ready
    stage.ready.push_back({step, gather, bytes});
    stage.go->release();
  }

  // Runs a stage's collectives as their last peer joins them, one at a time.
  void collective_actor(int index) {
    Stage& stage = stages_[static_cast<std::size_t>(index)];
    const StagePlans& plans = plans_[static_cast<std::size_t>(index)];
    std::vector<double> phase_end;
    for (;;) {
      stage.go->acquire();
      const Request r = stage.ready.front();
      stage.ready.pop_front();
      double start = sg4::Engine::get_clock();
      network_.collective(r.gather ? *stage.gather : *stage.sync, FlowClass::grad_sync, r.bytes, phase_end);
      const auto& phases = (r.gather ? plans.gather : plans.sync).phases;
      for (std::size_t p = 0; p < phases.size(); ++p) {
        for (const Flow& f : phases[p].flows)
          span(r.step, f.src, 1 + static_cast<int>(FlowClass::grad_sync), r.gather ? "gather" : "sync", -1, f.dst,
               start, phase_end[p]);
        start = phase_end[p];
      }
      for (int d = 0; d < s_.groups; ++d) {
        const int g = d * s_.stages + index;
        if (r.gather) {
          gpu(g).gathered->release();
        } else {
          interference_.communicating(g, -1);
          gpu(g).synced->release();
        }
      }
    }
  }

  void compute_actor(int g) {
    const int stage = g % s_.stages;
    const std::vector<Op> ops = stage_ops(s_.schedule, s_.stages, stage, s_.micro_batches);
    const int every = s_.sync_every > 0 ? s_.sync_every : s_.micro_batches;
    const int syncs = s_.syncs_per_step();
    for (std::size_t t = 0; t < steps_.size(); ++t) {
      const GpuWork& w = steps_[t][static_cast<std::size_t>(g)];
      GpuStep& out = result_.steps[t].gpus[static_cast<std::size_t>(g)];
      barrier_->wait();
      const double origin = sg4::Engine::get_clock();
      if (g == 0 && static_cast<int>(t) == result_.recording.from && recorded(t)) {
        origin_ = origin;
        network_.record(true);
      }
      if (g == 0 && static_cast<int>(t) == result_.recording.to && result_.recording.from < result_.recording.to)
        network_.record(false);
      auto busy = [&](const char* name, int micro, double work_s, double impact) {
        const double start = sg4::Engine::get_clock();
        interference_.compute(g, work_s, 1 + impact);
        out.busy_s += sg4::Engine::get_clock() - start;
        span(t, g, 0, name, micro, -1, start);
      };
      int backwards = 0;
      for (const Op& op : ops) {
        const auto m = static_cast<std::size_t>(op.micro);
        if (op.forward) {
          if (stage > 0) receive(gpu(g).activations[m], FlowClass::fwd_prop);
          busy("forward", op.micro, w.fwd_s[m], s_.fwd_impact);
          if (stage + 1 < s_.stages)
            send(t, op.micro, g, g + 1, FlowClass::fwd_prop, w.act_bytes[m], gpu(g + 1).activations[m]);
        } else {
          if (stage + 1 < s_.stages) receive(gpu(g).gradients[m], FlowClass::bwd_prop);
          busy("backward", op.micro, w.bwd_s[m], s_.bwd_impact);
          if (stage > 0) send(t, op.micro, g, g - 1, FlowClass::bwd_prop, w.act_bytes[m], gpu(g - 1).gradients[m]);
          ++backwards;
          if (syncs > 0 && (backwards % every == 0 || backwards == s_.micro_batches)) join(g, t, false, w.sync_bytes);
        }
      }
      for (int k = 0; k < syncs; ++k) gpu(g).synced->acquire();
      busy("optimizer", -1, w.opt_s, 0);
      if (s_.data_parallel == "zero2" && s_.groups > 1 && w.gather_bytes > 0) {
        join(g, t, true, w.gather_bytes);
        gpu(g).gathered->acquire();
      }
      out.end_s = sg4::Engine::get_clock() - origin;
    }
  }

  const PipelineSetup& s_;
  const std::vector<StepWork>& steps_;
  const int G_;
  const std::vector<StagePlans> plans_;
  Network network_;
  Interference interference_;
  sg4::BarrierPtr barrier_;
  double origin_ = 0;  // the recorded steps' start
  std::vector<Gpu> gpus_;
  std::vector<Stage> stages_;
  PipelineResult result_;
};

// Fast mode's steps, and full mode's recording of the steps a timeline shows: each step
// starts from every GPU's barrier, so a few can be simulated apart.
PipelineResult simulate_fast_recorded(const PipelineSetup& setup, const std::vector<StepWork>& steps,
                                      std::pair<int, int> record) {
  PipelineResult out = simulate_fast(setup, steps);
  const int from = std::max(0, record.first), to = std::min(static_cast<int>(steps.size()), record.second);
  if (from >= to) return out;
  PipelineSetup full = setup;
  full.mode = "full";
  const std::vector<StepWork> shown(steps.begin() + from, steps.begin() + to);
  auto engine = make_engine();
  Run run(full, shown, {0, to - from});
  out.recording = run.run(*engine).recording;
  out.recording.from = from;
  out.recording.to = to;
  for (auto& span : out.recording.spans) span.step += from;
  return out;
}

}  // namespace

PipelineResult simulate_pipeline(const PipelineSetup& setup, const std::vector<StepWork>& steps,
                                 std::pair<int, int> record) {
  check_setup(setup, "parallel");
  if (setup.mode == "fast") return simulate_fast_recorded(setup, steps, record);
  auto engine = make_engine();
  Run run(setup, steps, record);
  return run.run(*engine);
}

}  // namespace ddpsim::pipeline
