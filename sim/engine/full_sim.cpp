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
  Stage stage(s);
  const auto& hosts = stage.hosts;
  const CollectiveRunner& runner = *stage.runner;
  const int G = s.G;
  const auto Gs = static_cast<std::size_t>(G);
  auto barrier = sg4::Barrier::create(static_cast<unsigned>(G));
  // Ranks whose bucket k is ready (actors run one at a time: plain counters suffice); the last
  // one wakes the collectives' actor.
  const std::size_t K = s.buckets.size();
  std::vector<int> ready_ranks(K, 0);
  auto all_ready = sg4::Semaphore::create(0);
  std::vector<sg4::SemaphorePtr> reduced;
  for (int g = 0; g < G; ++g) reduced.push_back(sg4::Semaphore::create(0));
  auto bucket_ready = [&](std::size_t k) {
    if (++ready_ranks[k] < G) return;
    ready_ranks[k] = 0;
    all_ready->release();
  };
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
          if (w.accum_ms() > 0) {
            sg4::this_actor::sleep_for(w.accum_ms() * 1e-3);
            span("accumulate", t0);
          }
          const double fwd_start = sg4::Engine::get_clock();
          sg4::this_actor::sleep_for(w.fwd_ms * 1e-3);
          span("forward", fwd_start);
          const double bwd_start = sg4::Engine::get_clock();
          set_in_backward(+1);
          double elapsed = 0;
          for (std::size_t k = 0; k < K; ++k) {
            compute(g, w.bwd_ms * (s.buckets[k].ready_fraction - elapsed) * 1e-3);
            elapsed = s.buckets[k].ready_fraction;
            if (s.overlap) bucket_ready(k);
          }
          set_in_backward(-1);
          span("backward", bwd_start);
          const double bwd_end = sg4::Engine::get_clock();
          if (!s.overlap)
            for (std::size_t k = 0; k < K; ++k) bucket_ready(k);
          reduced[static_cast<std::size_t>(g)]->acquire();
          const double comm_end = sg4::Engine::get_clock();
          sg4::this_actor::sleep_for(w.opt_ms * 1e-3);
          span("optimizer", comm_end);
          const double end = sg4::Engine::get_clock();
          block.timing[at(t - block.first, G, g)] = {
              (bwd_start - fwd_start) * 1e3 + w.accum_fwd_ms(), (bwd_end - bwd_start) * 1e3 + w.accum_bwd_ms(),
              (comm_end - bwd_end) * 1e3, (end - comm_end) * 1e3, (end - prev_end) * 1e3};
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
        for (std::size_t k = 0; k < K; ++k) {
          all_ready->acquire();
          const double start = sg4::Engine::get_clock();
          set_in_flight(true);
          slowed_collective(s.buckets[k].bytes);
          set_in_flight(false);
          if (in_timeline(s, t))
            for (int g = 0; g < G; ++g)
              result.policies[p].spans.push_back(
                  {t, g, true, bucket_name(k), (start - origin[p]) * 1e3, (sg4::Engine::get_clock() - start) * 1e3});
        }
        for (std::size_t g = 0; g < Gs; ++g) reduced[g]->release();
      }
    }
  });
  stage.engine->run();
  reinstall_interrupt_handler();  // SimGrid installs its own while running
  if (failure) std::rethrow_exception(failure);
  return result;
}

}  // namespace ddpsim
