// ZeRO-1 (stage 1, an even partition) against hand-computed steps: DDP's buckets
// allreduced with DDP's algorithm, a G-th of the optimizer's update, then the parameters all-gathered;
// full mode against fast mode; memory per ZeRO's stage-1 formula; its keys.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>

#include "calib/zero_fit.hpp"
#include "cli/run_report.hpp"
#include "common/error.hpp"
#include "engine/step_sim.hpp"
#include "eval/config.hpp"
#include "model/perf_model.hpp"
#include "zero_steps.hpp"

using namespace ddpsim;

namespace {

Config config(const nlohmann::json& training, const nlohmann::json& simulation = nlohmann::json::object()) {
  return parse_config(nlohmann::json{{"model", "h100-distilbert"}, {"training", training}, {"simulation", simulation}},
                      "c.json", "");
}

}  // namespace

TEST_CASE("ZeRO-1 allreduces DDP's buckets as DDP does") {
  const FastEngine zero1(test::zero_setup("zero1", true));
  CHECK(zero1.allreduce_ms().at(40e6) == doctest::Approx(test::ring4_ms(40e6, 2)).epsilon(1e-9));
  CHECK(zero1.allreduce_ms().at(60e6) == doctest::Approx(test::ring4_ms(60e6, 2)).epsilon(1e-9));
}

TEST_CASE("without overlap: backward, the allreduces, a quarter of the optimizer, the parameters' gather") {
  const RankWork w{0, 30, 60, 8};
  const RankTiming t = test::alike_step(test::zero_setup("zero1", false), w);
  const double expected =
      30 + 60 + test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2) + 8.0 / 4 + test::ring4_ms(100e6, 1);
  CHECK(t.step_ms == doctest::Approx(expected).epsilon(1e-12));
  CHECK(t.opt_ms == doctest::Approx(2.0));
  CHECK(t.comm_wait_ms == doctest::Approx(expected - 30 - 60 - 2));
}

TEST_CASE("with gradient accumulation ZeRO-1 reduces once, after the last micro-batch, as DDP does") {
  RankWork tiny{0, 1e-6, 1e-6, 8};
  tiny.earlier = {{1e-6, 1e-6}, {1e-6, 1e-6}};
  CHECK(
      test::alike_step(test::zero_setup("zero1", false), tiny).step_ms ==
      doctest::Approx(test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2) + 2 + test::ring4_ms(100e6, 1)).epsilon(1e-6));
}

TEST_CASE("ZeRO-1 in full mode gives fast mode's steps, and names the same spans") {
  for (const bool overlap : {true, false}) {
    CAPTURE(overlap);
    EngineSetup s = test::zero_setup("zero1", overlap);
    s.timeline_from = 0, s.timeline_to = 2;
    std::vector<RankWork> work;
    for (int g = 0; g < 4; ++g) work.push_back({0, 20.0 + 5 * g, 40.0 + 7 * g, 8});
    PolicyWork pw;
    pw.steps = 2;
    for (int i = 0; i < 2; ++i) pw.work.insert(pw.work.end(), work.begin(), work.end());
    s.mode = "fast";
    const EngineResult fast = simulate_steps(s, {pw});
    s.mode = "full";
    const EngineResult full = simulate_steps(s, {pw});
    REQUIRE(fast.policies[0].timing.size() == full.policies[0].timing.size());
    for (std::size_t i = 0; i < fast.policies[0].timing.size(); ++i)
      CHECK(full.policies[0].timing[i].step_ms == doctest::Approx(fast.policies[0].timing[i].step_ms).epsilon(1e-9));
    std::multiset<std::string> fast_names, full_names;
    for (const Span& span : fast.policies[0].spans) fast_names.insert(span.name);
    for (const Span& span : full.policies[0].spans) full_names.insert(span.name);
    CHECK(fast_names == full_names);
    CHECK(full_names.count("all-gather parameters") == 8);
    CHECK(full_names.count("optimizer (shard)") == 8);
  }
}

