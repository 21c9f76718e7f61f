// A sharded step's schedule (FSDP's full sharding, and HSDP's: full sharding inside groups of
// consecutive ranks, replicated across the groups), shared by the fast and the full engines. Inside a group: each
// unit's all-gather before its forward and its backward, its reduce-scatter after its backward,
// on the group's one communication stream in the order its ranks issue them, each starting
// once every rank of the group has issued it — so a step's slowest rank holds its group back at
// every unit, not once at the end as under DDP. Prefetch depth one: a rank issues the next unit's
// gather as it starts the current unit's compute. The root unit is gathered once and kept through
// backward; without reshard_after_forward every unit is. Across groups (HSDP): each unit's
// gradient shard is allreduced once every group has reduce-scattered it, on a stream of its own.
// The optimizer steps each rank's shard (1/S of the model's optimizer time) once its last
// collective is done. How long a collective takes is the engine's: the fast one's measured once
// per size, the full one's simulated where it runs. Internal to the engine.
#pragma once

#include <algorithm>
#include <functional>
#include <vector>

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

// Runs a group's collective ("all-gather" or "reduce-scatter") of unit u, issued by its last rank
// at `issued` (ms); returns its end, once the group's stream is free and it has run.
using RunCollective = std::function<double(const char* what, std::size_t unit, double issued)>;

// One step of one group: each rank's clock (`cursor`: its start, then its backward end) and its
// forward end, in ms; per unit, the latest end of its reduce-scatter over the groups so far
// (`reduced`).
struct GroupStep {
  const EngineSetup& s;
  std::function<const RankWork&(std::size_t)> work;
  RunCollective run;
  std::vector<double>& cursor;
  std::vector<double>& fwd_end;
  std::vector<double>& reduced;

  // Forward: unit u's gather was issued as the ranks began unit u − 1 (unit 0: at their start).
  void forward(Ranks r, std::vector<double>& begin) const {
    double issued = latest(cursor, r);
    for (std::size_t u = 0; u < s.units.size(); ++u) {
      const double gathered = run("all-gather", u, issued);
      for (std::size_t g = r.first; g < r.first + r.count; ++g) begin[g] = std::max(cursor[g], gathered);
      issued = latest(begin, r);
      for (std::size_t g = r.first; g < r.first + r.count; ++g)
        cursor[g] = begin[g] + work(g).fwd_ms * s.units[u].share;
    }
    for (std::size_t g = r.first; g < r.first + r.count; ++g) fwd_end[g] = cursor[g];
  }

  // Backward, units in reverse: a resharded unit is gathered again, issued as the ranks begin
  // the unit after it (the first: as they end forward), so on the stream it goes before that
  // unit's reduce-scatter, issued once the ranks have its gradients.
  void backward(Ranks r, std::vector<double>& begin) const {
    const std::size_t U = s.units.size();
    const auto regather = [&](std::size_t k, double when) {
      if (s.units[k].root || !s.reshard_after_forward) return 0.0;  // kept since forward
      return run("all-gather", k, when);
    };
    double gathered = regather(U - 1, latest(cursor, r));
    for (std::size_t k = U; k-- > 0;) {
      for (std::size_t g = r.first; g < r.first + r.count; ++g) begin[g] = std::max(cursor[g], gathered);
      if (k > 0) gathered = regather(k - 1, latest(begin, r));
      for (std::size_t g = r.first; g < r.first + r.count; ++g)
        cursor[g] = begin[g] + work(g).bwd_ms * s.units[k].share;
      reduced[k] = std::max(reduced[k], run("reduce-scatter", k, latest(cursor, r)));
    }
  }
};

// A rank's step once its group's collectives (and HSDP's replicas) end at `ready`: its timing
// row (ms, from its previous step's end, which becomes this one's) and, in the timeline, its
// compute spans.
inline RankTiming finish_rank(const EngineSetup& s, int step, int rank, const RankWork& w, double start, double fwd_end,
                              double bwd_end, double ready, double& prev_end, std::vector<Span>& spans) {
  const double S = s.shard_group > 0 ? s.shard_group : s.G;
  const double opt = w.opt_ms / S, end = ready + opt;  // the optimizer steps this rank's shard
  if (in_timeline(s, step)) {
    if (w.sched_ms > 0) spans.push_back({step, rank, false, "schedule", start - w.sched_ms, w.sched_ms});
    spans.push_back({step, rank, false, "forward (units)", start, fwd_end - start});
    spans.push_back({step, rank, false, "backward (units)", fwd_end, bwd_end - fwd_end});
    spans.push_back({step, rank, false, "optimizer (shard)", ready, opt});
  }
  const RankTiming timing{w.fwd_ms, w.bwd_ms, end - start - (w.fwd_ms + w.bwd_ms) - opt, opt, end - prev_end};
  prev_end = end;
  return timing;
}

}  // namespace ddpsim::engine_detail
