#include "pipeline/pipeline_sim.hpp"

#include <algorithm>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "engine/interference.hpp"
#include "engine/simgrid_engine.hpp"
#include "pipeline/schedule.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim::pipeline {

int PipelineSetup::syncs_per_step() const {
  if (groups < 2) return 0;
  const int every = sync_every > 0 ? sync_every : micro_batches;
  return (micro_batches + every - 1) / every;
}

long PipelineSetup::transfers_per_step() const {
  const long G = gpus(), rounds = groups - 1;
  const long sends = 2 * long{groups} * (stages - 1) * micro_batches;  // activations on, their gradients back
  const long sync = long{syncs_per_step()} * G * rounds * (data_parallel == "ddp" ? 2 : 1);
  const long gather = data_parallel == "zero2" ? G * rounds : 0;
  return sends + sync + gather;
}

void check_setup(const PipelineSetup& s, const std::string& where) {
  auto fail = [&](const std::string& what) { throw InputError(where + ": " + what); };
  if (std::find(schedule_names().begin(), schedule_names().end(), s.schedule) == schedule_names().end())
    fail("schedule is \"gpipe\" or \"1f1b\", got \"" + s.schedule + "\"");
  if (s.data_parallel != "ddp" && s.data_parallel != "zero2")
    fail("data_parallel is \"ddp\" or \"zero2\", got \"" + s.data_parallel + "\"");
  if (s.schedule == "1f1b" && s.micro_batches < s.stages)
    fail("1f1b needs at least as many micro-batches as stages (micro_batches " + std::to_string(s.micro_batches) +
         " < stages " + std::to_string(s.stages) + "): with fewer, its warm-up never reaches the last stage");
  if (s.sync_every > s.micro_batches)
    fail("sync_every (" + std::to_string(s.sync_every) + ") is more than micro_batches (" +
         std::to_string(s.micro_batches) + ")");
  if (s.channels.model != "separate" && s.channels.model != "shared")
    fail("channels.model is \"separate\" or \"shared\", got \"" + s.channels.model + "\"");
}

namespace {

// The simulation's actors share this state; SimGrid runs them one at a time.
class Run {
 public:
  Run(const PipelineSetup& s, const std::vector<StepWork>& steps, std::pair<int, int> record)
      : s_(s), steps_(steps), G_(s.gpus()), network_(s.channels, G_, flows(s)), interference_(G_) {
    result_.recording.from = std::max(0, record.first);
    result_.recording.to = std::min(static_cast<int>(steps.size()), record.second);
    barrier_ = sg4::Barrier::create(static_cast<unsigned>(G_));
    for (int g = 0; g < G_; ++g) {
      auto& gpu = gpus_.emplace_back();
      for (int m = 0; m < s.micro_batches; ++m) {
        gpu.activations.push_back(sg4::Semaphore::create(0));
        gpu.gradients.push_back(sg4::Semaphore::create(0));
      }
      gpu.sync_queue = sg4::Semaphore::create(0);
      gpu.sync_done = sg4::Semaphore::create(0);
      gpu.ring_in = sg4::Semaphore::create(0);
      gpu.ring_go = sg4::Semaphore::create(0);
      gpu.ring_sent = sg4::Semaphore::create(0);
    }
    result_.steps.resize(steps.size());
    for (auto& step : result_.steps) step.gpus.resize(static_cast<std::size_t>(G_));
    for (int stage = 0; stage < s.stages; ++stage)
      result_.max_in_flight.push_back(max_in_flight(stage_ops(s.schedule, s.stages, stage, s.micro_batches)));
  }

