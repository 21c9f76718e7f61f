// The fast engine's sharded step (FSDP's full sharding, and HSDP's: full sharding inside groups
// of consecutive ranks, replicated across the groups). Inside a group: each unit's all-gather
// before its forward and its backward, its reduce-scatter after its backward, on the group's one
// communication stream in the order its ranks issue them, each starting once every rank of the
// group has issued it — so a step's slowest rank holds its group back at every unit, not once at
// the end as under DDP. Prefetch depth one: a rank issues the next unit's gather as it starts
// the current unit's compute. The root unit is gathered once and kept through backward; without
// reshard_after_forward every unit is. Across groups (HSDP): each unit's gradient shard is
// allreduced once every group has reduce-scattered it, on a stream of its own (the groups' rings
// cross the nodes, the gathers stay inside them). The optimizer steps each rank's shard (1/S of
// the model's optimizer time) once its last collective is done. Collective times are SimGrid's,
// measured once per unit size on the idle platform (FastEngine's constructor).
#include <algorithm>

#include "engine/engine_detail.hpp"

namespace ddpsim {

using namespace engine_detail;

namespace {

// One collective on a stream: it starts once the stream is free and the last rank has issued
// it; returns its end and moves the stream's clock there.
double collective(double& stream_free, double issued, double duration) {
  stream_free = std::max(stream_free, issued) + duration;
  return stream_free;
}

// A shard group's ranks, [first, first + count).
struct Ranks {
  std::size_t first = 0, count = 0;
};

double latest(const std::vector<double>& times, Ranks r) {
  const auto from = times.begin() + static_cast<std::ptrdiff_t>(r.first);
  return *std::max_element(from, from + static_cast<std::ptrdiff_t>(r.count));
}

// What one step of one group needs and leaves: each rank's clock (`cursor`: its start, then its
// backward end), its forward end, the group's stream, and per unit the latest end of its
// reduce-scatter over the groups so far (`reduced`).
struct GroupStep {
  const EngineSetup& s;
  const std::map<double, double>& gather_ms;
  std::function<const RankWork&(std::size_t)> work;
  std::function<void(const char*, std::size_t, double, double, Ranks)> span;
  std::vector<double>& cursor;
  std::vector<double>& fwd_end;
  std::vector<double>& reduced;

  double gather(std::size_t u) const { return gather_ms.at(s.units[u].bytes); }

  // Forward: unit u's gather was issued as the ranks began unit u − 1 (unit 0: at their start).
  void forward(Ranks r, double& stream, std::vector<double>& begin) const {
    double issued = latest(cursor, r);
    for (std::size_t u = 0; u < s.units.size(); ++u) {
      const double from = std::max(stream, issued), gathered = collective(stream, issued, gather(u));
      span("all-gather", u, from, gathered, r);
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
  void backward(Ranks r, double& stream, std::vector<double>& begin) const {
    const std::size_t U = s.units.size();
    const auto regather = [&](std::size_t k, double when) {
      if (s.units[k].root || !s.reshard_after_forward) return 0.0;  // kept since forward
      const double from = std::max(stream, when), end = collective(stream, when, gather(k));
      span("all-gather", k, from, end, r);
      return end;
    };
    double gathered = regather(U - 1, latest(cursor, r));
    for (std::size_t k = U; k-- > 0;) {
      for (std::size_t g = r.first; g < r.first + r.count; ++g) begin[g] = std::max(cursor[g], gathered);
      if (k > 0) gathered = regather(k - 1, latest(begin, r));
      for (std::size_t g = r.first; g < r.first + r.count; ++g)
        cursor[g] = begin[g] + work(g).bwd_ms * s.units[k].share;
      const double from = std::max(stream, latest(cursor, r)), end = collective(stream, latest(cursor, r), gather(k));
      span("reduce-scatter", k, from, end, r);
      reduced[k] = std::max(reduced[k], end);
    }
  }
};

}  // namespace

void FastEngine::advance_sharded(const PolicyWork& pw, PolicyTimes& out, const std::function<void(int)>& progress) {
  const int G = s_.G;
  const auto Gs = static_cast<std::size_t>(G);
  const std::size_t S = s_.shard_group > 0 ? static_cast<std::size_t>(s_.shard_group) : Gs, R = Gs / S;
  const std::size_t U = s_.units.size();
  std::vector<double> cursor(Gs), begin(Gs), start(Gs), fwd_end(Gs), reduced(U), stream(R);
  const std::size_t first_row = out.timing.size();
  out.timing.resize(first_row + pw.work.size());
  int reported = 0;
  for (int i = 0; i < pw.steps; ++i, ++step_) {
    const int t = step_;
    auto work = [&](std::size_t g) -> const RankWork& { return pw.work[at(i, G, static_cast<int>(g))]; };
    const auto span = [&](const char* what, std::size_t u, double from, double to, Ranks r) {
      if (in_timeline(s_, t))
        for (std::size_t g = r.first; g < r.first + r.count; ++g)
          out.spans.push_back(
              {t, static_cast<int>(g), true, std::string(what) + " unit " + std::to_string(u), from, to - from});
    };
    const double sync = pw.synchronized ? *std::max_element(prev_end_.begin(), prev_end_.end()) : 0.0;
    for (std::size_t g = 0; g < Gs; ++g) cursor[g] = start[g] = std::max(prev_end_[g], sync) + work(g).sched_ms;
    std::fill(reduced.begin(), reduced.end(), 0.0);
    const GroupStep group{s_, gather_ms_, work, span, cursor, fwd_end, reduced};
    for (std::size_t r = 0; r < R; ++r) {
      group.forward({r * S, S}, stream[r], begin);
      group.backward({r * S, S}, stream[r], begin);
    }
    double replicas = 0;  // HSDP: each unit's shard allreduced across the groups, in backward's order
    if (R > 1)
      for (std::size_t k = U; k-- > 0;) {
        const double from = std::max(replicas, reduced[k]);
        replicas = from + replica_ms_.at(s_.units[k].bytes / static_cast<double>(S));
        span("allreduce across groups", k, from, replicas, {0, Gs});
      }
    for (std::size_t g = 0; g < Gs; ++g) {
      const RankWork& w = work(g);
      const double ready = std::max(stream[g / S], replicas);
      const double opt = w.opt_ms / static_cast<double>(S), end = ready + opt;  // the optimizer steps this rank's shard
      const double compute = w.fwd_ms + w.bwd_ms;
      out.timing[first_row + at(i, G, static_cast<int>(g))] = {w.fwd_ms, w.bwd_ms, end - start[g] - compute - opt, opt,
                                                               end - prev_end_[g]};
      if (in_timeline(s_, t)) {
        const int r = static_cast<int>(g);
        if (w.sched_ms > 0) out.spans.push_back({t, r, false, "schedule", start[g] - w.sched_ms, w.sched_ms});
        out.spans.push_back({t, r, false, "forward (units)", start[g], fwd_end[g] - start[g]});
        out.spans.push_back({t, r, false, "backward (units)", fwd_end[g], cursor[g] - fwd_end[g]});
        out.spans.push_back({t, r, false, "optimizer (shard)", ready, opt});
      }
      prev_end_[g] = end;
    }
    if (progress && ((i + 1) % 256 == 0 || i + 1 == pw.steps)) {
      progress(i + 1 - reported);
      reported = i + 1;
    }
  }
}

}  // namespace ddpsim
