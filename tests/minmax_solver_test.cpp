// The exact min-max solver against the study's enumeration, and the solvers' contracts.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "common/error.hpp"
#include "sched/minmax_solver.hpp"

using namespace ddpsim;

namespace {

// Curves shaped like the real ones: c(k) = k · (longest of the first k lengths), its square,
// or a random non-decreasing staircase with plateaus (ties on purpose, so that many
// allocations share the optimal maximum and the variance rule has to decide).
CostCurves random_curves(std::mt19937_64& rng, int G, int max_size) {
  CostCurves curves;
  curves.reset(G, max_size);
  const int kind = static_cast<int>(rng() % 4);
  for (int g = 0; g < G; ++g) {
    const int size = 1 + static_cast<int>(rng() % static_cast<std::uint64_t>(max_size));
    auto row = curves.row(g);
    int longest = 0;
    double level = 0;
    for (int k = 1; k <= size; ++k) {
      longest = std::max(longest, 3 + static_cast<int>(rng() % 64));
      const double tokens = double(k) * longest;
      if (kind == 0)
        row[static_cast<std::size_t>(k - 1)] = tokens;
      else if (kind == 1)
        row[static_cast<std::size_t>(k - 1)] = tokens * tokens;
      else if (kind == 2)
        row[static_cast<std::size_t>(k - 1)] = level += static_cast<double>(rng() % 3) * 0.5;
      else
        row[static_cast<std::size_t>(k - 1)] = level += static_cast<double>(rng() % 2) * (1 + g);
    }
    curves.set_size(g, size);
  }
  return curves;
}

// All allocations' (max, variance) on the enumeration's terms: is the best one unique?
bool variance_decides_uniquely(const CostCurves& c, int B, const MinMaxAllocation& best) {
  const int G = c.ranks();
  std::vector<int> b(static_cast<std::size_t>(G), 1);
  int at_max = 0, at_best = 0;
  double scale = 0;
  for (int g = 0; g < G; ++g) scale = std::max(scale, std::abs(c.curve(g).back()));
  const double tolerance = 1e-9 * scale * scale + 1e-12;
  std::function<void(int, int)> visit = [&](int g, int left) {
    if (g == G - 1) {
      if (left < 1 || left > c.size(g)) return;
      b[static_cast<std::size_t>(g)] = left;
      double max = -INFINITY, sum = 0, sq = 0;
      for (int h = 0; h < G; ++h) {
        const double x = c.curve(h)[static_cast<std::size_t>(b[static_cast<std::size_t>(h)] - 1)];
        max = std::max(max, x);
        sum += x;
      }
      for (int h = 0; h < G; ++h) {
        const double x = c.curve(h)[static_cast<std::size_t>(b[static_cast<std::size_t>(h)] - 1)];
        sq += (x - sum / G) * (x - sum / G);
      }
      if (max != best.max_cost) return;
      ++at_max;
      at_best += std::abs(sq / G - best.cost_variance) <= tolerance;
      return;
    }
    for (int x = 1; x <= std::min(c.size(g), left - (G - 1 - g)); ++x) {
      b[static_cast<std::size_t>(g)] = x;
      visit(g + 1, left - x);
    }
  };
  visit(0, B);
  return at_max > 1 && at_best == 1;
}

void check_invariants(const CostCurves& c, int B, const MinMaxAllocation& a) {
  int total = 0;
  for (int g = 0; g < c.ranks(); ++g) {
    const int b = a.batch[static_cast<std::size_t>(g)];
    REQUIRE(b >= 1);
    REQUIRE(b <= c.size(g));
    total += b;
  }
  REQUIRE(total == B);
}

}  // namespace

TEST_CASE("exact reaches the enumeration optimum on 10,000 random small instances") {
  std::mt19937_64 rng(2024);
  ExactMinMaxSolver exact;
  int decided_by_variance = 0;
  for (int trial = 0; trial < 10000; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 5);
    const CostCurves c = random_curves(rng, G, 12);
    int offered = 0;
    for (int g = 0; g < G; ++g) offered += c.size(g);
    const int B = G + static_cast<int>(rng() % static_cast<std::uint64_t>(offered - G + 1));
    CAPTURE(trial);
    const MinMaxAllocation reference = solve_minmax_enumerate(c, B);
    const MinMaxAllocation& fast = exact.solve(c, B);
    check_invariants(c, B, reference);
    check_invariants(c, B, fast);
    REQUIRE(fast.max_cost == reference.max_cost);
    if (variance_decides_uniquely(c, B, reference)) {
      ++decided_by_variance;
      CHECK(fast.batch == reference.batch);
    }
  }
  MESSAGE(decided_by_variance << " of 10000 instances were decided by the variance rule");
  CHECK(decided_by_variance >= 600);  // the comparison above must not pass vacuously
}

