#include "sched/minmax_solver.hpp"

#include <algorithm>
#include <cmath>
#include <queue>
#include <string>

#include "common/error.hpp"

namespace ddpsim {

void CostCurves::reset(int ranks, int width) {
  ranks_ = ranks;
  width_ = width;
  values_.assign(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(width), 0.0);
  sizes_.assign(static_cast<std::size_t>(ranks), 0);
}

void check_minmax_feasible(const CostCurves& costs, int B) {
  long long offered = 0;
  for (int g = 0; g < costs.ranks(); ++g) offered += costs.size(g);
  if (B < costs.ranks())
    throw InputError("minmax: infeasible: global batch B=" + std::to_string(B) +
                     " is smaller than G=" + std::to_string(costs.ranks()) + " (every rank takes at least one sample)");
  if (B > offered)
    throw InputError("minmax: infeasible: B=" + std::to_string(B) + " exceeds the " + std::to_string(offered) +
                     " samples the ranks can take (Σ min(K, b_max))");
}

namespace {

// Max and population variance of the chosen costs; variance in two passes for accuracy.
void score(const CostCurves& costs, MinMaxAllocation& a) {
  const int G = costs.ranks();
  double max = -INFINITY, sum = 0.0;
  for (int g = 0; g < G; ++g) {
    const double c = costs.curve(g)[static_cast<std::size_t>(a.batch[static_cast<std::size_t>(g)] - 1)];
    max = std::max(max, c);
    sum += c;
  }
  const double mean = sum / G;
  double sq = 0.0;
  for (int g = 0; g < G; ++g) {
    const double c = costs.curve(g)[static_cast<std::size_t>(a.batch[static_cast<std::size_t>(g)] - 1)];
    sq += (c - mean) * (c - mean);
  }
  a.max_cost = max;
  a.cost_variance = sq / G;
}

// Variances closer than this are equal: float noise must not decide a tie.
double variance_tolerance(const CostCurves& costs) {
  double scale = 0.0;
  for (int g = 0; g < costs.ranks(); ++g) scale = std::max(scale, std::abs(costs.curve(g).back()));
  return 1e-12 * scale * scale;
}

struct Enumeration {
  const CostCurves& costs;
  std::vector<int> capacity_after;  // Σ size(h) for h > g
  double tolerance;
  MinMaxAllocation current, best;
  bool found = false;

  void visit(int g, int left) {
    const int G = costs.ranks();
    if (g == G - 1) {
      if (left < 1 || left > costs.size(g)) return;
      current.batch[static_cast<std::size_t>(g)] = left;
      score(costs, current);
      // Enumeration runs in lexicographic order: only a strict improvement replaces the best.
      if (!found || current.max_cost < best.max_cost ||
          (current.max_cost == best.max_cost && current.cost_variance < best.cost_variance - tolerance)) {
        best = current;
        found = true;
      }
      return;
    }
    const int low = std::max(1, left - capacity_after[static_cast<std::size_t>(g)]);
    const int high = std::min(costs.size(g), left - (G - 1 - g));
    for (int b = low; b <= high; ++b) {
      current.batch[static_cast<std::size_t>(g)] = b;
      visit(g + 1, left - b);
    }
  }
};

}  // namespace

MinMaxAllocation solve_minmax_enumerate(const CostCurves& costs, int B) {
  check_minmax_feasible(costs, B);
  const int G = costs.ranks();
  Enumeration e{costs, std::vector<int>(static_cast<std::size_t>(G), 0), variance_tolerance(costs), {}, {}};
  for (int g = G - 2; g >= 0; --g)
    e.capacity_after[static_cast<std::size_t>(g)] =
        e.capacity_after[static_cast<std::size_t>(g + 1)] + costs.size(g + 1);
  e.current.batch.assign(static_cast<std::size_t>(G), 1);
  e.visit(0, B);
  return e.best;
}

const MinMaxAllocation& ExactMinMaxSolver::solve(const CostCurves& costs, int B) {
  check_minmax_feasible(costs, B);
  const int G = costs.ranks();
  // T* = max(B-th smallest curve value, max_g c_g(1)): under a threshold T the ranks can take
  // as many samples as there are curve values ≤ T, and every rank needs one.
  scratch_.clear();
  double floor = -INFINITY;
  for (int g = 0; g < G; ++g) {
    const auto curve = costs.curve(g);
    scratch_.insert(scratch_.end(), curve.begin(), curve.end());
    floor = std::max(floor, curve.front());
  }
  std::nth_element(scratch_.begin(), scratch_.begin() + (B - 1), scratch_.end());
  const double T = std::max(floor, scratch_[static_cast<std::size_t>(B - 1)]);

  auto& caps = result_.batch;
  caps.resize(static_cast<std::size_t>(G));
  long long slack = -B;
  for (int g = 0; g < G; ++g) {
    const auto curve = costs.curve(g);
    caps[static_cast<std::size_t>(g)] =
        static_cast<int>(std::upper_bound(curve.begin(), curve.end(), T) - curve.begin());
    slack += caps[static_cast<std::size_t>(g)];
  }
  if (slack > 0) tie_break_.reduce(costs, T, static_cast<int>(slack), caps);
  score(costs, result_);
  return result_;
}

}  // namespace ddpsim
