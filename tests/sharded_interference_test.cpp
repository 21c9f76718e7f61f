// A model's comm_slowdown under FSDP and HSDP: a unit's forward or backward runs that many times
// slower while its group's all-gathers and reduce-scatters are in flight, as DDP's backward does
// beside its buckets. Checked against a step worked by hand, fast mode against full, and the
// notes that say what is left out (allreduce_slowdown; HSDP's allreduce across groups).
#include <doctest/doctest.h>

#include <cmath>

#include "alpha_beta.hpp"
#include "eval/config.hpp"

using namespace ddpsim;

namespace {

// Two ranks, FSDP over a root and one block of 1 MB each, each half of the compute.
EngineSetup two_units(double slowdown) {
  EngineSetup s = test::alpha_beta_setup(2);
  s.sharding = "fsdp";
  s.units = {{1e6, 0.5, true}, {1e6, 0.5, false}};
  s.comm_slowdown = slowdown;
  return s;
}

std::vector<PolicyWork> uneven(int G, int micro) {
  std::vector<PolicyWork> policies(2);
  for (std::size_t p = 0; p < 2; ++p) {
    policies[p] = {3, p == 1, {}};
    for (int t = 0; t < 3; ++t)
      for (int g = 0; g < G; ++g) {
        const double f = 1 + 0.37 * ((g * 7 + t * 3) % 5);
        RankWork& w = policies[p].work.emplace_back(RankWork{0.05, 2 * f, 4 * f, 1.5});
        for (int m = 1; m < micro; ++m) w.earlier.push_back({3 - f, 5 + m - f});
      }
  }
  return policies;
}

}  // namespace

TEST_CASE("a unit's compute beside its group's collectives grows by (1 - 1/f) of their overlap") {
  // Forward: the root's gather exposed, the block's hidden behind the root's forward. Backward:
  // the block's re-gather exposed (nothing to compute beside it), its reduce-scatter hidden
  // behind the root's backward, the root's exposed. Each hidden collective (g ms) stretches the
  // compute beside it by (1 - 1/f)·g.
  const double F = 40, B = 80, opt = 6, f = 1.5;
  const double g = test::ring_ms(2, 1e6, 1);
  const std::vector<RankWork> ranks(2, RankWork{0, F, B, opt});
  const auto plain = test::one_step(two_units(1), ranks), slowed = test::one_step(two_units(f), ranks);
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(plain[r].step_ms == doctest::Approx(3 * g + F + B + opt / 2).epsilon(1e-12));
    CHECK(slowed[r].step_ms == doctest::Approx(3 * g + F + B + opt / 2 + 2 * g * (1 - 1 / f)).epsilon(1e-12));
    // The stretch is compute's, not waiting: each phase reports what it took.
    CHECK(slowed[r].fwd_ms == doctest::Approx(F + g * (1 - 1 / f)).epsilon(1e-12));
    CHECK(slowed[r].bwd_ms == doctest::Approx(B + g * (1 - 1 / f)).epsilon(1e-12));
    CHECK(slowed[r].comm_wait_ms == doctest::Approx(plain[r].comm_wait_ms).epsilon(1e-9));
    CHECK(plain[r].fwd_ms == F);
  }
}

TEST_CASE("compute shorter than the collective beside it runs f times longer, then waits the rest") {
  // The block's gather (g ms) beside a root forward of F/2 < g/f: the forward ends at f·F/2, and
  // the block begins once its gather ends, as without the factor.
  const double g = test::ring_ms(2, 1e6, 1), f = 2, F = g / 4, B = 80;
  const std::vector<RankWork> ranks(2, RankWork{0, F, B, 0});
  const auto plain = test::one_step(two_units(1), ranks), slowed = test::one_step(two_units(f), ranks);
  CHECK(slowed[0].fwd_ms == doctest::Approx(F + F / 2 * (f - 1)).epsilon(1e-12));
  CHECK(slowed[0].step_ms - plain[0].step_ms == doctest::Approx(g * (1 - 1 / f)).epsilon(1e-9));  // the root's backward
}

TEST_CASE("fast and full mode stretch the same compute, FSDP and HSDP, with micro-batches and jitter") {
  // FSDP on 8 ranks of their own links; HSDP in nodes of 8 of a cluster, the replicas' allreduces
  // between the nodes on links no group's collective crosses, as fast mode has it.
  EngineSetup hsdp;
  hsdp.G = 32;
  hsdp.platform.topology = "cluster";
  hsdp.platform.gpus_per_node = 8;
  hsdp.platform.nodes_per_leaf = 2;
  hsdp.sharding = "hybrid";
  hsdp.shard_group = 8;
  EngineSetup fsdp = test::alpha_beta_setup(8);
  fsdp.sharding = "fsdp";
  for (EngineSetup s : {fsdp, hsdp})
    for (const int micro : {1, 3}) {
      CAPTURE(s.sharding);
      CAPTURE(micro);
      s.units.push_back({20e6, 0.1, true});
      for (int b = 0; b < 4; ++b) s.units.push_back({10e6, 0.225, false});
      s.comm_slowdown = 1.7;
      s.unit_jitter = 0.2;
      s.jitter_seed = 3;
      s.mode = "fast";
      const auto fast = simulate_steps(s, uneven(s.G, micro)).policies;
      s.mode = "full";
      const auto full = simulate_steps(s, uneven(s.G, micro)).policies;
      s.comm_slowdown = 1;
      const auto plain = simulate_steps(s, uneven(s.G, micro)).policies;
      for (std::size_t p = 0; p < fast.size(); ++p)
        for (std::size_t i = 0; i < fast[p].timing.size(); ++i) {
          CAPTURE(i);
          // To SimGrid's nanosecond: its clock ends an activity within its timing precision.
          CHECK(std::abs(full[p].timing[i].step_ms - fast[p].timing[i].step_ms) < 1e-6);
          CHECK(std::abs(full[p].timing[i].bwd_ms - fast[p].timing[i].bwd_ms) < 1e-6);
          CHECK(fast[p].timing[i].fwd_ms + fast[p].timing[i].bwd_ms >
                plain[p].timing[i].fwd_ms + plain[p].timing[i].bwd_ms);
        }
    }
}

TEST_CASE("notes: allreduce_slowdown has no effect under FSDP; HSDP's allreduce across groups slows no compute") {
  const auto notes = [](const char* sharding) {
    const nlohmann::json doc = {{"model", DDPSIM_SOURCE_DIR "/models/cpu-distilbert-small-2ranks.json"},
                                {"training", {{"data_parallel", sharding}, {"world_size", 16}, {"global_batch", 64}}},
                                {"platform", {{"topology", "cluster"}}}};
    std::string all;
    for (const std::string& note : parse_config(doc, "c.json", "").notes) all += note + "\n";
    return all;
  };
  const std::string fsdp = notes("fsdp"), hybrid = notes("hybrid");
  CHECK(fsdp.find("allreduce_slowdown has no effect under training.data_parallel \"fsdp\"") != std::string::npos);
  CHECK(fsdp.find("comm_slowdown slows") == std::string::npos);
  CHECK(hybrid.find("allreduce_slowdown has no effect under training.data_parallel \"hybrid\"") != std::string::npos);
  CHECK(hybrid.find("not beside the allreduce across groups") != std::string::npos);
}
