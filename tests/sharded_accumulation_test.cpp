// Gradient accumulation under FSDP and HSDP, against hand-computed steps on the α–β platform:
// every micro-batch gathers every unit again, and reduce-scatters its gradients (or, under
// no_sync, only the last one does); an imbalance is paid per micro-batch, not on the step's
// totals as under DDP; HSDP allreduces across groups as often as it reduce-scatters; the
// memory no_sync adds; and the refusals.
#include <doctest/doctest.h>

#include <algorithm>

#include "alpha_beta.hpp"
#include "common/error.hpp"
#include "eval/config.hpp"
#include "eval/sharding.hpp"

using namespace ddpsim;

namespace {

// A root unit of 100 MB (a tenth of the compute) and `blocks` of 50 MB.
EngineSetup fsdp_setup(int G, int blocks, bool no_sync) {
  EngineSetup s = test::alpha_beta_setup(G);
  s.sharding = "fsdp";
  s.no_sync = no_sync;
  s.units.push_back({100e6, 0.1, true});
  for (int b = 0; b < blocks; ++b) s.units.push_back({50e6, 0.9 / blocks, false});
  return s;
}

double gather_ms(int G, double bytes) {
  return test::ring_ms(G, bytes, 1);
}

// A rank's step of two micro-batches, the first (fwd0, bwd0), the last (fwd1, bwd1).
RankWork two(double fwd0, double bwd0, double fwd1, double bwd1, double opt = 8) {
  RankWork w{0, fwd1, bwd1, opt};
  w.earlier = {{fwd0, bwd0}};
  return w;
}

using test::one_step;

}  // namespace

TEST_CASE("compute-bound, two micro-batches: each pays the root's gather, a block's re-gather and a reduce-scatter") {
  // The first micro-batch's last reduce-scatter (the root's, once its backward ends) holds the
  // stream, so the second one's root gather waits for it.
  const RankWork w = two(400, 800, 400, 800);
  const double root = gather_ms(4, 100e6), block = gather_ms(4, 50e6);
  const double micro = root + 400 + block + 800 + root;
  for (const RankTiming& t : one_step(fsdp_setup(4, 4, false), std::vector<RankWork>(4, w))) {
    CHECK(t.step_ms == doctest::Approx(2 * micro + 8.0 / 4).epsilon(1e-12));
    CHECK(t.fwd_ms == doctest::Approx(800));
    CHECK(t.bwd_ms == doctest::Approx(1600));
  }
  // no_sync: the first micro-batch reduce-scatters nothing.
  for (const RankTiming& t : one_step(fsdp_setup(4, 4, true), std::vector<RankWork>(4, w)))
    CHECK(t.step_ms == doctest::Approx(2 * micro - root + 8.0 / 4).epsilon(1e-12));
}

TEST_CASE("communication-bound: every micro-batch gathers again; no_sync drops all but the last reduce-scatters") {
  const RankWork w = two(1e-6, 1e-6, 1e-6, 1e-6, 0);
  const double root = gather_ms(4, 100e6), block = gather_ms(4, 50e6);
  const double gathers = (root + 3 * block) + 3 * block, scatters = root + 3 * block;
  CHECK(one_step(fsdp_setup(4, 3, false), std::vector<RankWork>(4, w))[0].step_ms ==
        doctest::Approx(2 * (gathers + scatters)).epsilon(1e-6));
  CHECK(one_step(fsdp_setup(4, 3, true), std::vector<RankWork>(4, w))[0].step_ms ==
        doctest::Approx(2 * gathers + scatters).epsilon(1e-6));
  // Without resharding, no_sync keeps the first micro-batch's units gathered for the second
  // (FSDP frees them in backward only where it reshards after forward)...
  EngineSetup kept = fsdp_setup(4, 3, true);
  kept.reshard_after_forward = false;
  CHECK(one_step(kept, std::vector<RankWork>(4, w))[0].step_ms ==
        doctest::Approx(root + 3 * block + scatters).epsilon(1e-6));
  // ...and with every micro-batch reduce-scattering, it gathers them again for each.
  kept.no_sync = false;
  CHECK(one_step(kept, std::vector<RankWork>(4, w))[0].step_ms ==
        doctest::Approx(2 * (root + 3 * block + scatters)).epsilon(1e-6));
}

