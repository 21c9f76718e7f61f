// A sharded step's schedule (FSDP's full sharding, and HSDP's: full sharding inside groups of
// consecutive ranks, replicated across the groups), shared by the fast and the full engines.
// Inside a group, micro-batch after micro-batch: each unit's all-gather before its forward and
// its backward, its reduce-scatter after its backward (under no_sync, the last micro-batch's
// only), on the group's one communication stream in the order its ranks issue them, each
// starting once every rank of the group has issued it — so a step's slowest rank holds its group
// back at every unit, not once at the end as under DDP. A rank issues a unit's gather as it starts
// the compute of the unit forward_prefetch before it (in backward, as backward_prefetch and
// backward_prefetch_depth say). The root unit is gathered once a
// micro-batch and kept through its backward; without reshard_after_forward every unit is.
// Across groups (HSDP): each reduce-scatter of a unit's gradient shard is followed by its
// allreduce once every group has done it, on a stream of its own. The optimizer steps each
// rank's shard (1/S of the model's optimizer time) once its last collective is done. How long a
// collective takes is the engine's: the fast one's measured once per size, the full one's
// simulated where it runs; a unit's compute beside the group's collectives runs comm_slowdown
// times slower, the same in both. Internal to the engine.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <stdexcept>
#include <vector>

#include "common/rng.hpp"
#include "engine/engine_detail.hpp"

namespace ddpsim::engine_detail {

// A shard group's ranks, [first, first + count).
struct Ranks {
  std::size_t first = 0, count = 0;
};

inline double latest(const std::vector<double>& times, Ranks r) {
  const auto from = times.begin() + static_cast<std::ptrdiff_t>(r.first);
  return *std::max_element(from, from + static_cast<std::ptrdiff_t>(r.count));
}

// How rank g's forward (or backward) of micro-batch m falls over the units under unit_jitter σ:
// each unit's share times a mean-one log-normal factor, then scaled so that they sum to one
// again — the rank computes what the charger gave it, but not in the same proportions as its
// peers, so a group that meets at every unit waits for a different rank at each. Keyed by
// (seed, step, rank, micro-batch, phase): every policy meets the same draws. `out`: U shares.
inline void unit_shares(const EngineSetup& s, int step, std::size_t g, std::size_t m, bool backward, double* out) {
  KeyedRng rng{s.jitter_seed, static_cast<std::uint64_t>(step), g, m, backward ? 1U : 0U};
  const double sigma = s.unit_jitter;
  double sum = 0;
  for (std::size_t u = 0; u < s.units.size(); ++u)
    sum += out[u] = s.units[u].share * std::exp(sigma * rng.normal() - 0.5 * sigma * sigma);
  for (std::size_t u = 0; u < s.units.size(); ++u) out[u] /= sum;
}

// A collective's time on its group's stream, ms.
struct Interval {
  double from = 0, to = 0;
};

// A collective's end beside the group's compute, from its start and its end alone (ms).
using Slowed = std::function<double(double from, double end)>;

// Runs a group's collective ("all-gather" or "reduce-scatter") of unit u, issued by its last rank
// at `issued` (ms), once the group's stream is free, and holds the stream until `slowed` says it
// ends; returns when it ran.
using RunCollective = std::function<Interval(const char* what, std::size_t unit, double issued, const Slowed& slowed)>;

// How many of a step's M micro-batches reduce-scatter in backward (no_sync: the last only).
inline std::size_t synced_micro_batches(const EngineSetup& s, std::size_t M) {
  return s.no_sync ? 1 : M;
}

// One step of one group, every micro-batch in turn: each rank's clock (`cursor`: its start,
// then the end of its last backward), its compute's ends (`marks`: per rank, 2M of them, the end
// of micro-batch m's forward and of its backward), how much longer its forward and backward ran
// beside the group's collectives under comm_slowdown (`stretched`: per rank, 2, added to), and
// per synced micro-batch and unit the latest end of its reduce-scatter over the groups so far
// (`reduced`, M·U or U long). Every collective that can run beside a unit's compute is issued
// before that compute is timed.
struct GroupStep {
  const EngineSetup& s;
  int step;
  std::function<const RankWork&(std::size_t)> work;
  RunCollective run;
  std::vector<double>& cursor;
  std::vector<double>& marks;
  std::vector<double>& stretched;
  std::vector<double>& reduced;
  // This step's collectives on the group's stream so far, in order (under comm_slowdown only).
  mutable std::vector<std::pair<double, double>> busy{};
  // The phase being scheduled (a micro-batch's forward or backward), which a collective looks
  // ahead into under allreduce_slowdown: each unit's gather end (+∞: not issued yet), the ranks'
  // shares, and the unit they compute next (−1: none left).
  struct Phase {
    std::size_t m = 0;
    bool backward = false;
    std::vector<double> gathered{};
    std::vector<double> drawn{};  // under unit_jitter: each rank's shares, rank-major
    std::ptrdiff_t next = 0;
  };
  mutable Phase phase{};
  mutable Ranks ranks{};

