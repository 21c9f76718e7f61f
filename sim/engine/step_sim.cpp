#include "engine/step_sim.hpp"

#include <algorithm>
#include <exception>
#include <limits>
#include <memory>

#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "common/interrupt.hpp"
#include "engine/collective.hpp"
#include "engine/interference.hpp"
#include "engine/simgrid_engine.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim {

namespace {

// One simulation's world: a configured engine, then the platform, then the collective bound
// to its hosts (SimGrid needs them in this order).
struct Stage {
  std::unique_ptr<sg4::Engine> engine = make_engine();
  std::vector<sg4::Host*> hosts;
  std::unique_ptr<CollectiveRunner> runner;

  explicit Stage(const EngineSetup& s) {
    const CollectivePlan plan = make_allreduce(s.algorithm, node_of_ranks(s.platform, s.G));
    hosts = build_platform(s.platform, s.G, plan.pairs());
    // A user's XML platform may give its links bandwidth profiles over time: every flow runs there.
    runner = std::make_unique<CollectiveRunner>(plan, hosts, s.platform.topology != "xml");
  }
};

std::size_t at(int step, int G, int g) {
  return static_cast<std::size_t>(step) * G + g;
}

bool in_timeline(const EngineSetup& s, int step) {
  return step >= s.timeline_from && step < s.timeline_to;
}

std::string bucket_name(std::size_t k) {
  return "allreduce bucket " + std::to_string(k);
}

// When `work` ms of compute started at `start` are done, if it runs `slowdown` times slower
// inside the `busy` intervals (sorted, disjoint) and at full speed outside them.
double compute_end(double start, double work, const std::vector<std::pair<double, double>>& busy, double slowdown) {
  double now = start;
  for (const auto& [from, to] : busy) {
    if (to <= now) continue;
    if (from > now) {  // full speed up to the interval
      if (from - now >= work) return now + work;
      work -= from - now;
      now = from;
    }
    if ((to - now) / slowdown >= work) return now + work * slowdown;
    work -= (to - now) / slowdown;
    now = to;
  }
  return now + work;
}

// When a collective of `work` ms started at `start` ends, if it runs `slowdown` times slower
// while backward runs on some rank, which it does until `compute_until`.
double collective_end(double start, double work, double compute_until, double slowdown) {
  if (compute_until <= start) return start + work;
  if (compute_until >= start + work * slowdown) return start + work * slowdown;
  return compute_until + work - (compute_until - start) / slowdown;
}

// Every rank's step with real SimGrid communication: a compute actor per rank, and one actor
// for the collectives of all ranks. A collective makes progress only once every rank has
// joined it (each ring or tree step needs a peer's previous step), so it starts when the last
// rank's bucket is ready and ends at the same time on every rank.
EngineResult run_full(const EngineSetup& s, const StepBlocks& source, const std::function<void(long, long)>& progress) {
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
              (bwd_start - fwd_start) * 1e3 + w.accum_fwd_ms, (bwd_end - bwd_start) * 1e3 + w.accum_bwd_ms,
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

// Fast mode for all policies at once, each from time 0 with the ranks idle.
EngineResult run_fast(const EngineSetup& s, const std::vector<PolicyWork>& policies,
                      const std::function<void(long, long)>& progress) {
  FastEngine engine(s);
  EngineResult result;
  result.allreduce_ms = engine.allreduce_ms();
  long done = 0, total = 0;
  for (const auto& p : policies) total += p.steps;
  for (const PolicyWork& pw : policies) {
    engine.start_policy();
    PolicyTimes out;
    engine.advance(pw, out, [&](int steps) {
      done += steps;
      if (progress) progress(done, total);
    });
    result.policies.push_back(std::move(out));
  }
  return result;
}

}  // namespace

std::map<double, double> measure_allreduce_ms(const EngineSetup& s, const std::vector<double>& sizes) {
  std::vector<double> distinct(sizes);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  Stage stage(s);
  const CollectiveRunner& runner = *stage.runner;
  std::vector<double> longest(distinct.size(), 0.0);
  sg4::Actor::create("collectives", stage.hosts.front(), [&] {
    for (std::size_t i = 0; i < distinct.size(); ++i) {
      const double start = sg4::Engine::get_clock();
      runner.run(distinct[i]);
      longest[i] = (sg4::Engine::get_clock() - start) * 1e3;
    }
  });
  stage.engine->run();
  reinstall_interrupt_handler();  // SimGrid installs its own while running
  std::map<double, double> ms;
  for (std::size_t i = 0; i < distinct.size(); ++i) ms[distinct[i]] = longest[i];
  return ms;
}

FastEngine::FastEngine(const EngineSetup& setup) : s_(setup) {
  std::vector<double> sizes;
  for (const Bucket& b : s_.buckets) sizes.push_back(b.bytes);
  allreduce_ms_ = measure_allreduce_ms(s_, sizes);
}

void FastEngine::start_policy() {
  prev_end_.assign(static_cast<std::size_t>(s_.G), 0.0);
  step_ = 0;
}

// Steps composed from memoised allreduce times. Exact for this engine's model wherever
// nothing else shares the links during a collective, which holds because buckets are
// reduced one after another; what it drops is the per-rank skew inside one collective.
void FastEngine::advance(const PolicyWork& pw, PolicyTimes& out, const std::function<void(int)>& progress) {
  const EngineSetup& s = s_;
  const int G = s.G;
  const auto Gs = static_cast<std::size_t>(G);
  std::vector<double>& prev_end = prev_end_;
  std::vector<double> fwd_end(Gs), bwd_end(Gs);
  // Interference either way; without it, the plain path keeps earlier outputs bit for bit.
  const bool slowed = s.comm_slowdown != 1, comm_slowed = s.allreduce_slowdown != 1 && s.overlap;
  constexpr double FOREVER = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, double>> busy;  // this step's collectives so far, [start, end)
  const std::size_t first_row = out.timing.size();
  out.timing.resize(first_row + pw.work.size());
  int reported = 0;
  for (int i = 0; i < pw.steps; ++i, ++step_) {
    const int t = step_;  // the step's number in the policy's run
    auto work = [&](std::size_t g) -> const RankWork& { return pw.work[at(i, G, static_cast<int>(g))]; };
    const double sync = pw.synchronized ? *std::max_element(prev_end.begin(), prev_end.end()) : 0.0;
    for (std::size_t g = 0; g < Gs; ++g) {
      const RankWork& w = work(g);
      fwd_end[g] = std::max(prev_end[g], sync) + w.sched_ms + w.accum_ms() + w.fwd_ms;
      bwd_end[g] = fwd_end[g] + w.bwd_ms;
    }
    double end_of_comm = 0;
    busy.clear();
    for (std::size_t k = 0; k < s.buckets.size(); ++k) {
      double ready = 0;
      for (std::size_t g = 0; g < Gs; ++g) {
        const double bwd = work(g).bwd_ms;
        if (!s.overlap)
          ready = std::max(ready, bwd_end[g]);
        else if (!slowed)
          ready = std::max(ready, fwd_end[g] + bwd * s.buckets[k].ready_fraction);
        else  // earlier buckets' collectives, all known by now, stretch the backward before this one
          ready = std::max(ready, compute_end(fwd_end[g], bwd * s.buckets[k].ready_fraction, busy, s.comm_slowdown));
      }
      const double start = std::max(end_of_comm, ready), duration = allreduce_ms_.at(s.buckets[k].bytes);
      if (comm_slowed) {
        // The last rank's backward end were this collective never to end: up to there it
        // runs beside backward (what happens after it ends does not matter to it).
        double compute_until = 0;
        busy.emplace_back(start, FOREVER);
        for (std::size_t g = 0; g < Gs; ++g)
          compute_until = std::max(
              compute_until, slowed ? compute_end(fwd_end[g], work(g).bwd_ms, busy, s.comm_slowdown) : bwd_end[g]);
        busy.pop_back();
        end_of_comm = collective_end(start, duration, compute_until, s.allreduce_slowdown);
      } else {
        end_of_comm = start + duration;
      }
      busy.emplace_back(start, end_of_comm);
      if (in_timeline(s, t))
        for (int g = 0; g < G; ++g) out.spans.push_back({t, g, true, bucket_name(k), start, end_of_comm - start});
    }
    if (slowed && s.overlap)
      for (std::size_t g = 0; g < Gs; ++g) bwd_end[g] = compute_end(fwd_end[g], work(g).bwd_ms, busy, s.comm_slowdown);
    for (std::size_t g = 0; g < Gs; ++g) {
      const RankWork& w = work(g);
      const double start = std::max(prev_end[g], sync);
      const double end = end_of_comm + w.opt_ms;
      const double bwd_ms = slowed ? bwd_end[g] - fwd_end[g] : w.bwd_ms;
      out.timing[first_row + at(i, G, static_cast<int>(g))] = {w.accum_fwd_ms + w.fwd_ms, w.accum_bwd_ms + bwd_ms,
                                                               end_of_comm - bwd_end[g], w.opt_ms, end - prev_end[g]};
      if (in_timeline(s, t)) {
        const int r = static_cast<int>(g);
        if (w.sched_ms > 0) out.spans.push_back({t, r, false, "schedule", start, w.sched_ms});
        if (w.accum_ms() > 0) out.spans.push_back({t, r, false, "accumulate", start + w.sched_ms, w.accum_ms()});
        out.spans.push_back({t, r, false, "forward", fwd_end[g] - w.fwd_ms, w.fwd_ms});
        out.spans.push_back({t, r, false, "backward", fwd_end[g], bwd_ms});
        out.spans.push_back({t, r, false, "optimizer", end_of_comm, w.opt_ms});
      }
      prev_end[g] = end;
    }
    if (progress && ((i + 1) % 256 == 0 || i + 1 == pw.steps)) {
      progress(i + 1 - reported);
      reported = i + 1;
    }
  }
}

EngineResult simulate_full(const EngineSetup& setup, const StepBlocks& blocks,
                           const std::function<void(long, long)>& progress) {
  return run_full(setup, blocks, progress);
}

EngineResult simulate_steps(const EngineSetup& setup, const std::vector<PolicyWork>& policies,
                            const std::function<void(long, long)>& progress) {
  if (setup.mode != "full") return run_fast(setup, policies, progress);
  // Each policy in one block.
  StepBlocks blocks;
  for (const PolicyWork& pw : policies) {
    blocks.steps.push_back(pw.steps);
    blocks.block_steps = std::max(blocks.block_steps, pw.steps);
  }
  std::vector<std::vector<RankTiming>> timing(policies.size());
  blocks.work = [&](int p, int, int) { return policies[static_cast<std::size_t>(p)]; };
  blocks.done = [&](int p, int, std::vector<RankTiming>& t) { timing[static_cast<std::size_t>(p)] = std::move(t); };
  EngineResult result = run_full(setup, blocks, progress);
  for (std::size_t p = 0; p < policies.size(); ++p) result.policies[p].timing = std::move(timing[p]);
  return result;
}

}  // namespace ddpsim
