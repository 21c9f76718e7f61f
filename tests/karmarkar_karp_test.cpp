// Karmarkar–Karp equal-count partitioning: always a valid partition, VeRL's exact output on
// integer weights (against a direct transcription of its Python), and better than naive splits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "common/error.hpp"
#include "sched/karmarkar_karp.hpp"

using namespace ddpsim;

namespace {

// VeRL's karmarkar_karp(seqlen_list, k, equal_size), one Python line per line: a Set is
// (sum, items), a State is its sets sorted largest first, merged one pair at a time. Returns
// the parts, concatenated.
std::vector<int> verl_reference(const std::vector<double>& w, int k, bool equal_size = true,
                                std::vector<int>* sizes = nullptr) {
  struct Set {
    double sum = 0;
    std::vector<int> items;
    bool operator<(const Set& o) const {
      if (sum != o.sum) return sum < o.sum;
      if (items.size() != o.items.size()) return items.size() < o.items.size();
      return items < o.items;
    }
  };
  using State = std::vector<Set>;
  auto spread = [](const State& s) { return s.front().sum - s.back().sum; };
  auto sort_desc = [](State& s) {
    std::stable_sort(s.begin(), s.end(), [](const Set& a, const Set& b) { return b < a; });
  };
  // heapq is a min-heap under State.__lt__: larger spread first, then larger first set.
  auto pops_first = [&](const State& a, const State& b) {
    return spread(a) != spread(b) ? spread(a) > spread(b) : b.front() < a.front();
  };
  std::vector<int> sorted(w.size());
  std::iota(sorted.begin(), sorted.end(), 0);
  std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) { return w[a] < w[b]; });
  std::vector<State> pq;
  for (std::size_t off = 0; !equal_size && off < w.size(); ++off) {
    State s(static_cast<std::size_t>(k));
    s[0] = {w[static_cast<std::size_t>(sorted[off])], {sorted[off]}};
    pq.push_back(s);
  }
  for (std::size_t off = 0; equal_size && off < w.size(); off += static_cast<std::size_t>(k)) {
    State s(static_cast<std::size_t>(k));
    for (int i = 0; i < k; ++i) {
      const int idx = sorted[off + static_cast<std::size_t>(i)];
      s[static_cast<std::size_t>(i)] = {w[static_cast<std::size_t>(idx)], {idx}};
    }
    sort_desc(s);
    pq.push_back(s);
  }
  auto pop = [&] {
    const auto it = std::min_element(pq.begin(), pq.end(), pops_first);
    State s = *it;
    pq.erase(it);
    return s;
  };
  while (pq.size() > 1) {
    State a = pop();
    const State b = pop();
    for (int i = 0; i < k; ++i) {
      Set& x = a[static_cast<std::size_t>(i)];
      const Set& y = b[static_cast<std::size_t>(k - 1 - i)];
      x.sum += y.sum;
      x.items.insert(x.items.end(), y.items.begin(), y.items.end());
    }
    sort_desc(a);
    pq.push_back(a);
  }
  std::vector<int> out;
  if (sizes) sizes->clear();
  for (const Set& s : pq.front()) {
    out.insert(out.end(), s.items.begin(), s.items.end());
    if (sizes) sizes->push_back(static_cast<int>(s.items.size()));
  }
  return out;
}

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

// Sorted, the items form states {4|3}, {6|5}, {8|7}, all of spread 1; the tie goes to the state
// with the larger top part, so {8|7} and {6|5} merge first into {8+5 | 7+6} = {13|13}, of which
// VeRL ranks {7,6} first (equal sums: the higher first index). Then {4|3} (spread 1) pops
// before {13|13} (spread 0): 4 joins the smaller-ranked {8,5} and 3 joins {7,6}.
TEST_CASE("a hand-worked example: {8,7,6,5,4,3} into two triples gives {4,8,5} = 17 and {3,7,6} = 16") {
  const std::vector<double> w = {8, 7, 6, 5, 4, 3};
  KarmarkarKarp kk;
  const auto items = kk.partition(w, 2);
  CHECK(std::vector<int>(items.begin(), items.end()) == std::vector<int>{4, 0, 3, 5, 1, 2});
}

TEST_CASE("the output is VeRL's, item for item, on 1,000 random integer instances full of ties") {
  std::mt19937_64 rng(11);
  KarmarkarKarp kk;
  for (int trial = 0; trial < 1000; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 8);
    const int per_part = 1 + static_cast<int>(rng() % 10);
    const int distinct = 1 + static_cast<int>(rng() % 20);
    std::vector<double> w(static_cast<std::size_t>(G * per_part));
    for (double& x : w) x = 3 + static_cast<double>(rng() % static_cast<std::uint64_t>(distinct));
    CAPTURE(trial);
    const auto parts = kk.partition(w, G);
    REQUIRE(std::vector<int>(parts.begin(), parts.end()) == verl_reference(w, G));
  }
}