  void operator()(Ranks r, std::vector<double>& begin) const {
    ranks = r;
    const std::size_t M = work(r.first).micro_batches(), U = s.units.size();
    for (std::size_t g = r.first; g < r.first + r.count; ++g)  // the compute charger refuses such steps
      if (work(g).micro_batches() != M)
        throw std::logic_error("sharded step: ranks with unequal micro-batch counts reached the engine");
    for (std::size_t m = 0; m < M; ++m) {
      // Under no_sync FSDP frees a unit in backward only where it reshards after forward, so
      // without resharding the units gathered by the first micro-batch stay for the rest.
      const bool kept = m > 0 && s.no_sync && !s.reshard_after_forward;
      forward(r, begin, m, M, kept);
      const bool sync = !s.no_sync || m + 1 == M;
      backward(r, begin, m, M, sync ? reduced.data() + (s.no_sync ? 0 : m * U) : nullptr);
    }
  }

 private:
  double& mark(std::size_t g, std::size_t M, std::size_t m, bool backward) const {
    return marks[(g * M + m) * 2 + (backward ? 1 : 0)];
  }

  // Under allreduce_slowdown a collective runs that many times slower while a rank of the group
  // computes, as DDP's beside backward.
  double collective(const char* what, std::size_t unit, double issued) const {
    const auto slowed = [&](double from, double end) {
      if (s.allreduce_slowdown == 1) return end;
      return collective_end(from, end - from, compute_until(from), s.allreduce_slowdown);
    };
    const Interval ran = run(what, unit, issued, slowed);
    if (s.comm_slowdown != 1) busy.emplace_back(ran.from, ran.to);
    return ran.to;
  }

  // When the group's last rank would stop computing were a collective begun at `from` never to
  // end: each goes on through the phase's units gathered before it (their gathers, earlier on the
  // stream, have ended by `from`) and stops at one that waits for it or for a later one. Until
  // then some rank computes throughout, and after it none does before the collective ends.
  // DDP's reduce_buckets asks the same of its backward.
  double compute_until(double from) const {
    constexpr double NEVER = std::numeric_limits<double>::infinity();
    if (s.comm_slowdown != 1) busy.emplace_back(from, NEVER);
    const auto U = static_cast<std::ptrdiff_t>(s.units.size());
    double until = 0;
    for (std::size_t g = ranks.first; g < ranks.first + ranks.count; ++g) {
      const Phases p = work(g).micro(phase.m);
      double t = cursor[g];
      for (std::ptrdiff_t v = phase.next; v >= 0 && v < U; v += phase.backward ? -1 : 1) {
        const auto u = static_cast<std::size_t>(v);
        if (phase.gathered[u] == NEVER) break;
        t = compute(g, std::max(t, phase.gathered[u]), (phase.backward ? p.bwd_ms : p.fwd_ms) * share(g, u),
                    phase.backward, false);
      }
      until = std::max(until, t);
    }
    if (s.comm_slowdown != 1) busy.pop_back();
    return until;
  }

  // When rank g's `ms` of a unit's compute begun at `from` end: comm_slowdown times slower
  // beside the group's collectives (NCCL's kernels take SMs from it, as under DDP).
  // `counted`: false for a look-ahead, which leaves `stretched` alone.
  double compute(std::size_t g, double from, double ms, bool backward, bool counted = true) const {
    if (s.comm_slowdown == 1) return from + ms;  // the plain sum, as before the factor existed
    const double end = compute_end(from, ms, busy, s.comm_slowdown);
    if (counted) stretched[g * 2 + (backward ? 1 : 0)] += end - from - ms;
    return end;
  }

  // Under unit_jitter, each rank's drawn shares of micro-batch m's forward or backward by unit;
  // none without it.
  std::vector<double> drawn(Ranks r, std::size_t m, bool backward) const {
    const std::size_t U = s.units.size();
    std::vector<double> out(s.unit_jitter > 0 ? r.count * U : 0);
    for (std::size_t i = 0; i < out.size(); i += U) unit_shares(s, step, r.first + i / U, m, backward, out.data() + i);
    return out;
  }

  // Rank g's share of the phase's compute in unit u: the unit's own, or the rank's drawn one.
  double share(std::size_t g, std::size_t u) const {
    return phase.drawn.empty() ? s.units[u].share : phase.drawn[(g - ranks.first) * s.units.size() + u];
  }

