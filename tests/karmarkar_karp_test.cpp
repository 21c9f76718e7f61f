// Karmarkar–Karp equal-count partitioning: a valid partition always, and a good one.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>

#include "common/error.hpp"
#include "sched/karmarkar_karp.hpp"

using namespace ddpsim;

namespace {

std::vector<double> part_sums(std::span<const int> items, std::span<const double> w, int G) {
  const std::size_t per_part = items.size() / static_cast<std::size_t>(G);
  std::vector<double> sums(static_cast<std::size_t>(G), 0.0);
  for (std::size_t i = 0; i < items.size(); ++i) sums[i / per_part] += w[static_cast<std::size_t>(items[i])];
  return sums;
}

double spread(const std::vector<double>& sums) {
  return *std::max_element(sums.begin(), sums.end()) - *std::min_element(sums.begin(), sums.end());
}

}  // namespace

// Sorted, the items form states {8|7} {6|5} {4|3} (spread 1 each). The largest-part tie-break
// merges {8|7} with {6|5} into {8+5 | 7+6} = {13|13}; then {4|3} takes {13|13} crosswise.
TEST_CASE("a hand-worked example: {8,7,6,5,4,3} into two triples gives 17 and 16") {
  const std::vector<double> w = {8, 7, 6, 5, 4, 3};
  KarmarkarKarp kk;
  const auto items = kk.partition(w, 2);
  REQUIRE(items.size() == 6);
  CHECK(std::set<int>(items.begin(), items.begin() + 3) == std::set<int>{1, 2, 4});  // 7 + 6 + 4
  CHECK(std::set<int>(items.begin() + 3, items.end()) == std::set<int>{0, 3, 5});    // 8 + 5 + 3
}

TEST_CASE("every item lands in exactly one part of n/G items, and beats the naive splits") {
  std::mt19937_64 rng(42);
  KarmarkarKarp kk;
  int better_than_round_robin = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 8);
    const int per_part = 1 + static_cast<int>(rng() % 12);
    std::vector<double> w(static_cast<std::size_t>(G * per_part));
    for (double& x : w) x = 3 + static_cast<double>(rng() % 64);
    const auto parts = kk.partition(w, G);
    const std::vector<int> items(parts.begin(), parts.end());
    REQUIRE(items.size() == w.size());
    std::vector<int> sorted = items;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int> all(w.size());
    std::iota(all.begin(), all.end(), 0);
    CHECK(sorted == all);

    // Round-robin over the items sorted by weight, and contiguous chunks of that order.
    std::vector<int> by_weight = all;
    std::stable_sort(by_weight.begin(), by_weight.end(), [&](int a, int b) { return w[a] > w[b]; });
    std::vector<int> round_robin;
    for (int g = 0; g < G; ++g)
      for (int i = g; i < static_cast<int>(w.size()); i += G)
        round_robin.push_back(by_weight[static_cast<std::size_t>(i)]);
    const double kk_spread = spread(part_sums(items, w, G));
    CHECK(kk_spread <= spread(part_sums(round_robin, w, G)));
    CHECK(kk_spread <= spread(part_sums(by_weight, w, G)));
    better_than_round_robin += kk_spread < spread(part_sums(round_robin, w, G));
  }
  CHECK(better_than_round_robin > 100);  // strictly better often, not just never worse
}

TEST_CASE("equal inputs give equal partitions") {
  std::vector<double> w(256);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>((i * 37) % 19);
  KarmarkarKarp a, b;
  const auto parts = a.partition(w, 16);
  const std::vector<int> first(parts.begin(), parts.end());
  CHECK(std::equal(first.begin(), first.end(), b.partition(w, 16).begin()));
}

TEST_CASE("G = 1 takes everything; a count not divisible by G is refused") {
  const std::vector<double> w = {1, 2, 3};
  KarmarkarKarp kk;
  CHECK(kk.partition(w, 1).size() == 3);
  CHECK_THROWS_WITH_AS(kk.partition(w, 2), doctest::Contains("3 items cannot form G=2"), InputError);
}
