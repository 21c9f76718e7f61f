// Stage partitions on small cases checked by hand.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "pipeline/partition.hpp"

using namespace ddpsim;
using namespace ddpsim::pipeline;

namespace {

PartitionProblem problem(const std::vector<double>& times, const std::vector<double>& activations,
                         std::vector<int> in_flight, double state = 0) {
  PartitionProblem p;
  for (std::size_t i = 0; i < times.size(); ++i) p.layers.push_back({times[i], state, activations[i]});
  p.in_flight = std::move(in_flight);
  return p;
}

}  // namespace

TEST_CASE("uniform cuts equal layer counts, the earlier stages one more") {
  const auto p = problem({1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0}, {1, 1, 1});
  CHECK(make_partition("uniform", p) == Partition{0, 3, 5});
}

TEST_CASE("time balances the slowest stage") {
  const auto p = problem({3, 1, 1, 1}, {0, 0, 0, 0}, {1, 1});
  CHECK(make_partition("uniform", p) == Partition{0, 2});  // 4 and 2
  CHECK(make_partition("time", p) == Partition{0, 1});     // 3 and 3
  CHECK(max_stage_time(p, make_partition("time", p)) == 3);
  const auto q = problem({2, 2, 2, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0}, {1, 1, 1});
  CHECK(max_stage_time(q, make_partition("time", q)) == 4);  // {2,2} {2,1,1} {1,1}, or as good
}

TEST_CASE("memory balances the fullest stage, with 1F1B's in-flight activations per stage") {
  // Stage 0 holds 2 micro-batches' activations, stage 1 one: k layers on stage 0 need 2k, the
  // rest 4 − k; k = 1 gives max(2, 3) = 3, the least.
  const auto p = problem({1, 1, 1, 3}, {1, 1, 1, 1}, {2, 1});
  CHECK(make_partition("memory", p) == Partition{0, 1});
  CHECK(max_stage_memory(p, make_partition("memory", p)) == 3);
  CHECK(make_partition("time", p) == Partition{0, 3});  // times 3 and 3, memory 6 and 1
}

TEST_CASE("balanced moves layers off the slowest stage within the time partition's memory") {
  // From the memory partition {0,1}: times 1 and 5. Moving stage 1's first layer back gives 2
  // and 4 (memory 4, 2), then 3 and 3 (memory 6, 1, within the time partition's 6): stop.
  auto p = problem({1, 1, 1, 3}, {1, 1, 1, 1}, {2, 1});
  CHECK(make_partition("balanced", p) == Partition{0, 3});
  // A device of 5 memory units: the last move no longer fits.
  p.capacity_bytes = 5;
  CHECK(make_partition("balanced", p) == Partition{0, 2});
  CHECK_THROWS_WITH_AS(make_partition("time", p), doctest::Contains("stage 0 needs"), InputError);
}

TEST_CASE("impossible partitions are refused") {
  const auto p = problem({1, 1}, {0, 0}, {1, 1, 1});
  CHECK_THROWS_WITH_AS(make_partition("uniform", p), doctest::Contains("2 layers cannot fill 3 stages"), InputError);
  const auto q = problem({1, 1}, {0, 0}, {1, 1});
  CHECK_THROWS_WITH_AS(make_partition("greedy", q), doctest::Contains("unknown partition \"greedy\""), InputError);
}