TEST_CASE("exact matches enumeration at the study's shape (G=4, B=48, K=64) on token curves") {
  std::mt19937_64 rng(7);
  ExactMinMaxSolver exact;
  for (int trial = 0; trial < 30; ++trial) {
    CostCurves c;
    c.reset(4, 64);
    for (int g = 0; g < 4; ++g) {
      int longest = 0;
      for (int k = 1; k <= 64; ++k) {
        longest = std::max(longest,
                           3 + static_cast<int>(std::lround(std::exp(2.3 + 0.5 * std::normal_distribution<>()(rng)))));
        c.row(g)[static_cast<std::size_t>(k - 1)] = double(k) * longest;
      }
      c.set_size(g, 64);
    }
    const MinMaxAllocation reference = solve_minmax_enumerate(c, 48);
    const MinMaxAllocation& fast = exact.solve(c, 48);
    CHECK(fast.max_cost == reference.max_cost);
    CHECK(fast.cost_variance == doctest::Approx(reference.cost_variance));
  }
}

TEST_CASE("a large instance keeps the invariants and its maximum is the smallest feasible threshold") {
  std::mt19937_64 rng(99);
  const int G = 1024, K = 64, B = 16384;
  CostCurves c;
  c.reset(G, K);
  for (int g = 0; g < G; ++g) {
    int longest = 0;
    for (int k = 1; k <= K; ++k) {
      longest = std::max(longest, 3 + static_cast<int>(rng() % 40));
      c.row(g)[static_cast<std::size_t>(k - 1)] = double(k) * longest;
    }
    c.set_size(g, K);
  }
  ExactMinMaxSolver exact;
  const MinMaxAllocation& a = exact.solve(c, B);
  check_invariants(c, B, a);
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
  double below = -1;
  for (int g = 0; g < G; ++g)
    for (double x : c.curve(g))
      if (x < a.max_cost) below = std::max(below, x);
  CHECK(capacity(below) < B);
}

TEST_CASE("one rank takes everything; equal curves split evenly") {
  ExactMinMaxSolver exact;
  CostCurves one;
  one.reset(1, 8);
  for (int k = 1; k <= 8; ++k) one.row(0)[static_cast<std::size_t>(k - 1)] = k * 10.0;
  one.set_size(0, 8);
  CHECK(exact.solve(one, 5).batch == std::vector<int>{5});
  CostCurves same;
  same.reset(4, 16);
  for (int g = 0; g < 4; ++g) {
    for (int k = 1; k <= 16; ++k) same.row(g)[static_cast<std::size_t>(k - 1)] = k * 7.0;
    same.set_size(g, 16);
  }
  CHECK(exact.solve(same, 40).batch == std::vector<int>{10, 10, 10, 10});
  CHECK(solve_minmax_enumerate(same, 40).batch == std::vector<int>{10, 10, 10, 10});
}

TEST_CASE("infeasible batches are refused with the bound that fails") {
  CostCurves c;
  c.reset(4, 4);
  for (int g = 0; g < 4; ++g) {
    for (int k = 1; k <= 4; ++k) c.row(g)[static_cast<std::size_t>(k - 1)] = k;
    c.set_size(g, 4);
  }
  ExactMinMaxSolver exact;
  CHECK_THROWS_WITH_AS(exact.solve(c, 3), doctest::Contains("B=3 is smaller than G=4"), InputError);
  CHECK_THROWS_WITH_AS(exact.solve(c, 17), doctest::Contains("B=17 exceeds the 16 samples"), InputError);
  CHECK_THROWS_WITH_AS(solve_minmax_enumerate(c, 17), doctest::Contains("B=17 exceeds"), InputError);
}
