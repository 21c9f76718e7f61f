// simulation.unit_jitter: a rank's compute falling unevenly over FSDP's units. Its totals stay
// the charger's; a group that meets at every unit then waits for a different rank at each, so
// the wait grows with the number of units, as a fixed imbalance alone never makes it; DDP and
// σ = 0 are untouched; full mode draws the same; the keyed draws behind it are standard normal;
// the key is refused where it has no units.
#include <doctest/doctest.h>

#include <cmath>
#include <numeric>

#include "alpha_beta.hpp"
#include "common/error.hpp"
#include "engine/sharded_schedule.hpp"
#include "eval/config.hpp"

using namespace ddpsim;

namespace {

// G ranks on the α–β platform under FSDP: a root of a tenth of the compute and `blocks` blocks
// sharing the rest, every unit 1 MB, so that its gathers hide behind compute.
EngineSetup jittered(int G, int blocks, double sigma) {
  EngineSetup s = test::alpha_beta_setup(G);
  s.sharding = "fsdp";
  s.units.push_back({1e6, 0.1, true});
  for (int b = 0; b < blocks; ++b) s.units.push_back({1e6, 0.9 / blocks, false});
  s.unit_jitter = sigma;
  s.jitter_seed = 7;
  return s;
}

// `steps` steps of G ranks, rank 0 `slow` times the others' 40 ms forward and 80 ms backward.
PolicyWork steps_of(int G, int steps, double slow) {
  PolicyWork pw{steps, false, {}};
  for (int t = 0; t < steps; ++t)
    for (int g = 0; g < G; ++g) pw.work.push_back(RankWork{0, 40 * (g == 0 ? slow : 1), 80 * (g == 0 ? slow : 1), 4});
  return pw;
}

std::vector<RankTiming> run(const EngineSetup& s, const PolicyWork& pw) {
  FastEngine engine(s);
  engine.start_policy();
  PolicyTimes out;
  engine.advance(pw, out);
  return out.timing;
}

// The mean wait of the ranks other than rank 0, over every step.
double fast_ranks_wait(const std::vector<RankTiming>& timing, int G) {
  double sum = 0;
  for (std::size_t i = 0; i < timing.size(); ++i)
    if (i % static_cast<std::size_t>(G) != 0) sum += timing[i].comm_wait_ms;
  return sum / static_cast<double>(timing.size() - timing.size() / static_cast<std::size_t>(G));
}

}  // namespace

TEST_CASE("keyed draws: standard normal whatever the key's order, and unrelated across neighbouring keys") {
  double sum = 0, squares = 0, cross = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double a = KeyedRng{7, static_cast<std::uint64_t>(i), 3}.normal();
    const double b = KeyedRng{7, static_cast<std::uint64_t>(i), 4}.normal();
    sum += a, squares += a * a, cross += a * b;
  }
  CHECK(std::abs(sum / n) < 0.01);
  CHECK(squares / n == doctest::Approx(1).epsilon(0.01));
  CHECK(std::abs(cross / n) < 0.01);
  CHECK(KeyedRng{1, 2}.bits() != KeyedRng{2, 1}.bits());
  CHECK(KeyedRng{1, 2}.bits() == KeyedRng{1, 2}.bits());
}

TEST_CASE("a rank's drawn shares sum to one, differ by rank and phase, and repeat for the same key") {
  const EngineSetup s = jittered(8, 16, 0.3);
  std::vector<double> a(17), b(17), c(17);
  engine_detail::unit_shares(s, 5, 3, 0, false, a.data());
  engine_detail::unit_shares(s, 5, 3, 0, false, b.data());
  engine_detail::unit_shares(s, 5, 4, 0, false, c.data());
  CHECK(std::accumulate(a.begin(), a.end(), 0.0) == doctest::Approx(1).epsilon(1e-12));
  CHECK(a == b);
  CHECK(a != c);
  engine_detail::unit_shares(s, 5, 3, 0, true, c.data());
  CHECK(a != c);
}