  // Unit u's gather is issued as the ranks begin unit u − forward_prefetch (the first ones: as
  // they begin the micro-batch); `kept`: every unit is still gathered.
  void forward(Ranks r, std::vector<double>& begin, std::size_t m, std::size_t M, bool kept) const {
    const std::size_t U = s.units.size(), ahead = static_cast<std::size_t>(s.forward_prefetch);
    phase = {m, false, std::vector<double>(U, kept ? 0.0 : std::numeric_limits<double>::infinity()), drawn(r, m, false),
             0};
    std::vector<double>& gathered = phase.gathered;
    const auto gather = [&](std::size_t u, double issued) {
      if (!kept) gathered[u] = collective("all-gather", u, issued);
    };
    const double start = latest(cursor, r);
    for (std::size_t u = 0; u < std::min(ahead, U); ++u) gather(u, start);
    for (std::size_t u = 0; u < U; ++u) {
      for (std::size_t g = r.first; g < r.first + r.count; ++g) begin[g] = std::max(cursor[g], gathered[u]);
      phase.next = static_cast<std::ptrdiff_t>(u);
      if (u + ahead < U) gather(u + ahead, latest(begin, r));
      for (std::size_t g = r.first; g < r.first + r.count; ++g)
        cursor[g] = compute(g, begin[g], work(g).micro(m).fwd_ms * share(g, u), false);
    }
    for (std::size_t g = r.first; g < r.first + r.count; ++g) mark(g, M, m, false) = cursor[g];
  }

  // Units in reverse: a resharded unit is gathered again, issued per backward_prefetch: as the
  // ranks begin the unit backward_prefetch_depth after it ("backward_pre"; the last: as they end
  // forward, and those the last unit prefetches as they begin it), so on the stream it goes
  // before that unit's reduce-scatter, issued once the ranks have its gradients; as they end the
  // unit after it, still before its reduce-scatter ("backward_post"); or only then, after it
  // ("none"). No reduce-scatter where `reduced` is null: a no_sync micro-batch keeps its
  // gradients.
  void backward(Ranks r, std::vector<double>& begin, std::size_t m, std::size_t M, double* reduced) const {
    const std::size_t U = s.units.size();
    phase = {m, true, std::vector<double>(U), drawn(r, m, true), static_cast<std::ptrdiff_t>(U) - 1};
    std::vector<double>& gathered = phase.gathered;  // 0: kept since forward
    const auto resharded = [&](std::size_t k) { return !s.units[k].root && s.reshard_after_forward; };
    for (std::size_t k = 0; k < U; ++k)
      if (resharded(k)) gathered[k] = std::numeric_limits<double>::infinity();
    const auto regather = [&](std::size_t k, double when) {
      if (resharded(k)) gathered[k] = collective("all-gather", k, when);
    };
    const bool pre = s.backward_prefetch == "backward_pre", post = s.backward_prefetch == "backward_post";
    const auto depth = static_cast<std::size_t>(s.backward_prefetch_depth);
    regather(U - 1, latest(cursor, r));
    std::size_t next = U - 1;  // the units below it are not yet issued
    for (std::size_t k = U; k-- > 0;) {
      for (std::size_t g = r.first; g < r.first + r.count; ++g) begin[g] = std::max(cursor[g], gathered[k]);
      phase.next = static_cast<std::ptrdiff_t>(k);
      if (pre) {  // issue every unit down to k − depth not yet issued
        const double issued = latest(begin, r);
        while (next > 0 && next + depth > k) regather(--next, issued);
      }
      for (std::size_t g = r.first; g < r.first + r.count; ++g)
        cursor[g] = compute(g, begin[g], work(g).micro(m).bwd_ms * share(g, k), true);
      phase.next = static_cast<std::ptrdiff_t>(k) - 1;
      const double done = latest(cursor, r);
      if (k > 0 && post) regather(k - 1, done);
      if (reduced) reduced[k] = std::max(reduced[k], collective("reduce-scatter", k, done));
      if (k > 0 && !pre && !post) regather(k - 1, done);
    }
    for (std::size_t g = r.first; g < r.first + r.count; ++g) mark(g, M, m, true) = cursor[g];
  }
};

// A rank's step once its group's collectives (and HSDP's replicas) end at `ready`: its timing
// row (ms, from its previous step's end, which becomes this one's) and, in the timeline, its
// compute spans (`marks`: its 2M ends, `stretched`: its 2 stretches, as GroupStep leaves them).
inline RankTiming finish_rank(const EngineSetup& s, int step, int rank, const RankWork& w, double start,
                              const double* marks, const double* stretched, double ready, double& prev_end,
                              std::vector<Span>& spans) {
  const double S = s.shard_group > 0 ? s.shard_group : s.G;
  const double opt = w.opt_ms / S, end = ready + opt;  // the optimizer steps this rank's shard
  if (in_timeline(s, step)) {
    if (w.sched_ms > 0) spans.push_back({step, rank, false, "schedule", start - w.sched_ms, w.sched_ms});
    double from = start;
    for (std::size_t m = 0; m < w.micro_batches(); ++m, marks += 2) {
      spans.push_back({step, rank, false, "forward (units)", from, marks[0] - from});
      spans.push_back({step, rank, false, "backward (units)", marks[0], marks[1] - marks[0]});
      from = marks[1];
    }
    spans.push_back({step, rank, false, "optimizer (shard)", ready, opt});
  }
  const double fwd = w.accum_fwd_ms() + w.fwd_ms + stretched[0], bwd = w.accum_bwd_ms() + w.bwd_ms + stretched[1];
  const RankTiming timing{fwd, bwd, end - start - (fwd + bwd) - opt, opt, end - prev_end};
  prev_end = end;
  return timing;
}

}  // namespace ddpsim::engine_detail
