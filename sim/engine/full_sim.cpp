// The full step engine: every rank's step in SimGrid, its collectives' flows on the simulated
// network, blocks of steps asked for and handed back as the ranks reach them.
#include "engine/step_sim.hpp"

#include <exception>
#include <map>

#include <simgrid/s4u.hpp>

#include "common/interrupt.hpp"
#include "engine/engine_detail.hpp"
#include "engine/interference.hpp"

namespace ddpsim {

using namespace engine_detail;

// Every rank's step with real SimGrid communication: a compute actor per rank, and one actor
// for the collectives of all ranks. A collective makes progress only once every rank has
// joined it (each ring or tree step needs a peer's previous step), so it starts when the last
// rank's bucket is ready and ends at the same time on every rank.
EngineResult simulate_full(const EngineSetup& s, const StepBlocks& source,
                           const std::function<void(long, long)>& progress) {
  if (s.sharding == "fsdp" || s.sharding == "hybrid") return simulate_full_sharded(s, source, progress);
  // ZeRO-2 reduce-scatters each micro-batch's buckets; ZeRO-1 allreduces them as DDP does. Both
  // all-gather the parameters after the optimizer: a ring over every rank moves (G − 1)/G of
  // them, as a reduce-scatter does, and as the sharded plans do.
  const bool zero2 = s.sharding == "zero2", shards = s.shards_optimizer();
  Stage stage(s, zero2                   ? std::vector<std::string>{"allgather"}
                 : s.sharding == "zero1" ? std::vector<std::string>{s.algorithm, "allgather"}
                                         : std::vector<std::string>{});
  const auto& hosts = stage.hosts;
  const CollectiveRunner& runner = *stage.runner;  // the buckets'
  const CollectiveRunner& gather = *stage.runners.back();
  const int G = s.G;
  const auto Gs = static_cast<std::size_t>(G);
  auto barrier = sg4::Barrier::create(static_cast<unsigned>(G));
  // Ranks whose bucket k of micro-batch m is ready (actors run one at a time: plain counters
  // suffice); the last one wakes the collectives' actor. Every rank readies them in the same
  // order, so they become ready in it. ZeRO's parameter gather, likewise, once every rank has
  // stepped its shard.
  const std::size_t K = s.buckets.size();
  std::vector<int> ready_ranks(K, 0);
  auto all_ready = sg4::Semaphore::create(0), all_stepped = sg4::Semaphore::create(0);
  std::vector<sg4::SemaphorePtr> reduced, gathered;
  for (int g = 0; g < G; ++g) {
    reduced.push_back(sg4::Semaphore::create(0));
    gathered.push_back(sg4::Semaphore::create(0));
  }
  auto bucket_ready = [&](std::size_t m, std::size_t k) {
    if (ready_ranks.size() < (m + 1) * K) ready_ranks.resize((m + 1) * K, 0);
    if (++ready_ranks[m * K + k] < G) return;
    ready_ranks[m * K + k] = 0;
    all_ready->release();
  };
  int stepped = 0;
  auto shard_stepped = [&] {
    if (++stepped < G) return;
    stepped = 0;
    all_stepped->release();
  };
  double parameter_bytes = 0;
  for (const Bucket& b : s.buckets) parameter_bytes += b.bytes;
  const std::size_t P = source.steps.size();
  EngineResult result;
  result.policies.resize(P);
  long total = 0;
  for (const int steps : source.steps) total += steps;
  std::vector<double> origin(P, 0.0);

  // The blocks of steps in flight: one rank may start the next block's steps before another
  // has finished the last of this one, so at most two per policy. The first rank to need a block
  // asks for its work; the last to finish it hands its timings on. What the source throws ends
  // the simulation and is thrown again once SimGrid returns.
  struct Block {
    int first = 0;
    PolicyWork work;
    std::vector<RankTiming> timing;
    int finished = 0;  // ranks done with its last step
  };
  std::vector<std::map<int, Block>> blocks(P);
  std::exception_ptr failure;
  // Calls the source; on a throw, ends every actor. Outside the handler: SimGrid switches
  // actors in the simcalls, and the thread's record of caught exceptions is not theirs to share.
  // SimGrid carries out the kill once every actor due in this round has run: those that come to
  // the source meanwhile end themselves.
  auto guarded = [&](const auto& call) {
    if (failure) sg4::this_actor::exit();
    try {
      call();
    } catch (...) {
      failure = std::current_exception();
    }
    if (!failure) return;
    sg4::Actor::kill_all();
    sg4::this_actor::exit();
  };
  auto block_of = [&](std::size_t p, int t) -> Block& {
    if (failure) sg4::this_actor::exit();  // the block may have no work
    const int index = t / source.block_steps;
    auto it = blocks[p].find(index);
    if (it != blocks[p].end()) return it->second;
    Block& b = blocks[p][index];
    b.first = index * source.block_steps;
    guarded([&] {
      b.work = source.work(static_cast<int>(p), b.first, std::min(source.block_steps, source.steps[p] - b.first));
    });
    b.timing.resize(b.work.work.size());
    return b;
  };
  auto finish_step = [&](std::size_t p, Block& b, int t) {
    if (t + 1 != b.first + b.work.steps || ++b.finished < G) return;
    guarded([&] { source.done(static_cast<int>(p), b.first, b.timing); });
    blocks[p].erase(b.first / source.block_steps);
  };

  // Interference: a rank's backward runs comm_slowdown times slower while a collective is in
  // flight on its device.
  Interference interference(G);
  auto set_in_flight = [&](bool on) {
    if (s.comm_slowdown != 1)
      for (int g = 0; g < G; ++g) interference.communicating(g, on ? +1 : -1);
  };
  auto compute = [&](int g, double work_s) { interference.compute(g, work_s, s.comm_slowdown); };

  // And the other way: a collective runs allreduce_slowdown times slower while any rank is in
  // backward. The network moves its bytes at full speed; the collective then works off what it
  // owes for the time it overlapped backward, at the rate that holds meanwhile.
  const bool comm_slowed = s.allreduce_slowdown != 1;
  int in_backward = 0;                       // ranks now in backward
  double backward_time = 0, changed_at = 0;  // time with some rank in backward, up to changed_at
  auto backward_lock = sg4::Mutex::create();
  auto backward_changed = sg4::ConditionVariable::create();
  auto backward_until_now = [&] {
    return backward_time + (in_backward > 0 ? sg4::Engine::get_clock() - changed_at : 0);
  };
  auto set_in_backward = [&](int delta) {
    if (!comm_slowed) return;
    std::unique_lock lock(*backward_lock);
    backward_time = backward_until_now();
    changed_at = sg4::Engine::get_clock();
    in_backward += delta;
    backward_changed->notify_all();
  };
  auto slowed_collective = [&](double bytes) {
    if (!comm_slowed) return runner.run(bytes);
    double overlapped = -backward_until_now();
    runner.run(bytes);
    std::unique_lock lock(*backward_lock);
    overlapped += backward_until_now();
    for (double owed = overlapped * (1 - 1 / s.allreduce_slowdown); owed > 0;) {
      const double rate = in_backward > 0 ? 1 / s.allreduce_slowdown : 1.0, since = sg4::Engine::get_clock();
      if (backward_changed->wait_for(lock, owed / rate) == std::cv_status::timeout) return;
      owed -= (sg4::Engine::get_clock() - since) * rate;
    }
  };

  for (int g = 0; g < G; ++g) {
    sg4::Actor::create("rank" + std::to_string(g), hosts[static_cast<std::size_t>(g)], [&, g] {
      long done = 0;
      for (std::size_t p = 0; p < P; ++p) {
        PolicyTimes& out = result.policies[p];
        barrier->wait();
        origin[p] = sg4::Engine::get_clock();
        double prev_end = origin[p];
        for (int t = 0; t < source.steps[p]; ++t) {
          Block& block = block_of(p, t);
          const PolicyWork& pw = block.work;
          const RankWork w = pw.work[at(t - block.first, G, g)];
          const bool traced = in_timeline(s, t);
          auto span = [&](const char* name, double start) {
            if (traced)
              out.spans.push_back(
                  {t, g, false, name, (start - origin[p]) * 1e3, (sg4::Engine::get_clock() - start) * 1e3});
          };
          if (pw.synchronized) barrier->wait();
          double t0 = sg4::Engine::get_clock();
          sg4::this_actor::sleep_for(w.sched_ms * 1e-3);
          if (w.sched_ms > 0) span("schedule", t0);
          t0 = sg4::Engine::get_clock();
          if (!zero2 && w.accum_ms() > 0) {  // DDP accumulates the earlier micro-batches under no_sync
            sg4::this_actor::sleep_for(w.accum_ms() * 1e-3);
            span("accumulate", t0);
          }
          // ZeRO-2: every micro-batch, its buckets reduce-scattered as the next one computes.
          const std::size_t M = zero2 ? w.micro_batches() : 1;
          double fwd_s = 0, bwd_s = 0;
          for (std::size_t m = 0; m < M; ++m) {
            const Phases phase = zero2 ? w.micro(m) : Phases{w.fwd_ms, w.bwd_ms};
            const bool last = m + 1 == M;
            if (last && m > 0) span("accumulate", t0);  // the earlier ones, reduce-scatters beside them
            const double fwd_start = sg4::Engine::get_clock();
            sg4::this_actor::sleep_for(phase.fwd_ms * 1e-3);
            if (last) span("forward", fwd_start);
            const double bwd_start = sg4::Engine::get_clock();
            fwd_s += bwd_start - fwd_start;
            set_in_backward(+1);
            double elapsed = 0;
            for (std::size_t k = 0; k < K; ++k) {
              compute(g, phase.bwd_ms * (s.buckets[k].ready_fraction - elapsed) * 1e-3);
              elapsed = s.buckets[k].ready_fraction;
              if (s.overlap) bucket_ready(m, k);
            }
            set_in_backward(-1);
            if (last) span("backward", bwd_start);
            bwd_s += sg4::Engine::get_clock() - bwd_start;
            if (!s.overlap)
              for (std::size_t k = 0; k < K; ++k) bucket_ready(m, k);
          }
          const double bwd_end = sg4::Engine::get_clock();
          reduced[static_cast<std::size_t>(g)]->acquire();
          const double comm_end = sg4::Engine::get_clock();
          sg4::this_actor::sleep_for((shards ? s.shard_opt_ms(w.opt_ms, static_cast<std::size_t>(g)) : w.opt_ms) * 1e-3);
          span(shards ? "optimizer (shard)" : "optimizer", comm_end);
          const double stepped_at = sg4::Engine::get_clock();
          if (shards) {
            shard_stepped();
            gathered[static_cast<std::size_t>(g)]->acquire();
          }
          const double end = sg4::Engine::get_clock();
          block.timing[at(t - block.first, G, g)] = {fwd_s * 1e3 + (zero2 ? 0.0 : w.accum_fwd_ms()),
                                                     bwd_s * 1e3 + (zero2 ? 0.0 : w.accum_bwd_ms()),
                                                     (comm_end - bwd_end) * 1e3 + (end - stepped_at) * 1e3,
                                                     (stepped_at - comm_end) * 1e3, (end - prev_end) * 1e3};
          prev_end = end;
          finish_step(p, block, t);  // may drop the block
          if (g == 0 && progress && (++done % 16 == 0 || t + 1 == source.steps[p])) progress(done, total);
        }
      }
    });
  }
  sg4::Actor::create("collectives", hosts.front(), [&] {
    for (std::size_t p = 0; p < P; ++p) {
      for (int t = 0; t < source.steps[p]; ++t) {
        auto spans = [&](const std::string& name, double start) {
          if (in_timeline(s, t))
            for (int g = 0; g < G; ++g)
              result.policies[p].spans.push_back(
                  {t, g, true, name, (start - origin[p]) * 1e3, (sg4::Engine::get_clock() - start) * 1e3});
        };
        std::size_t M = 1;  // ZeRO-2: the step's micro-batches, as its first bucket is ready
        for (std::size_t i = 0; i < M * K; ++i) {
          all_ready->acquire();
          if (i == 0 && zero2) {
            const Block& b = block_of(p, t);
            M = b.work.work[at(t - b.first, G, 0)].micro_batches();
          }
          const std::size_t k = i % K;
          const double start = sg4::Engine::get_clock();
          set_in_flight(true);
          slowed_collective(s.buckets[k].bytes);
          set_in_flight(false);
          spans(zero2 ? reduce_scatter_name(k) : bucket_name(k), start);
        }
        for (std::size_t g = 0; g < Gs; ++g) reduced[g]->release();
        if (!shards) continue;
        all_stepped->acquire();
        const double start = sg4::Engine::get_clock();
        gather.run(parameter_bytes);
        // The collective library's own all-gather: the ring's time, stretched by the model's factor.
        sg4::this_actor::sleep_for((s.allgather_factor - 1) * (sg4::Engine::get_clock() - start));
        spans("all-gather parameters", start);
        for (std::size_t g = 0; g < Gs; ++g) gathered[g]->release();
      }
    }
  });
  stage.engine->run();
  reinstall_interrupt_handler();  // SimGrid installs its own while running
  if (failure) std::rethrow_exception(failure);
  return result;
}

}  // namespace ddpsim