TEST_CASE("the rows' compute is the charger's, jitter or not; σ = 0 gives the units' own shares") {
  const PolicyWork pw = steps_of(8, 20, 1);
  const auto plain = run(jittered(8, 16, 0), pw), drawn = run(jittered(8, 16, 0.3), pw);
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CHECK(drawn[i].fwd_ms == plain[i].fwd_ms);
    CHECK(drawn[i].bwd_ms == plain[i].bwd_ms);
    CHECK(plain[i].step_ms == doctest::Approx(plain[0].step_ms).epsilon(1e-12));  // nothing drawn: alike
  }
  CHECK(drawn[0].step_ms > plain[0].step_ms);
}

TEST_CASE("under a fixed imbalance the wait grows with the units only where their shares jitter") {
  const int G = 8;
  const PolicyWork pw = steps_of(G, 50, 1.2);
  const double one = fast_ranks_wait(run(jittered(G, 1, 0), pw), G);
  CHECK(one >= 24);  // rank 0's extra 24 ms, and the gathers no compute hides
  double previous = one;
  for (const int blocks : {4, 16, 64}) {
    CAPTURE(blocks);
    // Without jitter a fast rank waits for rank 0's extra time alone, at any count of units.
    CHECK(fast_ranks_wait(run(jittered(G, blocks, 0), pw), G) == doctest::Approx(one).epsilon(1e-9));
    // With it, a unit may wait for a rank other than rank 0, and rank 0 for another: more units,
    // more such waits, beyond what one unit's prefetch lets a rank run ahead.
    const double wait = fast_ranks_wait(run(jittered(G, blocks, 0.4), pw), G);
    CHECK(wait > previous + 1);
    previous = wait;
  }
}

TEST_CASE("full mode draws the same shares as fast mode") {
  EngineSetup s = jittered(8, 6, 0.25);
  std::vector<PolicyWork> policies{steps_of(8, 4, 1.3), steps_of(8, 4, 1)};
  s.mode = "fast";
  const auto fast = simulate_steps(s, policies).policies;
  s.mode = "full";
  const auto full = simulate_steps(s, policies).policies;
  REQUIRE(fast.size() == full.size());
  for (std::size_t p = 0; p < fast.size(); ++p)
    for (std::size_t i = 0; i < fast[p].timing.size(); ++i)
      CHECK(full[p].timing[i].step_ms == doctest::Approx(fast[p].timing[i].step_ms).epsilon(1e-9));
}

TEST_CASE("unit_jitter: a σ in [0, 3], and only where there are units") {
  const auto refused = [](nlohmann::json training, double sigma, const char* says) {
    nlohmann::json doc = {{"training", training}, {"simulation", {{"unit_jitter", sigma}}}};
    CHECK_THROWS_WITH_AS(parse_config(doc, "c.json", ""), doctest::Contains(says), InputError);
  };
  refused({{"data_parallel", "fsdp"}}, -0.1, "c.json: simulation: unit_jitter is a log-normal σ in [0, 3]");
  refused({{"data_parallel", "fsdp"}}, 4, "unit_jitter is a log-normal σ in [0, 3]");
  refused({{"data_parallel", "ddp"}}, 0.1, "c.json: simulation: unit_jitter spreads a rank's compute unevenly");
  refused({{"data_parallel", "zero2"}}, 0.1, "data_parallel \"zero2\" has none");
  const Config fsdp =
      parse_config({{"training", {{"data_parallel", "fsdp"}}}, {"simulation", {{"unit_jitter", 0.05}}}}, "c.json", "");
  CHECK(fsdp.simulation.unit_jitter == 0.05);
  CHECK(fsdp.resolved["simulation"]["unit_jitter"] == 0.05);
  CHECK_FALSE(parse_config({{"training", {{"data_parallel", "ddp"}}}}, "c.json", "")
                  .resolved["simulation"]
                  .contains("unit_jitter"));
}
