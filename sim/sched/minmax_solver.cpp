// The min-max allocation: the study's enumeration (the oracle) and the exact solver that
// replaces it at any G (T* by selection, caps by binary search, slack by VarianceTieBreak).
#include "sched/minmax_solver.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "common/error.hpp"

namespace ddpsim {

void CostCurves::reset(int ranks, int width) {
  ranks_ = ranks;
  whole_ = false;
  width_ = width;
  values_.assign(static_cast<std::size_t>(ranks) * static_cast<std::size_t>(width), 0.0);
  sizes_.assign(static_cast<std::size_t>(ranks), 0);
}

void check_minmax_feasible(const CostCurves& costs, int B) {
  const int G = costs.ranks();
  if (G < 1) throw InputError("minmax: infeasible: there are no ranks (G=" + std::to_string(G) + ")");
  long long offered = 0;
  for (int g = 0; g < G; ++g) {
    if (costs.size(g) < 1 || costs.size(g) > costs.width())
      throw InputError("minmax: infeasible: rank " + std::to_string(g) + " offers " + std::to_string(costs.size(g)) +
                       " samples; every rank must offer between 1 and K=" + std::to_string(costs.width()));
    offered += costs.size(g);
  }
  if (B < G)
    throw InputError("minmax: infeasible: global batch B=" + std::to_string(B) +
                     " is smaller than the number of ranks G=" + std::to_string(G));
  if (B > offered)
    throw InputError("minmax: infeasible: B=" + std::to_string(B) + " exceeds the " + std::to_string(offered) +
                     " samples the ranks can take (Σ min(K, b_max))");
}

namespace {

// Of each rank's sorted curve, how many values are < x (std::lower_bound's answer) or ≤ x
// (upper_bound's): out[g]. Binary searches without branches (their mispredictions were most of
// the cost), LANES ranks of equal curve length stepping together: one search alone waits on
// each load before the next, four side by side overlap them.
template <bool STRICT>
void count_below(const CostCurves& costs, double x, std::vector<int>& out) {
  constexpr int LANES = 4;
  const auto below = [x](double v) { return STRICT ? v < x : !(x < v); };
  const auto one = [&](int g) {
    const auto curve = costs.curve(g);
    const double* b = curve.data();
    for (std::size_t n = curve.size(); n > 1; n -= n / 2) b = below(b[n / 2 - 1]) ? b + n / 2 : b;
    out[static_cast<std::size_t>(g)] = static_cast<int>(b - curve.data()) + (below(*b) ? 1 : 0);
  };
  const int G = costs.ranks();
  out.resize(static_cast<std::size_t>(G));
  int g = 0;
  for (; g + LANES <= G; g += LANES) {
    std::size_t n = costs.curve(g).size();
    bool same = true;
    for (int j = 1; j < LANES; ++j) same &= costs.curve(g + j).size() == n;
    if (!same) {
      for (int j = 0; j < LANES; ++j) one(g + j);
      continue;
    }
    std::array<const double*, LANES> base;
    for (int j = 0; j < LANES; ++j) base[static_cast<std::size_t>(j)] = costs.curve(g + j).data();
    for (; n > 1; n -= n / 2)
      for (const double*& b : base) b = below(b[n / 2 - 1]) ? b + n / 2 : b;
    for (int j = 0; j < LANES; ++j) {
      const double* b = base[static_cast<std::size_t>(j)];
      out[static_cast<std::size_t>(g + j)] = static_cast<int>(b - costs.curve(g + j).data()) + (below(*b) ? 1 : 0);
    }
  }
  for (; g < G; ++g) one(g);
}

// T*'s bracket is counted over this many equal-width bins (see optimal_max).
constexpr int BINS = 1024;

// Bins are a non-decreasing function of the value, so equal values share one.
int bin_of(double v, double low, double scale) {
  return std::min(BINS - 1, static_cast<int>((v - low) * scale));
}

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
  for (int g = 0; g < costs.ranks(); ++g)
    scale = std::max({scale, std::abs(costs.curve(g).front()), std::abs(costs.curve(g).back())});
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
  const double T = optimal_max(costs, B);
  auto& caps = result_.batch;
  count_below<false>(costs, T, caps);
  long long slack = -B;
  for (int g = 0; g < G; ++g) slack += caps[static_cast<std::size_t>(g)];
  last_slack_ = static_cast<int>(slack);
  last_exact_ = tie_break_.reduce(costs, T, last_slack_, variance_tolerance(costs), caps);
  score(costs, result_);
  return result_;
}

template <class Bin>
void ExactMinMaxSolver::histogram(const CostCurves& costs, Bin bin) {
  bins_.assign(BINS, 0);
  for (int g = 0; g < costs.ranks(); ++g) {
    const auto curve = costs.curve(g);
    for (int k = first_[static_cast<std::size_t>(g)]; k < last_[static_cast<std::size_t>(g)]; ++k)
      ++bins_[static_cast<std::size_t>(bin(curve[static_cast<std::size_t>(k)]))];
  }
}

// Under a threshold T the ranks can take cap_g(T) = #{k : c_g(k) ≤ T} samples each, and
// (curves being non-decreasing) Σ_g cap_g(T) is the number of curve values ≤ T. So the least
// feasible T is the B-th smallest curve value, raised to max_g c_g(1) since every rank takes one.
// Only values in a bracket [low, high] known to hold T* are selected among:
//  - q = ⌊B/G⌋: below low = min over ranks of size ≥ q of c_g(q), every cap is ≤ q − 1, so
//    Σ caps ≤ G(q − 1) < B;
//  - q' = ⌈B/G⌉: at high = max_g c_g(min(q', size_g)) every cap is ≥ min(q', size_g), which is
//    feasible when those minima sum to ≥ B (else high = ∞).
double ExactMinMaxSolver::optimal_max(const CostCurves& costs, int B) {
  const int G = costs.ranks();
  const int q_low = B / G, q_high = (B + G - 1) / G;
  double floor = -INFINITY, low = INFINITY, high = -INFINITY;
  long long at_high = 0;
  for (int g = 0; g < G; ++g) {
    const auto curve = costs.curve(g);
    floor = std::max(floor, curve.front());
    if (costs.size(g) >= q_low) low = std::min(low, curve[static_cast<std::size_t>(q_low - 1)]);
    const int k = std::min(q_high, costs.size(g));
    high = std::max(high, curve[static_cast<std::size_t>(k - 1)]);
    at_high += k;
  }
  if (at_high < B) high = INFINITY;
  low = std::max(low, floor);  // below max_g c_g(1) nothing is feasible either

  // Rank g's values in [low, high] are [first_[g], last_[g]) of its curve (low ≤ high).
  count_below<true>(costs, low, first_);
  count_below<false>(costs, high, last_);
  long long below = 0;  // curve values < low
  for (int g = 0; g < G; ++g) below += first_[static_cast<std::size_t>(g)];
  // B values lie below max_g c_g(1): the floor decides.
  if (below >= B) return floor;
  long long rank = B - 1 - below;  // of T* among the values in [low, high]

  // A histogram of the bracket over equal-width bins finds the bin that holds T*, so that only
  // its values are selected among (at G = 1024 the bracket holds ~20,000 values, a bin ~100).
  // Whole costs (token counts) in a bracket of fewer than BINS whole numbers get a bin per
  // number: the bin that holds T* is then T* itself, with nothing left to select.
  const bool binned = std::isfinite(high) && high > low;
  int chosen = -1;
  double scale = 0;
  if (binned) {
    // Whole numbers below 2^52 in magnitude are exact, 1 apart, and so are their differences.
    const bool exact = costs.whole() && high - low < BINS && std::fabs(low) < 0x1p52 && std::fabs(high) < 0x1p52;
    if (exact) {
      histogram(costs, [low](double v) { return v - low; });  // a bin per whole number
    } else {
      scale = BINS / (high - low);
      histogram(costs, [low, scale](double v) { return bin_of(v, low, scale); });
    }
    chosen = 0;
    while (rank >= bins_[static_cast<std::size_t>(chosen)]) rank -= bins_[static_cast<std::size_t>(chosen++)];
    if (exact) return std::max(floor, low + chosen);
  }
  scratch_.clear();
  for (int g = 0; g < G; ++g) {
    const auto curve = costs.curve(g);
    for (int k = first_[static_cast<std::size_t>(g)]; k < last_[static_cast<std::size_t>(g)]; ++k) {
      const double v = curve[static_cast<std::size_t>(k)];
      if (!binned || bin_of(v, low, scale) == chosen) scratch_.push_back(v);
    }
  }
  const auto nth = scratch_.begin() + rank;
  std::nth_element(scratch_.begin(), nth, scratch_.end());
  return std::max(floor, *nth);
}

}  // namespace ddpsim
