// The min-max tie-break: once the optimal maximum T* fixes each rank's cap (the most samples
// it can take at cost ≤ T*), `slack` = Σ caps − B samples must be handed back. Among the ways
// to do so, choose the one with the smallest population variance of the costs c_g(b_g).
//
// Exact method: variance = Q/G − (S/G)² with S = Σ c and Q = Σ c², a concave function of (S, Q),
// so its minimum over all allocations sits at a vertex of the lower convex hull of their (S, Q)
// points; those hulls compose rank by rank. A DP over ranks keeps, for every number of samples
// handed back so far (0..slack), only the hull vertices, then evaluates the variance at the
// final hull's vertices. Work ~ G·slack²·(hull size); `slack` is 0 to a few in practice, because
// T* is usually the B-th smallest curve value and only ties at T* add slack.
//
// Bounded fallback: with more than EXACT_RANKS ranks the DP runs only while it stays cheap —
// G·(slack+1)² ≤ DP_BUDGET transitions and at most POINT_BUDGET hull vertices kept. Otherwise
// (hundreds of ranks with many ties at T*) samples are handed back one at a time by the rank
// of highest current cost (lowest rank on ties): a leveling rule that keeps the maximum at T*
// but does not guarantee the least variance. Up to EXACT_RANKS ranks, which covers every size
// enumeration can check, the DP always runs.
#pragma once

#include <cstdint>
#include <vector>

namespace ddpsim {

class CostCurves;

class VarianceTieBreak {
 public:
  static constexpr int EXACT_RANKS = 8;
  static constexpr double DP_BUDGET = 4096;
  static constexpr std::size_t POINT_BUDGET = 1 << 15;

  // `batch` holds the caps on entry and the chosen b_g on return; 1 ≤ b_g ≤ cap_g, Σ b_g falls by slack.
  void reduce(const CostCurves& costs, double T, int slack, std::vector<int>& batch);

 private:
  struct Point {
    long double S, Q;          // Σ d and Σ d² over ranks so far, d = c − T (the shift keeps Q small)
    std::int32_t prev;         // index of the predecessor point in points_, -1 for the origin
    std::int32_t handed_back;  // samples this rank gives back
  };

  // False when it gave up on the budget (`batch` untouched).
  bool exact(const CostCurves& costs, double T, int slack, std::vector<int>& batch);
  void level(const CostCurves& costs, int slack, std::vector<int>& batch);
  // Appends the lower hull of candidates_ to points_.
  void append_lower_hull();

  std::vector<Point> points_;        // every kept hull vertex, layer by layer
  std::vector<std::int32_t> begin_;  // per (rank, handed back so far): first vertex in points_
  std::vector<std::int32_t> end_;
  std::vector<Point> candidates_;
};

}  // namespace ddpsim
