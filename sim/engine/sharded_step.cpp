// The fast engine's sharded step: the schedule of sharded_schedule.hpp with each collective the
// time SimGrid gave it once on the idle platform (FastEngine's constructor), a group's stream a
// clock that each collective moves on.
#include <algorithm>

#include "engine/engine_detail.hpp"
#include "engine/sharded_schedule.hpp"

namespace ddpsim {

using namespace engine_detail;

void FastEngine::advance_sharded(const PolicyWork& pw, PolicyTimes& out, const std::function<void(int)>& progress) {
  const int G = s_.G;
  const auto Gs = static_cast<std::size_t>(G);
  const std::size_t S = s_.shard_group > 0 ? static_cast<std::size_t>(s_.shard_group) : Gs, R = Gs / S;
  const std::size_t U = s_.units.size();
  std::vector<double> cursor(Gs), begin(Gs), start(Gs), marks, stretched(2 * Gs), reduced, stream(R);
  const std::size_t first_row = out.timing.size();
  out.timing.resize(first_row + pw.work.size());
  int reported = 0;
  for (int i = 0; i < pw.steps; ++i, ++step_) {
    const int t = step_;
    auto work = [&](std::size_t g) -> const RankWork& { return pw.work[at(i, G, static_cast<int>(g))]; };
    const auto span = [&](const std::string& what, double from, double to, Ranks r) {
      if (in_timeline(s_, t))
        for (std::size_t g = r.first; g < r.first + r.count; ++g)
          out.spans.push_back({t, static_cast<int>(g), true, what, from, to - from});
    };
    const double sync = pw.synchronized ? *std::max_element(prev_end_.begin(), prev_end_.end()) : 0.0;
    for (std::size_t g = 0; g < Gs; ++g) cursor[g] = start[g] = std::max(prev_end_[g], sync) + work(g).sched_ms;
    const std::size_t M = work(0).micro_batches(), synced = synced_micro_batches(s_, M);
    marks.resize(Gs * 2 * M);
    reduced.assign(synced * U, 0.0);
    std::fill(stretched.begin(), stretched.end(), 0.0);
    for (std::size_t r = 0; r < R; ++r) {
      const Ranks ranks{r * S, S};
      const auto run = [&](const char* what, std::size_t u, double issued, const Slowed& slowed) {
        const double from = std::max(stream[r], issued);
        stream[r] = slowed(from, from + gather_ms_.at(s_.units[u].bytes));  // a reduce-scatter moves what a gather does
        span(std::string(what) + " unit " + std::to_string(u), from, stream[r], ranks);
        return Interval{from, stream[r]};
      };
      GroupStep{s_, t, work, run, cursor, marks, stretched, reduced}(ranks, begin);
    }
    double replicas = 0;  // HSDP: each unit's shard allreduced across the groups, in backward's order
    if (R > 1)
      for (std::size_t m = 0; m < synced; ++m)
        for (std::size_t k = U; k-- > 0;) {
          const double from = std::max(replicas, reduced[m * U + k]);
          replicas = from + replica_ms_.at(s_.units[k].bytes / static_cast<double>(S));
          span(across_groups_name(k), from, replicas, {0, Gs});
        }
    for (std::size_t g = 0; g < Gs; ++g) {
      out.timing[first_row + at(i, G, static_cast<int>(g))] =
          finish_rank(s_, t, static_cast<int>(g), work(g), start[g], &marks[g * 2 * M], &stretched[g * 2],
                      std::max(stream[g / S], replicas), prev_end_[g], out.spans);
    }
    if (progress && ((i + 1) % 256 == 0 || i + 1 == pw.steps)) {
      progress(i + 1 - reported);
      reported = i + 1;
    }
  }
}

}  // namespace ddpsim
