// training.zero_partition: ZeRO's optimizer shards even, or by whole parameters as PyTorch's
// ZeroRedundancyOptimizer assigns them (largest first, each to the rank holding fewest); the
// step waits for the largest shard's update, in fast and in full mode; memory holds its state.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "cli/run_report.hpp"
#include "common/error.hpp"
#include "eval/config.hpp"
#include "eval/sharding.hpp"
#include "model/perf_model.hpp"
#include "zero_steps.hpp"

using namespace ddpsim;

namespace {

PerfModel layout(const std::vector<long long>& params) {
  PerfModel m;
  for (std::size_t i = 0; i < params.size(); ++i) m.layers.push_back({"p" + std::to_string(i), params[i], 0});
  return m;
}

Config config(const nlohmann::json& training) {
  return parse_config(nlohmann::json{{"model", "h100-distilbert"}, {"training", training}}, "c.json", "");
}

}  // namespace

TEST_CASE("parameters: largest first, each to the rank holding fewest so far, the lowest rank on a tie") {
  // 5 → rank 0; 4 → 1; 3 → 2; 3 → rank 2 (3, the fewest); 1 → rank 1 (4).
  const auto shares = zero_shares(layout({3, 5, 1, 4, 3}), 3, "parameters");
  REQUIRE(shares.size() == 3);
  CHECK(shares[0] == doctest::Approx(5.0 / 16));
  CHECK(shares[1] == doctest::Approx(5.0 / 16));
  CHECK(shares[2] == doctest::Approx(6.0 / 16));
  for (const double s : zero_shares(layout({3, 5, 1, 4, 3}), 3, "even")) CHECK(s == doctest::Approx(1.0 / 3));
  // A tied embedding of 7.8 M among 2.9 M of small parameters: the embedding's rank holds it alone.
  std::vector<long long> tied = {7'813'632};
  for (int i = 0; i < 29; ++i) tied.push_back(100'000);
  const auto two = zero_shares(layout(tied), 2, "parameters");
  CHECK(two[0] == doctest::Approx(7'813'632.0 / 10'713'632));
  CHECK(std::accumulate(two.begin(), two.end(), 0.0) == doctest::Approx(1));
}

TEST_CASE("the step waits for the largest shard's update, in fast and in full mode") {
  const RankWork w{0, 30, 60, 8};
  EngineSetup s = test::zero_setup("zero1", false);
  s.optimizer_update_share = 0.6;
  s.shard_shares = {0.7, 0.1, 0.1, 0.1};
  const auto fast = test::one_step(s, std::vector<RankWork>(4, w));
  const double largest = 8 * (0.4 + 0.6 * 0.7), others = 8 * (0.4 + 0.6 * 0.1);
  const double ring = test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2);
  CHECK(fast[0].opt_ms == doctest::Approx(largest));
  CHECK(fast[1].opt_ms == doctest::Approx(others));
  for (const RankTiming& t : fast)
    CHECK(t.step_ms == doctest::Approx(30 + 60 + ring + largest + test::ring4_ms(100e6, 1)).epsilon(1e-12));
  CHECK(fast[1].comm_wait_ms - fast[0].comm_wait_ms == doctest::Approx(largest - others));
  s.mode = "full";
  const auto full = simulate_steps(s, {PolicyWork{1, false, std::vector<RankWork>(4, w)}}).policies[0].timing;
  for (std::size_t g = 0; g < 4; ++g) {
    CHECK(full[g].opt_ms == doctest::Approx(fast[g].opt_ms));
    CHECK(full[g].step_ms == doctest::Approx(fast[g].step_ms).epsilon(1e-9));
  }
}

TEST_CASE("zero_partition: the config takes it under zero1, and refuses it elsewhere") {
  const Config even = config({{"data_parallel", "zero1"}, {"world_size", 4}});
  const Config whole = config({{"data_parallel", "zero1"}, {"world_size", 4}, {"zero_partition", "parameters"}});
  const auto shares = zero_shares(*whole.model, 4, "parameters");
  const double most = *std::max_element(shares.begin(), shares.end());
  REQUIRE(most > 0.25);
  // The largest shard's optimizer state beyond its even quarter: 16 B a parameter less the
  // weights and gradients every rank holds whole.
  const double state = 16 - 2 * whole.model->bytes_per_param;
  const double extra = double(whole.model->total_params()) * state * (most - 0.25) / (1024.0 * 1024.0);
  CHECK(whole.model->mem_m0_mib - even.model->mem_m0_mib == doctest::Approx(extra));
  CHECK(cli::data_parallel_line(whole, 2).find("optimizer state sharded by whole parameters, ") != std::string::npos);
  CHECK(whole.resolved["training"]["zero_partition"] == "parameters");
  CHECK_FALSE(even.resolved["training"].contains("zero_partition"));
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "zero2"}, {"zero_partition", "parameters"}}),
                       doctest::Contains("zero2 reduce-scatters even shards"), InputError);
  CHECK_THROWS_WITH_AS(config({{"zero_partition", "parameters"}}),
                       doctest::Contains("zero_partition shards data_parallel \"zero1\"'s optimizer state as "
                                         "PyTorch's ZeroRedundancyOptimizer does; data_parallel \"ddp\" shards nothing"),
                       InputError);
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "fsdp"}, {"zero_partition", "parameters"}}),
                       doctest::Contains("data_parallel \"fsdp\" shards whole units"), InputError);
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "zero1"}, {"zero_partition", "greedy"}}),
                       doctest::Contains("zero_partition is \"even\""), InputError);
}