// Whole weights take integer keys and, when a merge's sums span a few times G, a counting sort;
// the rest double keys and radix passes. Each kind of weight, each way, gives VeRL's output.
TEST_CASE("the output is VeRL's for fractional, negative, wide-ranging and huge weights too") {
  std::mt19937_64 rng(13);
  KarmarkarKarp kk;
  for (int trial = 0; trial < 400; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 40);
    const int per_part = 1 + static_cast<int>(rng() % 6);
    std::vector<double> w(static_cast<std::size_t>(G * per_part));
    for (double& x : w) {
      const auto r = static_cast<double>(rng() % 25);
      switch (trial % 4) {
        case 0:
          x = r * 0.25 - 3;
          break;  // fractional, some negative
        case 1:
          x = r - 12;
          break;  // whole, some negative
        case 2:
          x = static_cast<double>(rng() % 1'000'000);
          break;  // whole, sums spread wide
        default:
          x = 0x1p52 + r;
          break;  // whole but too large for exact keys
      }
    }
    CAPTURE(trial);
    const auto parts = kk.partition(w, G);
    REQUIRE(std::vector<int>(parts.begin(), parts.end()) == verl_reference(w, G));
    if (w.size() >= 2)  // a call of another size in between, on the same instance
      kk.partition(std::span<const double>(w.data(), std::min<std::size_t>(w.size(), 7)), 2, false);
  }
}

TEST_CASE("with free counts too, parts and sizes are VeRL's on 1,000 random integer instances") {
  std::mt19937_64 rng(12);
  KarmarkarKarp kk;
  for (int trial = 0; trial < 1000; ++trial) {
    const int k = 1 + static_cast<int>(rng() % 8);
    const int n = k + static_cast<int>(rng() % 40);
    const int distinct = 1 + static_cast<int>(rng() % 30);
    std::vector<double> w(static_cast<std::size_t>(n));
    for (double& x : w) x = 24576.0 * static_cast<double>(1 + rng() % static_cast<std::uint64_t>(distinct));
    CAPTURE(trial);
    std::vector<int> sizes;
    const auto expected = verl_reference(w, k, false, &sizes);
    const auto parts = kk.partition(w, k, false);
    REQUIRE(std::vector<int>(parts.begin(), parts.end()) == expected);
    REQUIRE(std::vector<int>(kk.part_sizes().begin(), kk.part_sizes().end()) == sizes);
  }
}

// Each item starts alone, its spread its weight. {9} and {5} pop first and give {9|5} (spread
// 4), which pops with {2}: {9|5+2} (spread 2), which pops with {1}: {9|5+2+1}. Items keep the
// order they joined in.
TEST_CASE("a hand-worked free-count example: {9,2,5,1} into two parts gives {9} and {5,2,1}") {
  const std::vector<double> w = {9, 2, 5, 1};
  KarmarkarKarp kk;
  const auto items = kk.partition(w, 2, false);
  CHECK(std::vector<int>(items.begin(), items.end()) == std::vector<int>{0, 2, 1, 3});
  CHECK(std::vector<int>(kk.part_sizes().begin(), kk.part_sizes().end()) == std::vector<int>{1, 3});
  CHECK_THROWS_WITH_AS(kk.partition(w, 5, false), doctest::Contains("4 items cannot fill 5 parts"), InputError);
}

TEST_CASE("every item lands in exactly one part of n/G items, and beats the naive splits") {
  std::mt19937_64 rng(42);
  KarmarkarKarp kk;
  int better_than_round_robin = 0;
  for (int trial = 0; trial < 500; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 8);
    const int per_part = 1 + static_cast<int>(rng() % 12);
    std::vector<double> w(static_cast<std::size_t>(G * per_part));
    for (double& x : w)
      x = 3 + static_cast<double>(rng() % 64) + (trial % 2 ? 0.001 * static_cast<double>(rng() % 1000) : 0);
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

TEST_CASE("equal inputs give equal partitions, also from a reused instance") {
  std::vector<double> w(256);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<double>((i * 37) % 19);
  KarmarkarKarp a, b;
  const auto parts = a.partition(w, 16);
  const std::vector<int> first(parts.begin(), parts.end());
  CHECK(std::equal(first.begin(), first.end(), b.partition(w, 16).begin()));
  b.partition(std::vector<double>(64, 1.0), 4);
  const auto again = b.partition(w, 16);
  CHECK(std::equal(first.begin(), first.end(), again.begin(), again.end()));
}

TEST_CASE("G = 1 takes everything; a count not divisible by G and a NaN weight are refused") {
  const std::vector<double> w = {1, 2, 3};
  KarmarkarKarp kk;
  CHECK(kk.partition(w, 1).size() == 3);
  CHECK_THROWS_WITH_AS(kk.partition(w, 2), doctest::Contains("3 items cannot form G=2"), InputError);
  CHECK_THROWS_WITH_AS(kk.partition(std::vector<double>{1, NAN}, 2), doctest::Contains("item 1 is not a finite"),
                       InputError);
}
