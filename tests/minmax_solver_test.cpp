// The exact min-max solver against the study's enumeration, and the solvers' contracts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "sched/minmax_solver.hpp"
#include "sched/minmax_tiebreak.hpp"

using namespace ddpsim;

namespace {

std::size_t at(int i) {
  return static_cast<std::size_t>(i);
}

// A sequence length in 3..66: uniform, or skewed towards short ones (mean ≈ 12) like SST-2.
// Only the engine's raw output is used: the std:: distributions differ between libraries.
int draw_length(std::mt19937_64& rng, bool skewed) {
  if (!skewed) return 3 + static_cast<int>(rng() % 64);
  int length = 3;
  while (length < 66 && rng() % 10 != 0) ++length;
  return length;
}

double draw_real(std::mt19937_64& rng, double low, double high) {
  return low + (high - low) * static_cast<double>(rng() >> 11) * 0x1p-53;
}

// c(k) = k · (longest of the first k lengths), as the policy builds them (K = 64).
CostCurves token_curves(std::mt19937_64& rng, int G, int K) {
  CostCurves c;
  c.reset(G, K);
  for (int g = 0; g < G; ++g) {
    int longest = 0;
    for (int k = 1; k <= K; ++k) {
      longest = std::max(longest, draw_length(rng, true));
      c.row(g)[at(k - 1)] = double(k) * longest;
    }
    c.set_size(g, K);
  }
  c.set_whole(true);
  return c;
}

// One value c(k) of a curve of shape `kind` (see random_curves); `level` carries a staircase.
double curve_value(std::mt19937_64& rng, int kind, int g, double tokens, double& level) {
  if (kind <= 1) return tokens;
  if (kind == 2) return tokens * tokens;
  double step = 0;
  if (kind <= 4)
    step = static_cast<double>(rng() % 3) * 0.5;  // half steps
  else if (kind <= 6)
    step = rng() % 2 ? draw_real(rng, 0.1, 3.0) : 0.0;  // real steps
  else if (kind <= 8)
    step = rng() % 4 ? 1.0 + static_cast<double>(rng() % 4) : 0.0;  // integer steps
  else
    step = rng() % 4 ? static_cast<double>(1 + rng() % 3) * (1 + g % 2) : 0.0;  // scaled per rank
  return level += step;
}

// Curves of one shape per instance: padded tokens k · max(first k lengths) with uniform or
// skewed lengths, or their squares (3 instances in 10); else staircases with plateaus and
// small steps. Plateaus and coarse steps make ties at T* common, so that many allocations
// reach the optimal maximum and the variance rule has to decide.
CostCurves random_curves(std::mt19937_64& rng, int G, int max_size) {
  CostCurves curves;
  curves.reset(G, max_size);
  const int kind = static_cast<int>(rng() % 10);
  for (int g = 0; g < G; ++g) {
    const int size = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(max_size));
    int longest = 0;
    double level = 0;
    for (int k = 1; k <= size; ++k) {
      longest = std::max(longest, draw_length(rng, kind != 0));
      curves.row(g)[at(k - 1)] = curve_value(rng, kind, g, double(k) * longest, level);
    }
    curves.set_size(g, size);
  }
  // Whole curves take the solver's whole-number path in half the instances, the general one
  // in the other half.
  const bool whole = kind <= 2 || kind >= 7;
  curves.set_whole(whole && rng() % 2 == 0);
  return curves;
}

double cost(const CostCurves& c, int g, int b) {
  return c.curve(g)[at(b - 1)];
}

// Variances closer than this count as equal in these checks (looser than the solvers' 1e-12).
double check_tolerance(const CostCurves& c) {
  double scale = 0;
  for (int g = 0; g < c.ranks(); ++g)
    scale = std::max({scale, std::abs(c.curve(g).front()), std::abs(c.curve(g).back())});
  return 1e-9 * scale * scale + 1e-12;
}

// Over all allocations: how many reach the optimal maximum, and how many of those also reach
// the least variance.
struct Census {
  int at_max = 0;
  int at_best = 0;
};

