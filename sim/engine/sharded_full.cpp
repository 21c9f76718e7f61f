// Full mode's sharded steps: the schedule of sharded_schedule.hpp with every collective run
// through SimGrid when its group's stream reaches it. One actor per shard group plays its
// group's stream; under HSDP one more plays the replicas' stream, each unit's allreduce across
// the groups starting once every group has reduce-scattered it. The streams run at once, so a
// group's gathers and the replicas' allreduces share whatever links they both cross, which fast
// mode, timing each collective alone, cannot see.
#include <exception>
#include <map>

#include <simgrid/Exception.hpp>
#include <simgrid/s4u.hpp>

#include "common/interrupt.hpp"
#include "engine/engine_detail.hpp"
#include "engine/sharded_schedule.hpp"

namespace ddpsim {

using namespace engine_detail;

namespace {

// The flows of `plan` among ranks [first, first + count): one group's ring of a plan that holds
// every group's.
CollectivePlan group_part(const CollectivePlan& plan, Ranks r) {
  CollectivePlan out{plan.algorithm, {}};
  const auto in = [&](int g) { return g >= static_cast<int>(r.first) && g < static_cast<int>(r.first + r.count); };
  for (const Phase& phase : plan.phases) {
    Phase& p = out.phases.emplace_back();
    p.hops = phase.hops;
    for (const Flow& f : phase.flows)
      if (in(f.src)) p.flows.push_back(f);
  }
  return out;
}

// The run's shared state; SimGrid runs its actors one at a time.
class ShardedRun {
 public:
  ShardedRun(const EngineSetup& s, const StepBlocks& source)
      : s_(s), source_(source), stage_(s, {"allgather", "replicas"}), G_(static_cast<std::size_t>(s.G)) {
    S_ = s.shard_group > 0 ? static_cast<std::size_t>(s.shard_group) : G_;
    R_ = G_ / S_;
    const std::vector<int> nodes = node_of_ranks(s.platform, s.G);
    const CollectivePlan gathers = make_allreduce("allgather", nodes, s.shard_group);
    const CollectivePlan replicas = make_allreduce("replicas", nodes, s.shard_group);
    // One group of each kind stands for the rest only where nothing else runs on their links:
    // the streams run at once, so only where no two of their plans share one.
    std::vector<CollectivePlan> plans;
    for (std::size_t r = 0; r < R_; ++r) plans.push_back(group_part(gathers, {r * S_, S_}));
    if (R_ > 1) plans.push_back(replicas);
    const bool symmetric = s.platform.topology != "xml" && disjoint_links(plans, stage_.hosts);
    for (const CollectivePlan& plan : plans)
      runners_.push_back(std::make_unique<CollectiveRunner>(plan, stage_.hosts, symmetric));
    result_.policies.resize(source.steps.size());
    prev_end_.resize(G_);
    for (std::size_t r = 0; r < R_; ++r) replicated_.push_back(sg4::Semaphore::create(0));
    start_ = sg4::Barrier::create(static_cast<unsigned>(R_ + (R_ > 1 ? 1 : 0)));
    groups_ = sg4::Barrier::create(static_cast<unsigned>(R_));
  }

  EngineResult run(const std::function<void(long, long)>& progress) {
    for (const int steps : source_.steps) total_ += steps;
    for (std::size_t r = 0; r < R_; ++r)
      sg4::Actor::create("group" + std::to_string(r), stage_.hosts[r * S_],
                         [this, r, &progress] { guarded([&] { group_actor(r, progress); }); });
    if (R_ > 1) sg4::Actor::create("replicas", stage_.hosts.front(), [this] { guarded([&] { replica_actor(); }); });
    stage_.engine->run();
    reinstall_interrupt_handler();  // SimGrid installs its own while running
    if (failure_) std::rethrow_exception(failure_);
    return std::move(result_);
  }

 private:
  struct Block {
    int first = 0;
    PolicyWork work;
    std::vector<RankTiming> timing;
    std::size_t finished = 0;  // groups done with its last step
  };

