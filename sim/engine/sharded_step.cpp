// The fast engine's FSDP step (full sharding): each unit's all-gather before its forward and
// its backward, its reduce-scatter after its backward, on one communication stream in the order
// the ranks issue them, each starting once every rank has issued it — so a step's slowest rank
// holds the others back at every unit, not once at the end as under DDP. Prefetch depth one:
// a rank issues the next unit's gather as it starts the current unit's compute. The root unit
// is gathered once and kept through backward. The optimizer steps each rank's shard (1/G of
// the model's optimizer time) once the last reduce-scatter is done. Collective times are
// SimGrid's, measured once per unit size on the idle platform (FastEngine's constructor).
#include <algorithm>

#include "engine/engine_detail.hpp"

namespace ddpsim {

using namespace engine_detail;

namespace {

// One collective on the stream: it starts once the stream is free and the last rank has
// issued it; returns its end and moves the stream's clock there.
double collective(double& stream_free, double issued, double duration) {
  stream_free = std::max(stream_free, issued) + duration;
  return stream_free;
}

double latest(const std::vector<double>& times) {
  return *std::max_element(times.begin(), times.end());
}

}  // namespace

void FastEngine::advance_sharded(const PolicyWork& pw, PolicyTimes& out, const std::function<void(int)>& progress) {
  const int G = s_.G;
  const auto Gs = static_cast<std::size_t>(G);
  const std::size_t U = s_.units.size();
  std::vector<double> cursor(Gs), begin(Gs), start(Gs), fwd_end(Gs), gathered(U);
  const std::size_t first_row = out.timing.size();
  out.timing.resize(first_row + pw.work.size());
  double stream = 0;
  int reported = 0;
  const auto gather = [&](std::size_t u) { return gather_ms_.at(s_.units[u].bytes); };
  for (int i = 0; i < pw.steps; ++i, ++step_) {
    const int t = step_;
    auto work = [&](std::size_t g) -> const RankWork& { return pw.work[at(i, G, static_cast<int>(g))]; };
    const double sync = pw.synchronized ? latest(prev_end_) : 0.0;
    for (std::size_t g = 0; g < Gs; ++g) cursor[g] = start[g] = std::max(prev_end_[g], sync) + work(g).sched_ms;
    const auto span = [&](const char* what, std::size_t u, double from, double to) {
      if (in_timeline(s_, t))
        for (int g = 0; g < G; ++g)
          out.spans.push_back({t, g, true, std::string(what) + " unit " + std::to_string(u), from, to - from});
    };
    // Forward: unit u's gather was issued as the ranks began unit u − 1 (unit 0: at their start).
    double issued = latest(cursor);
    for (std::size_t u = 0; u < U; ++u) {
      const double from = std::max(stream, issued);
      gathered[u] = collective(stream, issued, gather(u));
      span("all-gather", u, from, gathered[u]);
      for (std::size_t g = 0; g < Gs; ++g) begin[g] = std::max(cursor[g], gathered[u]);
      issued = latest(begin);
      for (std::size_t g = 0; g < Gs; ++g) cursor[g] = begin[g] + work(g).fwd_ms * s_.units[u].share;
    }
    fwd_end = cursor;
    // Backward, units in reverse: a resharded unit is gathered again, issued as the ranks begin
    // the unit after it (the first: as they end forward), so on the stream it goes before that
    // unit's reduce-scatter, issued once the ranks have its gradients.
    const auto regather = [&](std::size_t k, double when) {
      if (s_.units[k].root) return 0.0;  // kept since forward
      const double from = std::max(stream, when), end = collective(stream, when, gather(k));
      span("all-gather", k, from, end);
      return end;
    };
    gathered[U - 1] = regather(U - 1, latest(cursor));
    for (std::size_t k = U; k-- > 0;) {
      for (std::size_t g = 0; g < Gs; ++g) begin[g] = std::max(cursor[g], gathered[k]);
      if (k > 0) gathered[k - 1] = regather(k - 1, latest(begin));
      for (std::size_t g = 0; g < Gs; ++g) cursor[g] = begin[g] + work(g).bwd_ms * s_.units[k].share;
      const double from = std::max(stream, latest(cursor));
      span("reduce-scatter", k, from, collective(stream, latest(cursor), gather(k)));
    }
    for (std::size_t g = 0; g < Gs; ++g) {
      const RankWork& w = work(g);
      const double opt = w.opt_ms / G, end = stream + opt;  // the optimizer steps this rank's shard
      const double compute = w.fwd_ms + w.bwd_ms;
      out.timing[first_row + at(i, G, static_cast<int>(g))] = {w.fwd_ms, w.bwd_ms, end - start[g] - compute - opt, opt,
                                                               end - prev_end_[g]};
      if (in_timeline(s_, t)) {
        const int r = static_cast<int>(g);
        if (w.sched_ms > 0) out.spans.push_back({t, r, false, "schedule", start[g] - w.sched_ms, w.sched_ms});
        out.spans.push_back({t, r, false, "forward (units)", start[g], fwd_end[g] - start[g]});
        out.spans.push_back({t, r, false, "backward (units)", fwd_end[g], cursor[g] - fwd_end[g]});
        out.spans.push_back({t, r, false, "optimizer (shard)", stream, opt});
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
