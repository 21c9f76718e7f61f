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

namespace {

// Every rank's step with real SimGrid communication: a compute actor per rank, and one actor
// for the collectives of all ranks. A collective makes progress only once every rank has
// joined it (each ring or tree step needs a peer's previous step), so it starts when the last
// rank's bucket is ready and ends at the same time on every rank. ZeRO-2 reduce-scatters each
// micro-batch's buckets; ZeRO-1 allreduces them as DDP does. Both all-gather the parameters
// after the optimizer: a ring over every rank moves (G − 1)/G of them, as a reduce-scatter does.
// The class holds the run's shared state; SimGrid runs its actors one at a time, so plain
// counters suffice.
class DataParallelRun {
 public:
  DataParallelRun(const EngineSetup& s, const StepBlocks& source, const std::function<void(long, long)>& progress)
      : s_(s),
        source_(source),
        progress_(progress),
        zero2_(s.sharding == "zero2"),
        shards_(s.shards_optimizer()),
        stage_(s, zero2_                  ? std::vector<std::string>{"allgather"}
                  : s.sharding == "zero1" ? std::vector<std::string>{s.algorithm, "allgather"}
                                          : std::vector<std::string>{}),
        G_(s.G),
        K_(s.buckets.size()),
        P_(source.steps.size()),
        ready_ranks_(K_, 0),
        blocks_(P_),
        origin_(P_, 0.0),
        interference_(G_) {
    barrier_ = sg4::Barrier::create(static_cast<unsigned>(G_));
    all_ready_ = sg4::Semaphore::create(0);
    all_stepped_ = sg4::Semaphore::create(0);
    for (int g = 0; g < G_; ++g) {
      reduced_.push_back(sg4::Semaphore::create(0));
      gathered_.push_back(sg4::Semaphore::create(0));
    }
    for (const Bucket& b : s.buckets) parameter_bytes_ += b.bytes;
    for (const int steps : source.steps) total_ += steps;
    result_.policies.resize(P_);
  }

  EngineResult run() {
    for (int g = 0; g < G_; ++g)
      sg4::Actor::create("rank" + std::to_string(g), stage_.hosts[static_cast<std::size_t>(g)],
                         [this, g] { rank_actor(g); });
    sg4::Actor::create("collectives", stage_.hosts.front(), [this] { collectives_actor(); });
    stage_.engine->run();
    reinstall_interrupt_handler();  // SimGrid installs its own while running
    if (failure_) std::rethrow_exception(failure_);
    return std::move(result_);
  }

 private:
  // The blocks of steps in flight: one rank may start the next block's steps before another
  // has finished the last of this one, so at most two per policy. The first rank to need a block
  // asks for its work; the last to finish it hands its timings on.
  struct Block {
    int first = 0;
    PolicyWork work;
    std::vector<RankTiming> timing;
    int finished = 0;  // ranks done with its last step
  };

  // The last rank to ready bucket k of micro-batch m wakes the collectives' actor. Every rank
  // readies them in the same order, so they become ready in it.
  void bucket_ready(std::size_t m, std::size_t k) {
    if (ready_ranks_.size() < (m + 1) * K_) ready_ranks_.resize((m + 1) * K_, 0);
    if (++ready_ranks_[m * K_ + k] < G_) return;
    ready_ranks_[m * K_ + k] = 0;
    all_ready_->release();
  }

  // The last rank to step its ZeRO shard wakes the collectives' actor for the parameters' gather.
  void shard_stepped() {
    if (++stepped_ < G_) return;
    stepped_ = 0;
    all_stepped_->release();
  }

  // Calls the source; on a throw, ends every actor, and the run throws it again once SimGrid
  // returns. Outside the handler: SimGrid switches actors in the simcalls, and the thread's
  // record of caught exceptions is not theirs to share. SimGrid carries out the kill once every
  // actor due in this round has run: those that come to the source meanwhile end themselves.
  template <class Call>
  void guarded(const Call& call) {
    if (failure_) sg4::this_actor::exit();
    try {
      call();
    } catch (...) {
      failure_ = std::current_exception();
    }
    if (!failure_) return;
    sg4::Actor::kill_all();
    sg4::this_actor::exit();
  }

  Block& block_of(std::size_t p, int t) {
    if (failure_) sg4::this_actor::exit();  // the block may have no work
    const int index = t / source_.block_steps;
    auto it = blocks_[p].find(index);
    if (it != blocks_[p].end()) return it->second;
    Block& b = blocks_[p][index];
    b.first = index * source_.block_steps;
    guarded([&] {
      b.work = source_.work(static_cast<int>(p), b.first, std::min(source_.block_steps, source_.steps[p] - b.first));
    });
    b.timing.resize(b.work.work.size());
    return b;
  }

  void finish_step(std::size_t p, Block& b, int t) {
    if (t + 1 != b.first + b.work.steps || ++b.finished < G_) return;
    guarded([&] { source_.done(static_cast<int>(p), b.first, b.timing); });
    blocks_[p].erase(b.first / source_.block_steps);
  }