  // What the source throws ends the run, and is thrown again once SimGrid returns. SimGrid kills
  // the other actors once every actor due in this round has run (block_of ends those that come
  // to it meanwhile); a kill is SimGrid's to finish, never caught here.
  void guarded(const std::function<void()>& body) {
    try {
      body();
    } catch (const simgrid::ForcefulKillException&) {
      throw;
    } catch (...) {
      if (!failure_) failure_ = std::current_exception();
    }
    if (!failure_) return;
    sg4::Actor::kill_all();
    sg4::this_actor::exit();
  }

  // Policy p's block holding step t; the first actor to need it asks the source, and a block
  // enters the map only whole (the source may throw).
  Block& block_of(std::size_t p, int t) {
    if (failure_) sg4::this_actor::exit();  // another actor's source threw: the run is ending
    const int index = t / source_.block_steps;
    auto it = blocks_.find({p, index});
    if (it == blocks_.end()) {
      Block block;
      block.first = index * source_.block_steps;
      block.work =
          source_.work(static_cast<int>(p), block.first, std::min(source_.block_steps, source_.steps[p] - block.first));
      block.timing.resize(block.work.work.size());
      it = blocks_.emplace(std::pair{p, index}, std::move(block)).first;
    }
    return it->second;
  }

  // Runs runner `index`'s collective of `bytes` once the clock reaches `issued` (ms from the
  // policy's origin); returns its end, in ms.
  double collective(std::size_t index, double bytes, double issued) {
    const double at = origin_ + issued * 1e-3;
    if (at > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(at);
    runners_[index]->run(bytes);
    return (sg4::Engine::get_clock() - origin_) * 1e3;
  }

  void span(std::size_t p, int t, const std::string& what, double from, double to, Ranks r) {
    if (in_timeline(s_, t))
      for (std::size_t g = r.first; g < r.first + r.count; ++g)
        result_.policies[p].spans.push_back({t, static_cast<int>(g), true, what, from, to - from});
  }

  void group_actor(std::size_t r, const std::function<void(long, long)>& progress) {
    const Ranks ranks{r * S_, S_};
    const std::size_t U = s_.units.size();
    std::vector<double> cursor(G_), begin(G_), start(G_), marks, stretched(2 * G_), reduced;
    std::vector<std::size_t> times_reduced(U);  // this step's reduce-scatters of each unit so far
    long done = 0;
    for (std::size_t p = 0; p < source_.steps.size(); ++p) {
      start_->wait();
      origin_ = sg4::Engine::get_clock();  // each policy from 0, the ranks idle
      std::fill(prev_end_.begin() + static_cast<std::ptrdiff_t>(ranks.first),
                prev_end_.begin() + static_cast<std::ptrdiff_t>(ranks.first + ranks.count), 0.0);
      for (int t = 0; t < source_.steps[p]; ++t) {
        Block& block = block_of(p, t);
        auto work = [&](std::size_t g) -> const RankWork& {
          return block.work.work[at(t - block.first, s_.G, static_cast<int>(g))];
        };
        if (block.work.synchronized) groups_->wait();  // every rank's previous step is done
        const double sync = block.work.synchronized ? *std::max_element(prev_end_.begin(), prev_end_.end()) : 0.0;
        for (std::size_t g = ranks.first; g < ranks.first + ranks.count; ++g)
          cursor[g] = start[g] = std::max(prev_end_[g], sync) + work(g).sched_ms;
        const std::size_t M = work(ranks.first).micro_batches();
        const auto run = [&](const char* what, std::size_t u, double issued, const Slowed& slowed) {
          const double from = std::max(issued, (sg4::Engine::get_clock() - origin_) * 1e3);
          double end = collective(r, s_.units[u].bytes, issued);
          if (const double later = slowed(from, end); later != end) {  // what it owes for compute beside it
            sg4::this_actor::sleep_until(origin_ + later * 1e-3);
            end = later;
          }
          span(p, t, std::string(what) + " unit " + std::to_string(u), from, end, ranks);
          if (R_ > 1 && std::string_view(what) == "reduce-scatter") {
            const std::size_t slot = times_reduced[u]++ * U + u;
            if (++reduced_count(slot) == R_) {
              reduced_count(slot) = 0;
              reduced_signal(slot)->release();
            }
          }
          return Interval{from, end};
        };
        marks.resize(G_ * 2 * M);
        reduced.assign(synced_micro_batches(s_, M) * U, 0.0);
        std::fill(times_reduced.begin(), times_reduced.end(), 0);
        std::fill(stretched.begin(), stretched.end(), 0.0);
        GroupStep{s_, t, work, run, cursor, marks, stretched, reduced}(ranks, begin);
        double ready = (sg4::Engine::get_clock() - origin_) * 1e3;
        if (R_ > 1) {
          replicated_[r]->acquire();
          ready = std::max(ready, replicas_end_);
        }
        for (std::size_t g = ranks.first; g < ranks.first + ranks.count; ++g)
          block.timing[at(t - block.first, s_.G, static_cast<int>(g))] =
              finish_rank(s_, t, static_cast<int>(g), work(g), start[g], &marks[g * 2 * M], &stretched[g * 2], ready,
                          prev_end_[g], result_.policies[p].spans);
        if (t + 1 == block.first + block.work.steps && ++block.finished == R_) {
          source_.done(static_cast<int>(p), block.first, block.timing);
          blocks_.erase({p, block.first / source_.block_steps});
        }
        if (r == 0 && progress && (++done % 16 == 0 || t + 1 == source_.steps[p])) progress(done, total_);
      }
    }
  }

  // HSDP: each reduce-scatter of a unit's gradient shard allreduced across the groups, in
  // backward's order.
  void replica_actor() {
    const std::size_t U = s_.units.size();
    for (std::size_t p = 0; p < source_.steps.size(); ++p) {
      start_->wait();
      for (int t = 0; t < source_.steps[p]; ++t) {
        const Block& block = block_of(p, t);
        const std::size_t M = block.work.work[at(t - block.first, s_.G, 0)].micro_batches();
        for (std::size_t m = 0; m < synced_micro_batches(s_, M); ++m)
          for (std::size_t k = U; k-- > 0;) {
            reduced_signal(m * U + k)->acquire();
            const double from = (sg4::Engine::get_clock() - origin_) * 1e3;
            replicas_end_ = collective(R_, s_.units[k].bytes / static_cast<double>(S_), from);
            span(p, t, across_groups_name(k), from, replicas_end_, {0, G_});
          }
        for (const auto& group : replicated_) group->release();
      }
    }
  }

  // Per synced micro-batch and unit (m·U + k), the groups that have reduce-scattered it this
  // step, and the replicas' signal once all have; grown as micro-batches come.
  std::size_t& reduced_count(std::size_t slot) {
    if (reduced_count_.size() <= slot) reduced_count_.resize(slot + 1, 0);
    return reduced_count_[slot];
  }
  const sg4::SemaphorePtr& reduced_signal(std::size_t slot) {
    while (unit_reduced_.size() <= slot) unit_reduced_.push_back(sg4::Semaphore::create(0));
    return unit_reduced_[slot];
  }

  const EngineSetup& s_;
  const StepBlocks& source_;
  Stage stage_;
  const std::size_t G_;
  std::size_t S_ = 0, R_ = 0;
  std::vector<std::unique_ptr<CollectiveRunner>> runners_;  // each group's gathers, then the replicas'
  std::vector<sg4::SemaphorePtr> replicated_, unit_reduced_;
  std::vector<std::size_t> reduced_count_;
  sg4::BarrierPtr start_, groups_;
  std::map<std::pair<std::size_t, int>, Block> blocks_;  // (policy, block index)
  std::vector<double> prev_end_;                         // each rank's previous step's end, ms
  double origin_ = 0, replicas_end_ = 0;
  long total_ = 0;
  std::exception_ptr failure_;
  EngineResult result_;
};

}  // namespace

EngineResult engine_detail::simulate_full_sharded(const EngineSetup& setup, const StepBlocks& blocks,
                                                  const std::function<void(long, long)>& progress) {
  ShardedRun run(setup, blocks);
  return run.run(progress);
}

}  // namespace ddpsim