TEST_CASE("ZeRO-1 memory: weights and gradients whole, optimizer state over G") {
  const PerfModel m = load_perf_model("h100-distilbert");
  constexpr double MiB = 1024.0 * 1024.0;
  const double psi = 66'955'010.0, state = psi * 16 / MiB, whole = 2 * psi * m.bytes_per_param / MiB;
  const Config c = config({{"data_parallel", "zero1"}, {"world_size", 8}});
  // ZeRO's stage 1: 4Ψ + 12Ψ/N in mixed precision, 8Ψ + 8Ψ/N in fp32 (the gradients' size).
  const double held = whole + (state - whole) / 8;
  CHECK(c.model->mem_m0_mib == doctest::Approx(m.mem_m0_mib + std::max(held - m.mem_m0_mib, held - state)));
  const Config zero2 = config({{"data_parallel", "zero2"}, {"world_size", 8}});
  CHECK(c.model->mem_m0_mib > zero2.model->mem_m0_mib);  // ZeRO-2 shards the gradients too
}

TEST_CASE("ZeRO-1 keeps DDP's allreduce algorithm and accumulation, and refuses FSDP's keys") {
  const Config tree = config({{"data_parallel", "zero1"}}, {{"algorithm", "tree"}});
  CHECK(cli::data_parallel_line(tree, 3).rfind("data parallel: zero1 (gradients allreduced in 3 buckets, tree, ", 0) ==
        0);
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "zero2"}}, {{"algorithm", "tree"}}),
                       doctest::Contains("gathers and reduce-scatters in rings"), InputError);
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "zero1"}, {"no_sync", true}}),
                       doctest::Contains("data_parallel \"zero1\" accumulates under DDP's no_sync always"), InputError);
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "zero1"}, {"shard_group", 2}}),
                       doctest::Contains("shards over all the ranks"), InputError);
  CHECK_THROWS_WITH_AS(config({{"data_parallel", "zero3"}}),
                       doctest::Contains("\"zero1\" (that allreduce, optimizer state sharded)"), InputError);
}

TEST_CASE("allgather_factor stretches ZeRO's parameter all-gather alone, in fast and in full mode") {
  const RankWork w{0, 30, 60, 8};
  EngineSetup s = test::zero_setup("zero1", false);
  s.allgather_factor = 2.5;
  const double ring = test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2);
  CHECK(test::alike_step(s, w).step_ms ==
        doctest::Approx(30 + 60 + ring + 2 + 2.5 * test::ring4_ms(100e6, 1)).epsilon(1e-12));
  s.sharding = "zero2";
  CHECK(test::alike_step(s, w).step_ms == doctest::Approx(30 + 60 + test::ring4_ms(40e6, 1) + test::ring4_ms(60e6, 1) +
                                                          2 + 2.5 * test::ring4_ms(100e6, 1))
                                              .epsilon(1e-12));
  s.mode = "full";
  const auto full_step = [&] {
    return simulate_steps(s, {PolicyWork{1, false, std::vector<RankWork>(4, w)}}).policies[0].timing[0].step_ms;
  };
  CHECK(full_step() == doctest::Approx(30 + 60 + test::ring4_ms(40e6, 1) + test::ring4_ms(60e6, 1) + 2 +
                                       2.5 * test::ring4_ms(100e6, 1))
                           .epsilon(1e-9));
  s.sharding = "ddp";  // DDP gathers nothing
  CHECK(full_step() == doctest::Approx(30 + 60 + ring + 8).epsilon(1e-9));
}

TEST_CASE("optimizer_update_share: a rank steps a G-th of the update and all of the rest, in either mode") {
  const RankWork w{0, 30, 60, 8};
  EngineSetup s = test::zero_setup("zero1", false);
  s.optimizer_update_share = 0.6;
  const double opt = 8 * (0.4 + 0.6 / 4), ring = test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2);
  const RankTiming fast = test::alike_step(s, w);
  CHECK(fast.opt_ms == doctest::Approx(opt));
  CHECK(fast.step_ms == doctest::Approx(30 + 60 + ring + opt + test::ring4_ms(100e6, 1)).epsilon(1e-12));
  s.mode = "full";
  const auto full = simulate_steps(s, {PolicyWork{1, false, std::vector<RankWork>(4, w)}}).policies[0].timing[0];
  CHECK(full.opt_ms == doctest::Approx(opt));
  CHECK(full.step_ms == doctest::Approx(fast.step_ms).epsilon(1e-9));
}

