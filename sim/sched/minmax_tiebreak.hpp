// The min-max tie-break: once the optimal maximum T* fixes each rank's cap (the most samples
// it can take at cost ≤ T*), `slack` = Σ caps − B samples must be handed back, each rank
// keeping at least one. Among the ways to do so, choose the one with the smallest population
// variance of the costs c_g(b_g); the maximum stays T* whichever way is chosen.
//
// Exact rule. Variance = Q/G − (S/G)² with S = Σ c and Q = Σ c², a concave function of (S, Q)
// that grows with Q, so its minimum over all allocations sits at a vertex of the lower convex
// hull of their (S, Q) points. Those hulls compose rank by rank: the points reachable after
// ranks 0..g with u samples handed back are the union over r of (points after ranks 0..g-1
// with u − r handed back) + (c, c²) at c = c_g(cap_g − r), and a union of translates has its
// lower-hull vertices among the translated vertices. So a DP over ranks keeps, per number of
// samples handed back so far (0..slack), only hull vertices with back-pointers, and evaluates
// the variance at the final hull's vertices. Work ~ G·slack²·(hull size)/2.
// Pruning, still exact: the least-variance allocation A also minimises the linear Q − 2λS at
// λ = mean(A) (G·var(P) = Q_P − 2λS_P + (S_P − S_A)²/G − S_A²/G ≥ G·var(A) for every P), and so
// does its prefix among the prefixes of its DP state. mean(A) lies in a window known up front
// (between the mean at the caps, and that minus the `slack` largest single-rank drops, over G),
// so each state keeps only the vertices whose supporting slopes meet 2·window — one or two at
// large G, where the window is narrow.
// Numerics: costs enter as d = c − T* (variance is shift-invariant; |d| is at most the spread of
// the costs), in long double. Ties: variances within `tolerance` are equal, and among tied final vertices the
// lexicographically smallest batch wins, like the enumeration; an allocation that ties only as a
// non-vertex (collinear) point or outside the window is not seen, so such ties may resolve
// differently (11 of 1,166 exact ties in the test's random instances).
//
// Bounded fallback. With more than EXACT_RANKS ranks the DP runs only while it stays cheap: at
// most CANDIDATE_BUDGET hull candidates, checked up front (G·(slack+1), a lower bound) and after
// every rank (a projection). Otherwise samples are handed back one at a time by the rank whose
// hand-back lowers the variance most (lowest rank on ties): a greedy descent that keeps the
// maximum at T* but may miss the least variance (on random instances at G = 9..128 it missed in
// about a fifth of cases, by 2–10 % of the variance). Up to EXACT_RANKS ranks, which covers every
// size the enumeration can check, the DP always runs. At G = 1024, B = 16384, K = 64 slack is
// 0..170 (median ~40) on token curves and the fallback decides about 95 % of steps.
#pragma once

#include <cstdint>
#include <vector>

namespace ddpsim {

class CostCurves;

class VarianceTieBreak {
 public:
  static constexpr int EXACT_RANKS = 8;
  static constexpr double CANDIDATE_BUDGET = 1 << 13;

  // `batch` holds the caps on entry (c_g(cap_g) ≤ T for all g, Σ caps − slack ≥ G) and the
  // chosen b_g on return: 1 ≤ b_g ≤ cap_g, Σ b_g = Σ caps − slack. True when the exact DP
  // decided, false when the greedy fallback did.
  bool reduce(const CostCurves& costs, double T, int slack, double tolerance, std::vector<int>& batch);

 private:
  struct Point {
    long double S, Q;          // Σ d and Σ d² over ranks so far, d = c − T
    std::int32_t prev;         // index of the predecessor point in points_, -1 before rank 0
    std::int32_t handed_back;  // samples this rank gives back
  };

  // False when it gave up on the budget (`batch` untouched).
  bool exact(const CostCurves& costs, double T, int slack, double tolerance, std::vector<int>& batch);
  void descend(const CostCurves& costs, double T, int slack, std::vector<int>& batch);
  // Appends to points_ the vertices of the lower hull of candidates_ whose supporting slopes
  // (dQ/dS) meet [slope_low, slope_high].
  void append_lower_hull(long double slope_low, long double slope_high);
  // The batch that final vertex `i` stands for, written to `out` (caps in `batch`).
  void trace(std::int32_t i, const std::vector<int>& batch, std::vector<int>& out) const;

  std::vector<Point> points_;        // every kept hull vertex, layer by layer
  std::vector<std::int32_t> begin_;  // per (rank, handed back so far): first vertex in points_
  std::vector<std::int32_t> end_;
  std::vector<Point> candidates_;
  std::vector<int> handback_after_;  // Σ (cap_h − 1) over ranks h > g
  std::vector<long double> drops_;   // per rank: d(cap) − d(cap − min(slack, cap − 1))
  std::vector<int> trial_, chosen_;  // batches of tied final vertices
  struct Move {  // descend(): what handing back one more sample of a rank would change
    double delta = 0, sum = 0, delta_over_G = 0;
    bool open = false;  // the rank holds more than one sample
  };
  std::vector<Move> moves_;
};

}  // namespace ddpsim