  PipelineResult run(sg4::Engine& engine) {
    for (int g = 0; g < G_; ++g) {
      sg4::Actor::create("compute" + std::to_string(g), network_.host(g), [this, g] { compute_actor(g); });
      if (s_.syncs_per_step() > 0)
        sg4::Actor::create("sync" + std::to_string(g), network_.host(g), [this, g] { sync_actor(g); });
      if (s_.groups > 1)
        sg4::Actor::create("ring" + std::to_string(g), network_.host(g), [this, g] { ring_sender(g); })->daemonize();
    }
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
  // One round of a ring, handed to the GPU's ring sender.
  struct RingRound {
    std::size_t step = 0;
    const char* name = "";
    int next = 0;
    double bytes = 0;
  };
  struct Gpu {
    std::vector<sg4::SemaphorePtr> activations, gradients;  // per micro-batch: arrived
    sg4::SemaphorePtr sync_queue, sync_done, ring_in;
    sg4::SemaphorePtr ring_go, ring_sent;  // a round for the ring sender; its bytes are out
    RingRound round;
  };

  // Every (src, dst, class) the run sends on.
  static std::vector<std::array<int, 3>> flows(const PipelineSetup& s) {
    std::vector<std::array<int, 3>> out;
    for (int d = 0; d < s.groups; ++d)
      for (int st = 0; st < s.stages; ++st) {
        const int g = d * s.stages + st;
        if (st + 1 < s.stages) out.push_back({g, g + 1, static_cast<int>(FlowClass::fwd_prop)});
        if (st > 0) out.push_back({g, g - 1, static_cast<int>(FlowClass::bwd_prop)});
        if (s.groups > 1)
          out.push_back({g, ((d + 1) % s.groups) * s.stages + st, static_cast<int>(FlowClass::grad_sync)});
      }
    return out;
  }

  Gpu& gpu(int g) { return gpus_[static_cast<std::size_t>(g)]; }

  bool recorded(std::size_t step) const {
    return static_cast<int>(step) >= result_.recording.from && static_cast<int>(step) < result_.recording.to;
  }
  // A box of the timeline, from `start` (absolute) to now.
  void span(std::size_t step, int g, int lane, std::string name, int micro, int peer, double start) {
    if (recorded(step))
      result_.recording.spans.push_back({static_cast<int>(step), g, lane, std::move(name), micro, peer, start - origin_,
                                         sg4::Engine::get_clock() - start});
  }
  void transfer(std::size_t step, int src, int dst, FlowClass c, double bytes, const char* name, int micro) {
    const double start = sg4::Engine::get_clock();
    network_.transfer(src, dst, c, bytes);
    span(step, src, 1 + static_cast<int>(c), name, micro, dst, start);
  }

  // Sends from an actor of its own, so the sender's compute goes on; `arrived` is released
  // once the bytes are there.
  void send(std::size_t step, int micro, int src, int dst, FlowClass c, double bytes,
            const sg4::SemaphorePtr& arrived) {
    sg4::Actor::create("send", network_.host(src), [this, step, micro, src, dst, c, bytes, arrived] {
      transfer(step, src, dst, c, bytes, c == FlowClass::fwd_prop ? "activations" : "gradients", micro);
      arrived->release();
    });
  }

  // One ring over the stage's data-parallel peers: each round, every peer sends its share to
  // the next and waits for the previous one's.
  void ring(std::size_t step, const char* name, int g, double bytes, int rounds) {
    const int stage = g % s_.stages, group = g / s_.stages;
    const int next = ((group + 1) % s_.groups) * s_.stages + stage;
    for (int r = 0; r < rounds; ++r) {
      gpu(g).round = {step, name, next, bytes / rounds};
      gpu(g).ring_go->release();
      gpu(g).ring_in->acquire();
      gpu(g).ring_sent->acquire();
    }
  }

  // Sends the rounds of GPU g's rings while g waits for its predecessor's. One actor for the
  // whole run: an actor per round (G × data-parallel groups a step) made a 1,024-GPU step
  // spend most of its time creating and freeing actor stacks.
  void ring_sender(int g) {
    for (;;) {
      gpu(g).ring_go->acquire();
      const RingRound r = gpu(g).round;
      transfer(r.step, g, r.next, FlowClass::grad_sync, r.bytes, r.name, -1);
      gpu(r.next).ring_in->release();
      gpu(g).ring_sent->release();
    }
  }

  void sync_actor(int g) {
    const int rounds = (s_.data_parallel == "ddp" ? 2 : 1) * (s_.groups - 1);
    for (std::size_t t = 0; t < steps_.size(); ++t)
      for (int k = 0; k < s_.syncs_per_step(); ++k) {
        gpu(g).sync_queue->acquire();
        interference_.communicating(g, +1);
        ring(t, "sync", g, steps_[t][static_cast<std::size_t>(g)].sync_bytes, rounds);
        interference_.communicating(g, -1);
        gpu(g).sync_done->release();
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
          if (stage > 0) gpu(g).activations[m]->acquire();
          busy("forward", op.micro, w.fwd_s[m], s_.fwd_impact);
          if (stage + 1 < s_.stages)
            send(t, op.micro, g, g + 1, FlowClass::fwd_prop, w.act_bytes[m], gpu(g + 1).activations[m]);
        } else {
          if (stage + 1 < s_.stages) gpu(g).gradients[m]->acquire();
          busy("backward", op.micro, w.bwd_s[m], s_.bwd_impact);
          if (stage > 0) send(t, op.micro, g, g - 1, FlowClass::bwd_prop, w.act_bytes[m], gpu(g - 1).gradients[m]);
          ++backwards;
          if (syncs > 0 && (backwards % every == 0 || backwards == s_.micro_batches)) gpu(g).sync_queue->release();
        }
      }
      for (int k = 0; k < syncs; ++k) gpu(g).sync_done->acquire();
      busy("optimizer", -1, w.opt_s, 0);
      if (s_.data_parallel == "zero2" && s_.groups > 1 && w.gather_bytes > 0)
        ring(t, "gather", g, w.gather_bytes, s_.groups - 1);
      out.end_s = sg4::Engine::get_clock() - origin;
    }
  }

  const PipelineSetup& s_;
  const std::vector<StepWork>& steps_;
  const int G_;
  Network network_;
  Interference interference_;
  sg4::BarrierPtr barrier_;
  double origin_ = 0;  // the recorded steps' start
  std::vector<Gpu> gpus_;
  PipelineResult result_;
};

}  // namespace

PipelineResult simulate_pipeline(const PipelineSetup& setup, const std::vector<StepWork>& steps,
                                 std::pair<int, int> record) {
  check_setup(setup, "parallel");
  auto engine = make_engine();
  Run run(setup, steps, record);
  return run.run(*engine);
}

}  // namespace ddpsim::pipeline