TEST_CASE("calibrate takes the profile's optimizer_update_share; a value outside [0, 1] names its trace") {
  Trace a, b;
  a.path = "a.csv", b.path = "b.csv";
  CHECK(std::isnan(optimizer_update_share({a, b})));
  a.metadata["optimizer_update_share"] = "0.6";
  b.metadata["optimizer_update_share"] = "0.8";
  CHECK(optimizer_update_share({a, b}) == doctest::Approx(0.7));
  nlohmann::ordered_json model;
  add_update_share(model, 0.7);
  CHECK(model["optimizer_update_share"] == doctest::Approx(0.7));
  b.metadata["optimizer_update_share"] = "1.5";
  CHECK_THROWS_WITH_AS(optimizer_update_share({a, b}), doctest::Contains("b.csv: metadata optimizer_update_share=1.5"),
                       InputError);
}

TEST_CASE("calibrate fits allgather_factor at the profiled size nearest the parameters, against the ring") {
  Calibration c;
  c.has_allreduce = true;
  c.allreduce_ranks = 2;
  c.allreduce_step_latency_us = 1000;
  c.allreduce_link_GBps = 2;
  Trace t;
  t.path = "p.csv";
  t.metadata["allgather"] = "1048576:2.5,40000000:33.0,67108864:60";
  // The ring at 40 MB: 1 step of 1 ms + 20 MB over 2 GB/s = 11 ms; measured 33: ×3.
  const AllgatherFit fit = fit_allgather(allgather_timings({t}), c, 44e6);
  REQUIRE(fit.fitted);
  CHECK(fit.bytes == 40e6);
  CHECK(fit.ring_ms == doctest::Approx(11.0));
  CHECK(fit.factor == doctest::Approx(3.0));
  nlohmann::ordered_json model;
  add_allgather(model, fit);
  CHECK(model["allgather_factor"] == doctest::Approx(3.0));
  t.metadata["allgather"] = "1048576:0.1";  // faster than the ring: no factor below 1
  CHECK(fit_allgather(allgather_timings({t}), c, 44e6).factor == 1);
  t.metadata["allgather"] = "1048576;2.5";
  CHECK_THROWS_WITH_AS(allgather_timings({t}), doctest::Contains("p.csv: metadata allgather=1048576;2.5"), InputError);
  t.metadata["allgather"] = "1048576:2.5,1048576:2.6";
  CHECK_THROWS_WITH_AS(allgather_timings({t}), doctest::Contains("1048576 bytes timed twice"), InputError);
  t.metadata["allgather"] = "1048576:2.5";
  c.allreduce_link_GBps = std::nan("");  // no bandwidth resolved: no ring to compare with, and the report says so
  const AllgatherFit unfitted = fit_allgather(allgather_timings({t}), c, 44e6);
  CHECK_FALSE(unfitted.fitted);
  CHECK(allgather_report(unfitted).find("no allgather_factor: the allreduce fit resolved no link bandwidth") !=
        std::string::npos);
}

TEST_CASE("a model's allgather_factor is in [1, 100]") {
  std::ifstream in(DDPSIM_SOURCE_DIR "/models/cpu-distilbert-small-2ranks.json");
  nlohmann::json m = nlohmann::json::parse(in);
  m["allgather_factor"] = 0.5;
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m.json"), doctest::Contains("m.json: allgather_factor must be in [1, 100]"),
                       InputError);
  m["allgather_factor"] = 2.7;
  CHECK(parse_perf_model(m, "m.json").allgather_factor == doctest::Approx(2.7));
}