  // Interference: a rank's backward runs comm_slowdown times slower while a collective is in
  // flight on its device.
  void set_in_flight(bool on) {
    if (s_.comm_slowdown != 1)
      for (int g = 0; g < G_; ++g) interference_.communicating(g, on ? +1 : -1);
  }

  // And the other way: a collective runs allreduce_slowdown times slower while any rank is in
  // backward. The network moves its bytes at full speed; the collective then works off what it
  // owes for the time it overlapped backward, at the rate that holds meanwhile.
  double backward_until_now() const {
    return backward_time_ + (in_backward_ > 0 ? sg4::Engine::get_clock() - changed_at_ : 0);
  }

  void set_in_backward(int delta) {
    if (s_.allreduce_slowdown == 1) return;
    std::unique_lock lock(*backward_lock_);
    backward_time_ = backward_until_now();
    changed_at_ = sg4::Engine::get_clock();
    in_backward_ += delta;
    backward_changed_->notify_all();
  }

  void slowed_collective(double bytes) {
    const CollectiveRunner& runner = *stage_.runner;  // the buckets'
    if (s_.allreduce_slowdown == 1) return runner.run(bytes);
    double overlapped = -backward_until_now();
    runner.run(bytes);
    std::unique_lock lock(*backward_lock_);
    overlapped += backward_until_now();
    for (double owed = overlapped * (1 - 1 / s_.allreduce_slowdown); owed > 0;) {
      const double rate = in_backward_ > 0 ? 1 / s_.allreduce_slowdown : 1.0, since = sg4::Engine::get_clock();
      if (backward_changed_->wait_for(lock, owed / rate) == std::cv_status::timeout) return;
      owed -= (sg4::Engine::get_clock() - since) * rate;
    }
  }

  void rank_actor(int g) {
    long done = 0;
    for (std::size_t p = 0; p < P_; ++p) {
      barrier_->wait();
      origin_[p] = sg4::Engine::get_clock();
      double prev_end = origin_[p];
      for (int t = 0; t < source_.steps[p]; ++t) {
        Block& block = block_of(p, t);
        const double end = rank_step(g, p, t, block, prev_end);
        prev_end = end;
        finish_step(p, block, t);  // may drop the block
        if (g == 0 && progress_ && (++done % 16 == 0 || t + 1 == source_.steps[p])) progress_(done, total_);
      }
    }
  }

  // Rank g's step t of policy p: its timing into the block; returns when it ended.
  double rank_step(int g, std::size_t p, int t, Block& block, double prev_end) {
    const PolicyWork& pw = block.work;
    const RankWork w = pw.work[at(t - block.first, G_, g)];
    auto span = [&](const char* name, double start) {
      if (in_timeline(s_, t))
        result_.policies[p].spans.push_back(
            {t, g, false, name, (start - origin_[p]) * 1e3, (sg4::Engine::get_clock() - start) * 1e3});
    };
    if (pw.synchronized) barrier_->wait();
    double t0 = sg4::Engine::get_clock();
    sg4::this_actor::sleep_for(w.sched_ms * 1e-3);
    if (w.sched_ms > 0) span("schedule", t0);
    t0 = sg4::Engine::get_clock();
    if (!zero2_ && w.accum_ms() > 0) {  // DDP accumulates the earlier micro-batches under no_sync
      sg4::this_actor::sleep_for(w.accum_ms() * 1e-3);
      span("accumulate", t0);
    }
    const auto [fwd_s, bwd_s] = compute_and_ready(g, w, t0, span);
    const double bwd_end = sg4::Engine::get_clock();
    reduced_[static_cast<std::size_t>(g)]->acquire();
    if (s_.sync_ms > 0) sg4::this_actor::sleep_for(s_.sync_ms * 1e-3);
    const double comm_end = sg4::Engine::get_clock();
    const double opt_ms = shards_ ? s_.shard_opt_ms(w.opt_ms, static_cast<std::size_t>(g)) : w.opt_ms;
    sg4::this_actor::sleep_for(opt_ms * 1e-3);
    span(shards_ ? "optimizer (shard)" : "optimizer", comm_end);
    const double stepped_at = sg4::Engine::get_clock();
    if (shards_) {
      shard_stepped();
      gathered_[static_cast<std::size_t>(g)]->acquire();
    }
    const double end = sg4::Engine::get_clock();
    block.timing[at(t - block.first, G_, g)] = {fwd_s * 1e3 + (zero2_ ? 0.0 : w.accum_fwd_ms()),
                                                bwd_s * 1e3 + (zero2_ ? 0.0 : w.accum_bwd_ms()),
                                                (comm_end - bwd_end) * 1e3 + (end - stepped_at) * 1e3,
                                                (stepped_at - comm_end) * 1e3, (end - prev_end) * 1e3};
    return end;
  }

