#include "sched/minmax_tiebreak.hpp"

#include "sched/minmax_solver.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>

namespace ddpsim {

void VarianceTieBreak::reduce(const CostCurves& costs, double T, int slack, std::vector<int>& batch) {
  if (!exact(costs, T, slack, batch)) level(costs, slack, batch);
}

void VarianceTieBreak::append_lower_hull() {
  std::sort(candidates_.begin(), candidates_.end(),
            [](const Point& a, const Point& b) { return a.S != b.S ? a.S < b.S : a.Q < b.Q; });
  const auto first = points_.size();
  for (const Point& p : candidates_) {
    // Same S: the first has the smaller Q and the other cannot be a lower-hull vertex.
    if (points_.size() > first && points_.back().S == p.S) continue;
    while (points_.size() >= first + 2) {
      const Point& o = points_[points_.size() - 2];
      const Point& a = points_.back();
      const long double left = (a.S - o.S) * (p.Q - o.Q);
      const long double right = (a.Q - o.Q) * (p.S - o.S);
      // a stays only if it lies strictly below the chord o–p (relative tolerance for rounding).
      if (left - right > 1e-15L * (std::fabs(left) + std::fabs(right))) break;
      points_.pop_back();
    }
    points_.push_back(p);
  }
}

bool VarianceTieBreak::exact(const CostCurves& costs, double T, int slack, std::vector<int>& batch) {
  const int G = costs.ranks();
  const bool bounded = G > EXACT_RANKS;
  if (bounded && G * (slack + 1.0) * (slack + 1.0) > DP_BUDGET) return false;
  const auto states = static_cast<std::size_t>(slack + 1);
  points_.clear();
  begin_.assign(static_cast<std::size_t>(G) * states, 0);
  end_.assign(static_cast<std::size_t>(G) * states, 0);
  int handed_back_before = 0;  // the most samples ranks 0..g-1 can hand back
  for (int g = 0; g < G; ++g) {
    const auto curve = costs.curve(g);
    const int cap = batch[static_cast<std::size_t>(g)];
    for (int u = 0; u <= slack; ++u) {
      candidates_.clear();
      for (int r = std::max(0, u - handed_back_before); r <= std::min(u, cap - 1); ++r) {
        const long double d = static_cast<long double>(curve[static_cast<std::size_t>(cap - r - 1)]) - T;
        if (g == 0) {
          candidates_.push_back({d, d * d, -1, r});
          continue;
        }
        const std::size_t before = static_cast<std::size_t>(g - 1) * states + static_cast<std::size_t>(u - r);
        for (std::int32_t i = begin_[before]; i < end_[before]; ++i)
          candidates_.push_back(
              {points_[static_cast<std::size_t>(i)].S + d, points_[static_cast<std::size_t>(i)].Q + d * d, i, r});
      }
      const std::size_t state = static_cast<std::size_t>(g) * states + static_cast<std::size_t>(u);
      begin_[state] = static_cast<std::int32_t>(points_.size());
      append_lower_hull();
      end_[state] = static_cast<std::int32_t>(points_.size());
    }
    handed_back_before += cap - 1;
    if (bounded && points_.size() > POINT_BUDGET) return false;
  }

  const std::size_t last = static_cast<std::size_t>(G - 1) * states + static_cast<std::size_t>(slack);
  std::int32_t chosen = -1;
  long double best = 0;
  for (std::int32_t i = begin_[last]; i < end_[last]; ++i) {
    const Point& p = points_[static_cast<std::size_t>(i)];
    const long double variance = p.Q / G - (p.S / G) * (p.S / G);
    if (chosen < 0 || variance < best - 1e-12L * (std::fabs(best) + 1)) {
      chosen = i;
      best = variance;
    }
  }
  for (int g = G - 1; g >= 0; --g) {
    const Point& p = points_[static_cast<std::size_t>(chosen)];
    batch[static_cast<std::size_t>(g)] -= p.handed_back;
    chosen = p.prev;
  }
  return true;
}

void VarianceTieBreak::level(const CostCurves& costs, int slack, std::vector<int>& batch) {
  using Entry = std::pair<double, int>;  // (current cost, -rank): the top is the costliest, lowest rank
  std::priority_queue<Entry> heap;
  for (int g = 0; g < costs.ranks(); ++g)
    if (batch[static_cast<std::size_t>(g)] > 1)
      heap.emplace(costs.curve(g)[static_cast<std::size_t>(batch[static_cast<std::size_t>(g)] - 1)], -g);
  for (int left = slack; left > 0; --left) {
    const int g = -heap.top().second;
    heap.pop();
    const int b = --batch[static_cast<std::size_t>(g)];
    if (b > 1) heap.emplace(costs.curve(g)[static_cast<std::size_t>(b - 1)], -g);
  }
}

}  // namespace ddpsim
