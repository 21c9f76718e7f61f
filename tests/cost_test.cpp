// Cost models: the proxies the study used, and per-rank speed factors layered on any of them.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "common/error.hpp"
#include "sched/cost.hpp"

using namespace ddpsim;

TEST_CASE("token costs price a padded micro-batch, curve and cost agree") {
  const std::vector<int> running_max = {10, 10, 25, 25};
  for (const char* name : {"tokens", "tokens_sq", "workload"}) {
    CAPTURE(name);
    const auto cost = make_token_cost(name);
    std::vector<double> curve(running_max.size());
    cost->curve(0, running_max, curve);
    for (std::size_t k = 0; k < curve.size(); ++k)
      CHECK(curve[k] == cost->cost(0, static_cast<int>(k + 1), running_max[k]));
  }
  CHECK(make_token_cost("tokens")->cost(0, 3, 25) == 75);
  CHECK(make_token_cost("tokens_sq")->cost(0, 3, 25) == 75.0 * 75.0);
  CHECK(make_token_cost("workload")->cost(0, 3, 25) == 24576.0 * 75 + 3 * 625);
  CHECK_THROWS_WITH_AS(make_token_cost("seconds"), doctest::Contains("known: tokens, tokens_sq"), InputError);
}

TEST_CASE("a rank 30% slower costs 30% more, in curves too") {
  const RankScaledCost scaled(make_token_cost("tokens"), {1.0, 1.3});
  CHECK(scaled.cost(1, 4, 10) == doctest::Approx(52.0));
  std::vector<double> curve(2);
  const std::vector<int> running_max = {10, 20};
  scaled.curve(1, running_max, curve);
  CHECK(curve[1] == doctest::Approx(52.0));
  CHECK_THROWS_AS(RankScaledCost(make_token_cost("tokens"), {1.0, 0.0}), InputError);
}

TEST_CASE("packed micro-batches cost by their tokens and attention pairs, not by padding") {
  // Samples of 10, 10 and 25 tokens: 45 tokens and 825 pairs packed, 75 tokens padded.
  CHECK(make_token_cost("tokens")->packed_cost(0, 45, 825) == 45);
  CHECK(make_token_cost("tokens_sq")->packed_cost(0, 45, 825) == 45.0 * 45.0);
  CHECK(make_token_cost("workload")->packed_cost(0, 45, 825) == 24576.0 * 45 + 825);
  const RankScaledCost scaled(make_token_cost("workload"), {1.0, 2.0});
  CHECK(scaled.packed_cost(1, 45, 825) == 2 * (24576.0 * 45 + 825));
}

// The min-max solver trusts whole() and then bins T*'s bracket a whole number at a time.
TEST_CASE("costs that promise whole numbers keep it, over odd-length curves; scaled costs promise nothing") {
  std::vector<int> running_max(67);
  for (std::size_t k = 0; k < running_max.size(); ++k)
    running_max[k] = 3 + static_cast<int>(k * k % 509) + static_cast<int>(k) * 7;
  for (const char* name : {"tokens", "tokens_sq", "workload"}) {
    CAPTURE(name);
    const auto cost = make_token_cost(name);
    CHECK(cost->whole());
    std::vector<double> curve(running_max.size());
    cost->curve(0, running_max, curve);
    for (std::size_t k = 0; k < curve.size(); ++k) {
      CAPTURE(k);
      CHECK(curve[k] == cost->cost(0, static_cast<int>(k + 1), running_max[k]));
      CHECK(curve[k] == std::floor(curve[k]));
    }
    CHECK(cost->packed_cost(0, 45, 825) == std::floor(cost->packed_cost(0, 45, 825)));
  }
  CHECK_FALSE(RankScaledCost(make_token_cost("tokens"), {1.0, 1.3}).whole());
}