Census census(const CostCurves& c, int B, const MinMaxAllocation& best) {
  const int G = c.ranks();
  const double tolerance = check_tolerance(c);
  std::vector<int> b(at(G), 1);
  Census n;
  std::function<void(int, int)> visit = [&](int g, int left) {
    if (g == G - 1) {
      if (left < 1 || left > c.size(g)) return;
      b[at(g)] = left;
      double max = -INFINITY, sum = 0, sq = 0;
      for (int h = 0; h < G; ++h) {
        max = std::max(max, cost(c, h, b[at(h)]));
        sum += cost(c, h, b[at(h)]);
      }
      for (int h = 0; h < G; ++h) sq += (cost(c, h, b[at(h)]) - sum / G) * (cost(c, h, b[at(h)]) - sum / G);
      if (max != best.max_cost) return;
      ++n.at_max;
      n.at_best += std::abs(sq / G - best.cost_variance) <= tolerance;
      return;
    }
    for (int x = 1; x <= std::min(c.size(g), left - (G - 1 - g)); ++x) {
      b[at(g)] = x;
      visit(g + 1, left - x);
    }
  };
  visit(0, B);
  return n;
}

void check_invariants(const CostCurves& c, int B, const MinMaxAllocation& a) {
  REQUIRE(a.batch.size() == at(c.ranks()));
  int total = 0;
  double max = -INFINITY;
  for (int g = 0; g < c.ranks(); ++g) {
    const int b = a.batch[at(g)];
    REQUIRE(b >= 1);
    REQUIRE(b <= c.size(g));
    total += b;
    max = std::max(max, cost(c, g, b));
  }
  REQUIRE(total == B);
  REQUIRE(max == a.max_cost);
}

// Solves with both solvers and requires the exact one to reach the enumeration's optimum by
// the exact rule: same maximum, same least variance. Returns (enumeration, exact).
std::pair<MinMaxAllocation, MinMaxAllocation> require_enumeration_optimum(ExactMinMaxSolver& exact, const CostCurves& c,
                                                                          int B) {
  const MinMaxAllocation reference = solve_minmax_enumerate(c, B);
  const MinMaxAllocation fast = exact.solve(c, B);
  check_invariants(c, B, reference);
  check_invariants(c, B, fast);
  REQUIRE(exact.last_exact());
  REQUIRE(fast.max_cost == reference.max_cost);
  // The least variance is reached even where several allocations share it.
  CHECK(std::abs(fast.cost_variance - reference.cost_variance) <= check_tolerance(c));
  return {reference, fast};
}

int feasible_batch(std::mt19937_64& rng, const CostCurves& c) {
  int offered = 0;
  for (int g = 0; g < c.ranks(); ++g) offered += c.size(g);
  return c.ranks() + static_cast<int>(rng() % static_cast<std::uint64_t>(offered - c.ranks() + 1));
}

}  // namespace

TEST_CASE("exact reaches the enumeration optimum on 10,000 random small instances") {
  std::mt19937_64 rng(2024);
  ExactMinMaxSolver exact;
  const int trials = 10000;
  int variance_chose = 0, compared = 0, ties = 0, ties_same_batch = 0;
  for (int trial = 0; trial < trials; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 5);
    const CostCurves c = random_curves(rng, G, 12);
    const int B = feasible_batch(rng, c);
    CAPTURE(trial);
    const auto [reference, fast] = require_enumeration_optimum(exact, c, B);
    const Census n = census(c, B, reference);
    if (n.at_max < 2) continue;
    ++variance_chose;
    if (n.at_best == 1) {
      ++compared;
      CHECK(fast.batch == reference.batch);
    } else {
      ++ties;
      ties_same_batch += fast.batch == reference.batch;
    }
  }
  MESSAGE("of " << trials << " instances, " << variance_chose << " had several allocations at the optimal maximum; "
                << compared << " had a unique least-variance one (batches compared), " << ties
                << " exact ties (same lexicographic choice in " << ties_same_batch << ")");
  // The comparisons above must not pass vacuously.
  CHECK(variance_chose >= trials / 5);
  CHECK(compared >= trials / 10);
}

TEST_CASE("exact matches enumeration at the study's shape (G=4, B=48, K=64) on token curves") {
  std::mt19937_64 rng(7);
  ExactMinMaxSolver exact;
  for (int trial = 0; trial < 30; ++trial) {
    const CostCurves c = token_curves(rng, 4, 64);
    require_enumeration_optimum(exact, c, 48);
  }
}

TEST_CASE("up to EXACT_RANKS = 8 ranks the exact variance rule always decides and matches enumeration") {
  constexpr int G = VarianceTieBreak::EXACT_RANKS;
  std::mt19937_64 rng(8);
  ExactMinMaxSolver exact;
  for (int trial = 0; trial < 150; ++trial) {
    const CostCurves c = random_curves(rng, G, 4);
    const int B = feasible_batch(rng, c);
    CAPTURE(trial);
    require_enumeration_optimum(exact, c, B);
  }
}

