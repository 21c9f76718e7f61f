// The fast step engine (steps composed from allreduce times measured once in SimGrid), and
// the entry point that picks an engine.
#include "engine/step_sim.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>

#include <simgrid/s4u.hpp>

#include "common/interrupt.hpp"
#include "engine/engine_detail.hpp"

namespace ddpsim {

using namespace engine_detail;

namespace {

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

std::vector<std::map<double, double>> measure_collectives_ms(const EngineSetup& s,
                                                             const std::vector<CollectiveRequest>& requests) {
  std::vector<std::string> algorithms;
  std::vector<std::vector<double>> distinct;
  for (const auto& [algorithm, sizes] : requests) {
    algorithms.push_back(algorithm);
    auto& d = distinct.emplace_back(sizes);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
  }
  Stage stage(s, algorithms);
  std::vector<std::vector<double>> longest(requests.size());
  sg4::Actor::create("collectives", stage.hosts.front(), [&] {
    for (std::size_t r = 0; r < requests.size(); ++r)
      for (const double size : distinct[r]) {
        const double start = sg4::Engine::get_clock();
        stage.runners[r]->run(size);
        longest[r].push_back((sg4::Engine::get_clock() - start) * 1e3);
      }
  });
  stage.engine->run();
  reinstall_interrupt_handler();  // SimGrid installs its own while running
  std::vector<std::map<double, double>> ms(requests.size());
  for (std::size_t r = 0; r < requests.size(); ++r)
    for (std::size_t i = 0; i < distinct[r].size(); ++i) ms[r][distinct[r][i]] = longest[r][i];
  return ms;
}

std::map<double, double> measure_allreduce_ms(const EngineSetup& s, const std::vector<double>& sizes) {
  return measure_collectives_ms(s, {{s.algorithm, sizes}}).front();
}

FastEngine::FastEngine(const EngineSetup& setup) : s_(setup) {
  std::vector<double> buckets, units, shards;
  for (const Bucket& b : s_.buckets) buckets.push_back(b.bytes);
  if (s_.sharding == "ddp") {
    allreduce_ms_ = measure_allreduce_ms(s_, buckets);
    return;
  }
  // Every collective of a sharded step on one platform: the buckets' allreduces (zero1) or
  // reduce-scatters (zero2) and the parameters' all-gather, or each unit's gather in a group and
  // its shard's allreduce across groups (fsdp, hybrid).
  if (s_.shards_optimizer()) {
    const double total = std::accumulate(buckets.begin(), buckets.end(), 0.0);
    const std::string bucket_collective = s_.sharding == "zero1" ? s_.algorithm : "allgather";
    const auto ms = measure_collectives_ms(s_, {{bucket_collective, buckets}, {"allgather", {total}}});
    allreduce_ms_ = ms[0];
    param_gather_ms_ = ms[1].at(total) * s_.allgather_factor;
    return;
  }
  for (const ShardUnit& u : s_.units) units.push_back(u.bytes);
  std::vector<CollectiveRequest> requests = {{"allgather", units}};
  const bool across = s_.shard_group > 0 && s_.shard_group != s_.G;
  if (across) {
    for (const ShardUnit& u : s_.units) shards.push_back(u.bytes / s_.shard_group);
    requests.push_back({"replicas", shards});
  }
  const auto ms = measure_collectives_ms(s_, requests);
  gather_ms_ = ms[0];
  if (across) replica_ms_ = ms[1];
}

void FastEngine::start_policy() {
  prev_end_.assign(static_cast<std::size_t>(s_.G), 0.0);
  step_ = 0;
}

// Steps composed from memoised allreduce times. Exact for this engine's model wherever
// nothing else shares the links during a collective, which holds because buckets are
// reduced one after another; what it drops is the per-rank skew inside one collective.
// ZeRO-1 and ZeRO-2 step a G-th of the optimizer's update and all-gather the updated parameters once
// every rank has stepped its shard; ZeRO-2 reduce-scatters the buckets instead.
void FastEngine::advance(const PolicyWork& pw, PolicyTimes& out, const std::function<void(int)>& progress) {
  if (s_.sharding == "fsdp" || s_.sharding == "hybrid") return advance_sharded(pw, out, progress);
  const EngineSetup& s = s_;
  const int G = s.G;
  const auto Gs = static_cast<std::size_t>(G);
  const bool shards = s.shards_optimizer();
  std::vector<double>& prev_end = prev_end_;
  std::vector<double> fwd_end(Gs), bwd_end(Gs), stretched(Gs);
  const std::size_t first_row = out.timing.size();
  out.timing.resize(first_row + pw.work.size());
  int reported = 0;
  for (int i = 0; i < pw.steps; ++i, ++step_) {
    const int t = step_;  // the step's number in the policy's run
    auto work = [&](std::size_t g) -> const RankWork& { return pw.work[at(i, G, static_cast<int>(g))]; };
    const double sync = pw.synchronized ? *std::max_element(prev_end.begin(), prev_end.end()) : 0.0;
    std::fill(stretched.begin(), stretched.end(), 0.0);
    const double end_of_comm = compute_and_reduce(work, sync, fwd_end, bwd_end, stretched, t, out) + s.sync_ms;
    const auto opt_ms = [&](std::size_t g) { return shards ? s.shard_opt_ms(work(g).opt_ms, g) : work(g).opt_ms; };
    double gathered = 0;  // ZeRO: the parameters' all-gather, once the last rank has stepped its shard
    if (shards) {
      for (std::size_t g = 0; g < Gs; ++g) gathered = std::max(gathered, end_of_comm + opt_ms(g));
      if (in_timeline(s, t))
        for (int g = 0; g < G; ++g)
          out.spans.push_back({t, g, true, "all-gather parameters", gathered, param_gather_ms_});
      gathered += param_gather_ms_;
    }
    for (std::size_t g = 0; g < Gs; ++g) {
      const RankWork& w = work(g);
      const double start = std::max(prev_end[g], sync), opt = opt_ms(g);
      const double end = shards ? gathered : end_of_comm + opt;
      const double bwd_ms = s.comm_slowdown != 1 ? bwd_end[g] - fwd_end[g] : w.bwd_ms;
      // Waiting: for the buckets' collectives, and under ZeRO for the parameters after its shard's step.
      const double wait = end_of_comm - bwd_end[g] + (shards ? gathered - (end_of_comm + opt) : 0.0);
      out.timing[first_row + at(i, G, static_cast<int>(g))] = {
          w.accum_fwd_ms() + w.fwd_ms, w.accum_bwd_ms() + bwd_ms + stretched[g], wait, opt, end - prev_end[g]};
      if (in_timeline(s, t)) {
        const int r = static_cast<int>(g);
        if (w.sched_ms > 0) out.spans.push_back({t, r, false, "schedule", start, w.sched_ms});
        if (w.accum_ms() > 0)  // the earlier micro-batches (ZeRO-2: with their buckets' reduce-scatters beside them)
          out.spans.push_back({t, r, false, "accumulate", start + w.sched_ms, w.accum_ms() + stretched[g]});
        out.spans.push_back({t, r, false, "forward", fwd_end[g] - w.fwd_ms, w.fwd_ms});
        out.spans.push_back({t, r, false, "backward", fwd_end[g], bwd_ms});
        out.spans.push_back({t, r, false, shards ? "optimizer (shard)" : "optimizer", end_of_comm, opt});
      }
      prev_end[g] = end;
    }
    if (progress && ((i + 1) % 256 == 0 || i + 1 == pw.steps)) {
      progress(i + 1 - reported);
      reported = i + 1;
    }
  }
}

// Each rank's forward and backward and the buckets' collectives, from its previous step's end
// (or the synchronised start): DDP accumulates the earlier micro-batches under no_sync and
// reduces once; ZeRO-2 reduce-scatters every micro-batch's buckets (DeepSpeed's stage 2 keeps
// no whole gradients), the next micro-batch computing meanwhile. Leaves the last micro-batch's
// forward and backward ends, and how much longer the earlier ones' backward ran beside the
// collectives (`stretched`); returns when the last collective ends.
double FastEngine::compute_and_reduce(const std::function<const RankWork&(std::size_t)>& work, double sync,
                                      std::vector<double>& fwd_end, std::vector<double>& bwd_end,
                                      std::vector<double>& stretched, int t, PolicyTimes& out) const {
  const bool zero2 = s_.sharding == "zero2";
  const std::size_t M = zero2 ? work(0).micro_batches() : 1;
  const auto phase = [&](std::size_t g, std::size_t m) { return work(g).micro(zero2 ? m : work(g).earlier.size()); };
  double end_of_comm = 0;
  for (std::size_t m = 0; m < M; ++m) {
    for (std::size_t g = 0; g < fwd_end.size(); ++g) {
      const RankWork& w = work(g);
      const double from =
          m == 0 ? std::max(prev_end_[g], sync) + w.sched_ms + (zero2 ? 0.0 : w.accum_ms()) : bwd_end[g];
      fwd_end[g] = from + phase(g, m).fwd_ms;
      bwd_end[g] = fwd_end[g] + phase(g, m).bwd_ms;
    }
    end_of_comm =
        reduce_buckets([&](std::size_t g) { return phase(g, m).bwd_ms; }, fwd_end, bwd_end, end_of_comm, t, out);
    if (m + 1 < M && s_.comm_slowdown != 1)
      for (std::size_t g = 0; g < fwd_end.size(); ++g) stretched[g] += bwd_end[g] - fwd_end[g] - phase(g, m).bwd_ms;
  }
  return end_of_comm;
}

// The step's bucket collectives, one after another, each once the last rank's backward has its
// gradients (all of them without overlap); returns when the last ends. With the interference
// factors, a collective and the backward beside it slow each other, and `bwd_end` moves.
double FastEngine::reduce_buckets(const std::function<double(std::size_t)>& bwd_ms, const std::vector<double>& fwd_end,
                                  std::vector<double>& bwd_end, double stream_free, int t, PolicyTimes& out) const {
  const EngineSetup& s = s_;
  const auto Gs = static_cast<std::size_t>(s.G);
  // Interference either way; without it, the plain path keeps earlier outputs bit for bit.
  const bool slowed = s.comm_slowdown != 1, comm_slowed = s.allreduce_slowdown != 1 && s.overlap;
  constexpr double FOREVER = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, double>> busy;  // this step's collectives so far, [start, end)
  double end_of_comm = stream_free;
  for (std::size_t k = 0; k < s.buckets.size(); ++k) {
    double ready = 0;
    for (std::size_t g = 0; g < Gs; ++g) {
      const double bwd = bwd_ms(g);
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
        compute_until =
            std::max(compute_until, slowed ? compute_end(fwd_end[g], bwd_ms(g), busy, s.comm_slowdown) : bwd_end[g]);
      busy.pop_back();
      end_of_comm = collective_end(start, duration, compute_until, s.allreduce_slowdown);
    } else {
      end_of_comm = start + duration;
    }
    busy.emplace_back(start, end_of_comm);
    if (in_timeline(s, t))
      for (int g = 0; g < s.G; ++g)
        out.spans.push_back(
            {t, g, true, s.sharding == "zero2" ? reduce_scatter_name(k) : bucket_name(k), start, end_of_comm - start});
  }
  if (slowed && s.overlap)
    for (std::size_t g = 0; g < Gs; ++g) bwd_end[g] = compute_end(fwd_end[g], bwd_ms(g), busy, s.comm_slowdown);
  return end_of_comm;
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
  EngineResult result = simulate_full(setup, blocks, progress);
  for (std::size_t p = 0; p < policies.size(); ++p) result.policies[p].timing = std::move(timing[p]);
  return result;
}

}  // namespace ddpsim