TEST_CASE("an imbalance is paid per micro-batch: equal totals, swapped halves, cost FSDP what DDP does not pay") {
  // Ranks 0 and 1 have the same totals, one slow in the first micro-batch, the other in the
  // second. Under DDP's no_sync only the totals meet (at the allreduce); under FSDP every
  // micro-batch's units meet, so each pays its slow rank.
  const RankWork a = two(60, 120, 40, 80), b = two(40, 80, 60, 120), even = two(50, 100, 50, 100);
  const auto swapped = one_step(fsdp_setup(2, 4, true), {a, b});
  const auto balanced = one_step(fsdp_setup(2, 4, true), {even, even});
  CHECK(swapped[0].step_ms == doctest::Approx(swapped[1].step_ms));
  CHECK(swapped[0].step_ms >= balanced[0].step_ms + 2 * (60 + 120 - 50 - 100) - 1e-6);
  EngineSetup ddp = test::alpha_beta_setup(2);
  ddp.buckets = {{50e6, 1.0}};
  CHECK(one_step(ddp, {a, b})[0].step_ms == doctest::Approx(one_step(ddp, {even, even})[0].step_ms).epsilon(1e-12));
}

TEST_CASE("HSDP allreduces each unit's shard across the groups once per reduce-scatter") {
  for (const bool no_sync : {false, true}) {
    CAPTURE(no_sync);
    EngineSetup s = fsdp_setup(8, 3, no_sync);
    s.sharding = "hybrid";
    s.shard_group = 4;
    s.timeline_to = 1;
    FastEngine engine(s);
    engine.start_policy();
    PolicyTimes out;
    RankWork w = two(5, 10, 5, 10);
    w.earlier.push_back({5, 10});  // three micro-batches
    engine.advance(PolicyWork{1, false, std::vector<RankWork>(8, w)}, out);
    const auto count = [&](const std::string& prefix, bool comm) {
      return std::count_if(out.spans.begin(), out.spans.end(), [&](const Span& span) {
        return span.rank == 0 && span.comm == comm && span.name.rfind(prefix, 0) == 0;
      });
    };
    CHECK(count("allreduce across groups", true) == (no_sync ? 4 : 3 * 4));
    CHECK(count("reduce-scatter", true) == (no_sync ? 4 : 3 * 4));
    CHECK(count("forward (units)", false) == 3);
    CHECK(count("backward (units)", false) == 3);
    CHECK(out.timing[0].fwd_ms == doctest::Approx(15));
  }
}

TEST_CASE("no_sync holds the unsharded gradients; every rank of a sharded step runs as many micro-batches") {
  const auto m0 = [](bool no_sync) {
    return parse_config(nlohmann::json{{"model", "h100-distilbert"},
                                       {"training",
                                        {{"data_parallel", "fsdp"},
                                         {"world_size", 8},
                                         {"global_batch", 32},
                                         {"micro_batches", 2},
                                         {"no_sync", no_sync}}}},
                        "c.json", "")
        .model->mem_m0_mib;
  };
  const PerfModel m = load_perf_model("h100-distilbert");
  constexpr double MiB = 1024.0 * 1024.0;
  CHECK(m0(true) - m0(false) ==
        doctest::Approx(double(m.total_params()) * m.bytes_per_param / MiB * (1 - 1.0 / 8)).epsilon(1e-9));

  Config c =
      parse_config(nlohmann::json{{"training", {{"data_parallel", "fsdp"}, {"micro_batches", 2}}}}, "c.json", "");
  PolicyRun run;
  run.label = "minmax";
  run.G = 2;
  run.rows.resize(4);
  for (std::size_t i = 0; i < 4; ++i) {
    run.rows[i].step = static_cast<int>(i / 2);
    run.rows[i].rank = static_cast<int>(i % 2);
    run.rows[i].micro.resize(2);
  }
  CHECK_NOTHROW(check_equal_micro_batches(c, run));
  run.rows[3].micro.resize(1);
  CHECK_THROWS_WITH_AS(check_equal_micro_batches(c, run),
                       doctest::Contains("policy minmax, step 1: rank 0 runs 2 micro-batches and rank 1 runs 1"),
                       InputError);
}

TEST_CASE("b_max \"model\" caps a rank's batch per micro-batch: M even micro-batches of what fits") {
  const auto cap = [](int micro) {
    return parse_config(nlohmann::json{{"model", "h100-distilbert"},
                                       {"training",
                                        {{"world_size", 4},
                                         {"global_batch", 64},
                                         {"max_length", 512},
                                         {"micro_batches", micro},
                                         {"b_max", "model"}}}},
                        "c.json", "")
        .training.b_max;
  };
  const PerfModel m = load_perf_model("h100-distilbert");
  CHECK(cap(1) == std::vector<int>(4, m.max_batch(512)));
  CHECK(cap(4) == std::vector<int>(4, 4 * m.max_batch(512)));
}