// Whole token costs take a bin per value; with half a token more on odd ranks the values are
// not all whole, and the solver selects within a bin.
TEST_CASE("a large instance keeps the invariants and its maximum is the smallest feasible threshold") {
  std::mt19937_64 rng(99);
  const int G = 1024, K = 64, B = 16384;
  CostCurves c = token_curves(rng, G, K);
  ExactMinMaxSolver exact;
  std::vector<int> whole_path;
  // Rounds: the whole-number path, the general path on the same curves (same answer), then
  // half-token costs; later calls reuse the scratch space.
  for (int round = 0; round < 3; ++round) {
    c.set_whole(round == 0);
    if (round == 2)
      for (int g = 1; g < G; g += 2)
        for (double& x : c.row(g)) x += 0.5;
    CAPTURE(round);
    const MinMaxAllocation& a = exact.solve(c, B);
    check_invariants(c, B, a);
    if (round == 0) whole_path = a.batch;
    if (round == 1) CHECK(a.batch == whole_path);
    // Feasible at T* and infeasible at the next smaller distinct curve value.
    auto capacity = [&](double T) {
      long long total = 0;
      for (int g = 0; g < G; ++g) {
        const auto curve = c.curve(g);
        const auto cap = std::upper_bound(curve.begin(), curve.end(), T) - curve.begin();
        if (cap == 0) return -1LL;
        total += cap;
      }
      return total;
    };
    CHECK(capacity(a.max_cost) >= B);
    CHECK(capacity(a.max_cost) - B == exact.last_slack());
    double below = -INFINITY;
    for (int g = 0; g < G; ++g)
      for (double x : c.curve(g))
        if (x < a.max_cost) below = std::max(below, x);
    CHECK(capacity(below) < B);
  }
}

// Rank 0's first sample alone costs 100, more than any other value: T* = 100, and the others
// split the remaining 4 samples as evenly in cost as they can, 2 and 2.
TEST_CASE("when one rank's first sample costs more than the B-th smallest value, that cost is the maximum") {
  CostCurves c;
  c.reset(3, 4);
  const double rows[3][4] = {{100, 200, 0, 0}, {1, 2, 3, 4}, {1, 2, 3, 4}};
  for (int g = 0; g < 3; ++g) {
    std::copy(rows[g], rows[g] + 4, c.row(g).begin());
    c.set_size(g, g == 0 ? 2 : 4);
  }
  ExactMinMaxSolver exact;
  CHECK(exact.solve(c, 5).batch == std::vector<int>{1, 2, 2});
  CHECK(exact.solve(c, 5).max_cost == 100);
  CHECK(exact.last_slack() == 4);
  CHECK(solve_minmax_enumerate(c, 5).batch == std::vector<int>{1, 2, 2});
}

TEST_CASE("one rank takes everything; equal curves split evenly") {
  ExactMinMaxSolver exact;
  CostCurves one;
  one.reset(1, 8);
  for (int k = 1; k <= 8; ++k) one.row(0)[at(k - 1)] = k * 10.0;
  one.set_size(0, 8);
  CHECK(exact.solve(one, 5).batch == std::vector<int>{5});
  CHECK(solve_minmax_enumerate(one, 5).batch == std::vector<int>{5});
  CostCurves same;
  same.reset(4, 16);
  for (int g = 0; g < 4; ++g) {
    for (int k = 1; k <= 16; ++k) same.row(g)[at(k - 1)] = k * 7.0;
    same.set_size(g, 16);
  }
  CHECK(exact.solve(same, 40).batch == std::vector<int>{10, 10, 10, 10});
  CHECK(exact.solve(same, 40).cost_variance == 0.0);
  CHECK(solve_minmax_enumerate(same, 40).batch == std::vector<int>{10, 10, 10, 10});
}

TEST_CASE("infeasible batches are refused with the bound that fails") {
  CostCurves c;
  c.reset(4, 4);
  for (int g = 0; g < 4; ++g) {
    for (int k = 1; k <= 4; ++k) c.row(g)[at(k - 1)] = k;
    c.set_size(g, 4);
  }
  ExactMinMaxSolver exact;
  CHECK_THROWS_WITH_AS(exact.solve(c, 3), doctest::Contains("B=3 is smaller than the number of ranks G=4"), InputError);
  CHECK_THROWS_WITH_AS(exact.solve(c, 17), doctest::Contains("B=17 exceeds the 16 samples"), InputError);
  CHECK_THROWS_WITH_AS(solve_minmax_enumerate(c, 17), doctest::Contains("B=17 exceeds"), InputError);
  c.set_size(2, 0);
  CHECK_THROWS_WITH_AS(exact.solve(c, 8), doctest::Contains("rank 2 offers 0 samples"), InputError);
}
