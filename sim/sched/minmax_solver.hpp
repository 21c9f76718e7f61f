// The min-max allocation of docs/method.md as a pure function of per-rank cost curves:
// choose b_g in [1, size_g] with Σ b_g = B minimising max_g c_g(b_g), ties broken by the
// smallest population variance of the costs c_g(b_g).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "sched/minmax_tiebreak.hpp"

namespace ddpsim {

// c_g(k) for k = 1..size(g) of every rank g, flattened with a fixed row width so one
// allocation serves every step. Each curve must be non-decreasing in k; size(g) ≥ 1 is
// min(K, b_g^max).
class CostCurves {
 public:
  void reset(int ranks, int width);
  int ranks() const { return ranks_; }
  int width() const { return width_; }
  // Writable row of `width()` entries; entry k-1 holds c_g(k).
  std::span<double> row(int g) {
    return {values_.data() + static_cast<std::size_t>(g) * width_, static_cast<std::size_t>(width_)};
  }
  void set_size(int g, int size) { sizes_[static_cast<std::size_t>(g)] = size; }
  int size(int g) const { return sizes_[static_cast<std::size_t>(g)]; }
  std::span<const double> curve(int g) const {
    return {values_.data() + static_cast<std::size_t>(g) * width_, static_cast<std::size_t>(size(g))};
  }
  // A promise, by whoever fills the rows, that every value is a whole number (token counts):
  // the solver then counts T*'s bracket a bin per number without checking each value. False
  // after reset().
  void set_whole(bool whole) { whole_ = whole; }
  bool whole() const { return whole_; }

 private:
  int ranks_ = 0;
  bool whole_ = false;
  int width_ = 0;
  std::vector<double> values_;
  std::vector<int> sizes_;
};

struct MinMaxAllocation {
  std::vector<int> batch;      // b_g per rank
  double max_cost = 0.0;       // max_g c_g(b_g)
  double cost_variance = 0.0;  // population variance of c_g(b_g)
};

// Throws InputError naming the violated bound when G < 1, a rank's size is outside 1..width(),
// B < G or B > Σ size(g).
void check_minmax_feasible(const CostCurves& costs, int B);

// The study's reference: tries every allocation. Exponential in G; only for small inputs.
// Among allocations of equal maximum and variance it keeps the lexicographically smallest.
MinMaxAllocation solve_minmax_enumerate(const CostCurves& costs, int B);

// Same optimum at any G, fast: T* = max(B-th smallest of all curve values, max_g c_g(1)) by one
// selection over a bracket of the values, caps by binary search, then VarianceTieBreak hands
// the surplus back (the exact variance rule up to 8 ranks always, beyond that while it is cheap,
// else a greedy descent; see minmax_tiebreak.hpp). Keeps scratch space between calls, so reuse
// one instance. A whole minmax decision (curves, solve, take; `ddpsim bench`, 2-core x86,
// Release, token curves) takes ~1.5 µs at (G, B, K) = (4, 48, 64), ~0.16 ms at (1024, 16384, 64).
class ExactMinMaxSolver {
 public:
  const MinMaxAllocation& solve(const CostCurves& costs, int B);
  // Of the last solve: the samples handed back below the caps at T*, and whether the exact
  // variance rule decided them (false: the greedy fallback of minmax_tiebreak.hpp did).
  int last_slack() const { return last_slack_; }
  bool last_exact() const { return last_exact_; }

 private:
  // T* = max(B-th smallest of all curve values, max_g c_g(1)).
  double optimal_max(const CostCurves& costs, int B);

  MinMaxAllocation result_;
  int last_slack_ = 0;
  bool last_exact_ = true;
  std::vector<double> scratch_;
  std::vector<int> first_, last_;  // per rank: [first, last) of its values in the bracket
  std::vector<long long> bins_;
  // Counts the bracket's values (first_, last_) into bins_, value v into bin(v).
  template <class Bin>
  void histogram(const CostCurves& costs, Bin bin);
  VarianceTieBreak tie_break_;
};

}  // namespace ddpsim
