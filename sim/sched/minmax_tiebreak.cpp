// Hands back the slack left at T* by the exact lower-hull DP, or by greedy descent where the DP
// would be too costly (see minmax_tiebreak.hpp for the rule and why it is exact).
#include "sched/minmax_tiebreak.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "sched/minmax_solver.hpp"

namespace ddpsim {

namespace {

std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

}  // namespace

bool VarianceTieBreak::reduce(const CostCurves& costs, double T, int slack, double tolerance, std::vector<int>& batch) {
  if (slack <= 0) return true;
  if (exact(costs, T, slack, tolerance, batch)) return true;
  descend(costs, T, slack, batch);
  return false;
}

void VarianceTieBreak::append_lower_hull(long double slope_low, long double slope_high) {
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
  if (points_.size() == first) return;
  // Keep the vertices whose supporting slopes meet [slope_low, slope_high]: slopes rise along
  // a lower hull, so they form one run.
  auto slope = [&](std::size_t i) { return (points_[i + 1].Q - points_[i].Q) / (points_[i + 1].S - points_[i].S); };
  std::size_t keep_first = first, keep_last = points_.size() - 1;
  while (keep_first < keep_last && slope(keep_first) < slope_low) ++keep_first;
  while (keep_last > keep_first && slope(keep_last - 1) > slope_high) --keep_last;
  std::copy(points_.begin() + static_cast<std::ptrdiff_t>(keep_first),
            points_.begin() + static_cast<std::ptrdiff_t>(keep_last + 1),
            points_.begin() + static_cast<std::ptrdiff_t>(first));
  points_.resize(first + (keep_last - keep_first + 1));
}

void VarianceTieBreak::trace(std::int32_t i, const std::vector<int>& batch, std::vector<int>& out) const {
  out = batch;
  for (int g = static_cast<int>(batch.size()) - 1; g >= 0; --g) {
    const Point& p = points_[at(i)];
    out[at(g)] -= p.handed_back;
    i = p.prev;
  }
}

bool VarianceTieBreak::exact(const CostCurves& costs, double T, int slack, double tolerance, std::vector<int>& batch) {
  const int G = costs.ranks();
  const bool bounded = G > EXACT_RANKS;
  // A rank that hands back nothing still moves every state: G·(slack + 1) candidates at least.
  if (bounded && G * (slack + 1.0) > CANDIDATE_BUDGET) return false;
  auto d = [&](int g, int r) { return static_cast<long double>(costs.curve(g)[at(batch[at(g)] - r - 1)]) - T; };
  // The slope window: the least-variance allocation A minimises Q − 2λS at λ = mean(A), hence so
  // does its prefix among the prefixes of its DP state; mean(A) lies between the mean at the caps
  // (handing back only lowers costs) and that minus the s largest single-rank drops over G.
  handback_after_.resize(at(G));
  drops_.resize(at(G));
  long double S_caps = 0, largest = 0;
  for (int g = G - 1, after = 0; g >= 0; --g) {
    handback_after_[at(g)] = after;
    after += batch[at(g)] - 1;
    S_caps += d(g, 0);
    largest = std::max({largest, std::fabs(d(g, 0)), std::fabs(d(g, batch[at(g)] - 1))});
    drops_[at(g)] = d(g, 0) - d(g, std::min(slack, batch[at(g)] - 1));
  }
  const auto top = drops_.begin() + std::min<std::ptrdiff_t>(slack, G);
  std::nth_element(drops_.begin(), top, drops_.end(), std::greater<>());
  long double drop = 0;
  for (auto it = drops_.begin(); it != top; ++it) drop += *it;
  const long double margin = 1e-6L * (largest + 1);
  const long double slope_low = 2 * (S_caps - drop) / G - margin, slope_high = 2 * S_caps / G + margin;

  const auto states = at(slack + 1);
  points_.clear();
  begin_.assign(at(G) * states, 0);
  end_.assign(at(G) * states, 0);
  double candidates = 0;
  int handback_before = 0;  // Σ (cap_h − 1) over ranks h < g
  for (int g = 0; g < G; ++g) {
    const int cap = batch[at(g)];
    // Only states from which the remaining ranks can still reach `slack` in total.
    const int u_low = std::max(0, slack - handback_after_[at(g)]);
    const int u_high = std::min(slack, handback_before + cap - 1);
    for (int u = u_low; u <= u_high; ++u) {
      candidates_.clear();
      for (int r = std::max(0, u - handback_before); r <= std::min(u, cap - 1); ++r) {
        const long double x = d(g, r);
        if (g == 0) {
          candidates_.push_back({x, x * x, -1, r});
          continue;
        }
        const std::size_t before = at(g - 1) * states + at(u - r);
        for (std::int32_t i = begin_[before]; i < end_[before]; ++i)
          candidates_.push_back({points_[at(i)].S + x, points_[at(i)].Q + x * x, i, r});
      }
      candidates += static_cast<double>(candidates_.size());
      const std::size_t state = at(g) * states + at(u);
      begin_[state] = static_cast<std::int32_t>(points_.size());
      append_lower_hull(slope_low, slope_high);
      end_[state] = static_cast<std::int32_t>(points_.size());
    }
    handback_before += cap - 1;
    // Work per rank grows with the hulls, so this projection underestimates: give up early.
    if (bounded && candidates * G / (g + 1) > CANDIDATE_BUDGET) return false;
  }

  // Least variance among the final vertices; within `tolerance`, the lexicographically smallest.
  const std::size_t last = at(G - 1) * states + at(slack);
  auto variance = [&](std::int32_t i) {
    const Point& p = points_[at(i)];
    return static_cast<double>(p.Q / G - (p.S / G) * (p.S / G));
  };
  double least = INFINITY;
  for (std::int32_t i = begin_[last]; i < end_[last]; ++i) least = std::min(least, variance(i));
  bool found = false;
  for (std::int32_t i = begin_[last]; i < end_[last]; ++i) {
    if (variance(i) > least + tolerance) continue;
    trace(i, batch, trial_);
    if (!found || trial_ < chosen_) std::swap(trial_, chosen_);
    found = true;
  }
  std::swap(batch, chosen_);
  return true;
}

void VarianceTieBreak::descend(const CostCurves& costs, double T, int slack, std::vector<int>& batch) {
  const int G = costs.ranks();
  auto d = [&](int g, int b) { return costs.curve(g)[at(b - 1)] - T; };  // shifted as in exact()
  // Handing back one sample of rank g moves its cost by δ = c' − c ≤ 0 and G × variance by
  // δ · (c + c' − 2·mean − δ/G). Per rank, the terms that do not involve the mean are kept in
  // flat arrays and renewed only for the rank that hands back: O(slack·G) stays, but each pass is
  // a tight loop (at G = 1024 it was a third of a decision).
  moves_.resize(at(G));
  auto renew = [&](int g) {
    const int b = batch[at(g)];
    Move& m = moves_[at(g)];
    m.open = b > 1;
    if (!m.open) return;
    const double c = d(g, b), c_next = d(g, b - 1);
    m.delta = c_next - c;
    m.sum = c + c_next;
    m.delta_over_G = m.delta / G;
  };
  double S = 0;
  for (int g = 0; g < G; ++g) {
    S += d(g, batch[at(g)]);
    renew(g);
  }
  for (int left = slack; left > 0; --left) {
    const double twice_mean = 2 * (S / G);
    int best = -1;
    double best_change = 0;
    for (int g = 0; g < G; ++g) {
      const Move& m = moves_[at(g)];
      if (!m.open) continue;
      const double change = m.delta * (m.sum - twice_mean - m.delta_over_G);
      if (best < 0 || change < best_change) {
        best = g;
        best_change = change;
      }
    }
    S += moves_[at(best)].delta;
    --batch[at(best)];
    renew(best);
  }
}

}  // namespace ddpsim