  // Forward and backward of the step's micro-batches (ZeRO-2: each, its buckets reduce-scattered
  // as the next one computes; otherwise the last, the earlier ones accumulated before), each
  // bucket readied as backward produces it (or after it, without overlap): seconds spent in each.
  template <class Span>
  std::pair<double, double> compute_and_ready(int g, const RankWork& w, double accumulate_start, const Span& span) {
    const std::size_t M = zero2_ ? w.micro_batches() : 1;
    double fwd_s = 0, bwd_s = 0;
    for (std::size_t m = 0; m < M; ++m) {
      const Phases phase = zero2_ ? w.micro(m) : Phases{w.fwd_ms, w.bwd_ms};
      const bool last = m + 1 == M;
      if (last && m > 0) span("accumulate", accumulate_start);  // the earlier ones, reduce-scatters beside them
      const double fwd_start = sg4::Engine::get_clock();
      sg4::this_actor::sleep_for(phase.fwd_ms * 1e-3);
      if (last) span("forward", fwd_start);
      const double bwd_start = sg4::Engine::get_clock();
      fwd_s += bwd_start - fwd_start;
      set_in_backward(+1);
      double elapsed = 0;
      for (std::size_t k = 0; k < K_; ++k) {
        interference_.compute(g, phase.bwd_ms * (s_.buckets[k].ready_fraction - elapsed) * 1e-3, s_.comm_slowdown);
        elapsed = s_.buckets[k].ready_fraction;
        if (s_.overlap) bucket_ready(m, k);
      }
      set_in_backward(-1);
      if (last) span("backward", bwd_start);
      bwd_s += sg4::Engine::get_clock() - bwd_start;
      if (!s_.overlap)
        for (std::size_t k = 0; k < K_; ++k) bucket_ready(m, k);
    }
    return {fwd_s, bwd_s};
  }

  void collectives_actor() {
    for (std::size_t p = 0; p < P_; ++p) {
      for (int t = 0; t < source_.steps[p]; ++t) {
        auto spans = [&](const std::string& name, double start) {
          if (in_timeline(s_, t))
            for (int g = 0; g < G_; ++g)
              result_.policies[p].spans.push_back(
                  {t, g, true, name, (start - origin_[p]) * 1e3, (sg4::Engine::get_clock() - start) * 1e3});
        };
        std::size_t M = 1;  // ZeRO-2: the step's micro-batches, as its first bucket is ready
        for (std::size_t i = 0; i < M * K_; ++i) {
          all_ready_->acquire();
          if (i == 0 && zero2_) {
            const Block& b = block_of(p, t);
            M = b.work.work[at(t - b.first, G_, 0)].micro_batches();
          }
          const std::size_t k = i % K_;
          const double start = sg4::Engine::get_clock();
          set_in_flight(true);
          slowed_collective(s_.buckets[k].bytes);
          set_in_flight(false);
          spans(zero2_ ? reduce_scatter_name(k) : bucket_name(k), start);
        }
        for (const auto& r : reduced_) r->release();
        if (!shards_) continue;
        all_stepped_->acquire();
        const double start = sg4::Engine::get_clock();
        stage_.runners.back()->run(parameter_bytes_);
        // The collective library's own all-gather: the ring's time, stretched by the model's factor.
        sg4::this_actor::sleep_for((s_.allgather_factor - 1) * (sg4::Engine::get_clock() - start));
        spans("all-gather parameters", start);
        for (const auto& r : gathered_) r->release();
      }
    }
  }

  const EngineSetup& s_;
  const StepBlocks& source_;
  const std::function<void(long, long)>& progress_;
  const bool zero2_, shards_;
  Stage stage_;
  const int G_;
  const std::size_t K_, P_;
  sg4::BarrierPtr barrier_;
  std::vector<int> ready_ranks_;  // ranks whose bucket k of micro-batch m is ready, at m·K + k
  int stepped_ = 0;               // ranks that have stepped their shard this step
  sg4::SemaphorePtr all_ready_, all_stepped_;
  std::vector<sg4::SemaphorePtr> reduced_, gathered_;
  double parameter_bytes_ = 0;
  long total_ = 0;
  std::vector<std::map<int, Block>> blocks_;
  std::exception_ptr failure_;
  std::vector<double> origin_;  // each policy's start
  EngineResult result_;
  Interference interference_;
  int in_backward_ = 0;                        // ranks now in backward
  double backward_time_ = 0, changed_at_ = 0;  // time with some rank in backward, up to changed_at_
  sg4::MutexPtr backward_lock_ = sg4::Mutex::create();
  sg4::ConditionVariablePtr backward_changed_ = sg4::ConditionVariable::create();
};

}  // namespace

EngineResult simulate_full(const EngineSetup& s, const StepBlocks& source,
                           const std::function<void(long, long)>& progress) {
  if (s.sharding == "fsdp" || s.sharding == "hybrid") return simulate_full_sharded(s, source, progress);
  return DataParallelRun(s, source, progress).run();
}

}  // namespace ddpsim
