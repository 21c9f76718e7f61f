// ZeRO-2 in the fast step engine against hand-computed steps: DDP's buckets reduce-scattered
// (the ring all-gather's alpha-beta time, half the allreduce's traffic), a G-th of the
// optimizer, then the parameters all-gathered; memory per ZeRO's stage-2 formula; its keys.
#include <doctest/doctest.h>

#include <algorithm>

#include "common/error.hpp"
#include "eval/config.hpp"
#include "eval/sharding.hpp"
#include "model/perf_model.hpp"
#include "zero_steps.hpp"

using namespace ddpsim;

TEST_CASE("ZeRO-2 reduce-scatters DDP's buckets in half an allreduce's time") {
  const FastEngine ddp(test::zero_setup("ddp", true)), zero2(test::zero_setup("zero2", true));
  CHECK(ddp.allreduce_ms().at(40e6) == doctest::Approx(test::ring4_ms(40e6, 2)).epsilon(1e-9));
  CHECK(zero2.allreduce_ms().at(40e6) == doctest::Approx(test::ring4_ms(40e6, 1)).epsilon(1e-9));
  CHECK(zero2.allreduce_ms().at(60e6) == doctest::Approx(test::ring4_ms(60e6, 1)).epsilon(1e-9));
}

TEST_CASE("without overlap: backward, the reduce-scatters, a quarter of the optimizer, the parameters' gather") {
  const RankWork w{0, 30, 60, 8};
  const RankTiming t = test::alike_step(test::zero_setup("zero2", false), w);
  const double expected =
      30 + 60 + test::ring4_ms(40e6, 1) + test::ring4_ms(60e6, 1) + 8.0 / 4 + test::ring4_ms(100e6, 1);
  CHECK(t.step_ms == doctest::Approx(expected).epsilon(1e-12));
  CHECK(t.opt_ms == doctest::Approx(2.0));
  CHECK(t.comm_wait_ms == doctest::Approx(expected - 30 - 60 - 2));
  // DDP's step on the same work: the allreduces and the whole optimizer.
  const RankTiming d = test::alike_step(test::zero_setup("ddp", false), w);
  CHECK(d.step_ms == doctest::Approx(30 + 60 + test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2) + 8).epsilon(1e-12));
}

TEST_CASE("with overlap, compute-bound: the first bucket hides behind backward, the last does not") {
  const RankWork w{0, 300, 600, 8};
  const RankTiming t = test::alike_step(test::zero_setup("zero2", true), w);
  CHECK(t.step_ms ==
        doctest::Approx(300 + 600 + test::ring4_ms(60e6, 1) + 2 + test::ring4_ms(100e6, 1)).epsilon(1e-12));
}

TEST_CASE("with gradient accumulation every micro-batch reduce-scatters its buckets, beside the next one's compute") {
  RankWork w{0, 300, 600, 8};
  w.earlier = {{300, 600}};
  // Compute-bound: the first micro-batch's last bucket hides behind the second's forward.
  CHECK(test::alike_step(test::zero_setup("zero2", true), w).step_ms ==
        doctest::Approx(2 * (300 + 600) + test::ring4_ms(60e6, 1) + 2 + test::ring4_ms(100e6, 1)).epsilon(1e-12));
  // Communication-bound: both micro-batches' reduce-scatters in a row; DDP reduces once.
  RankWork tiny{0, 1e-6, 1e-6, 8};
  tiny.earlier = {{1e-6, 1e-6}};
  const double buckets = test::ring4_ms(40e6, 1) + test::ring4_ms(60e6, 1);
  CHECK(test::alike_step(test::zero_setup("zero2", false), tiny).step_ms ==
        doctest::Approx(2 * buckets + 2 + test::ring4_ms(100e6, 1)).epsilon(1e-6));
  CHECK(test::alike_step(test::zero_setup("ddp", false), tiny).step_ms ==
        doctest::Approx(test::ring4_ms(40e6, 2) + test::ring4_ms(60e6, 2) + 8).epsilon(1e-6));
  const RankTiming t = test::alike_step(test::zero_setup("zero2", true), w);
  CHECK(t.fwd_ms == doctest::Approx(600));
  CHECK(t.bwd_ms == doctest::Approx(1200));
}

TEST_CASE("ZeRO-2 memory: the weights whole, gradients and optimizer state over G") {
  const PerfModel m = load_perf_model("h100-distilbert");
  constexpr double MiB = 1024.0 * 1024.0;
  const double psi = 66'955'010.0, state = psi * 16 / MiB, weights = psi * m.bytes_per_param / MiB;
  const Config c = parse_config(
      nlohmann::json{{"model", "h100-distilbert"}, {"training", {{"data_parallel", "zero2"}, {"world_size", 8}}}},
      "c.json", "");
  // ZeRO's stage 2: 2Ψ + 14Ψ/N in mixed precision, 4Ψ + 12Ψ/N in fp32 (the gradients' size).
  const double held = weights + (state - weights) / 8;
  CHECK(c.model->mem_m0_mib == doctest::Approx(m.mem_m0_mib + std::max(held - m.mem_m0_mib, held - state)));
  CHECK(c.training.shard_group == 8);
}

TEST_CASE("ZeRO-2's refusals name their keys; DDP's bucket keys are its own") {
  const auto refused = [](const nlohmann::json& doc, const char* says) {
    CHECK_THROWS_WITH_AS(parse_config(doc, "c.json", ""), doctest::Contains(says), InputError);
  };
  refused({{"training", {{"data_parallel", "zero2"}, {"reshard_after_forward", false}}}},
          "data_parallel \"zero2\" holds every parameter throughout");
  refused({{"training", {{"data_parallel", "zero2"}, {"shard_group", 2}}}}, "shards over all the ranks");
  refused({{"training", {{"data_parallel", "zero2"}, {"no_sync", true}}}},
          "data_parallel \"zero2\" reduce-scatters every micro-batch's gradients");
  const Config c =
      parse_config(nlohmann::json{{"training", {{"data_parallel", "zero2"}, {"overlap", false}}}}, "c.json", "");
  CHECK(c.notes.empty());  // overlap and buckets set ZeRO-2's reduce-scatters
}

TEST_CASE("ZeRO-2's fast mode says what it leaves out of a model with interference factors and micro-batches") {
  const auto notes = [](int micro, const char* mode) {
    const nlohmann::json doc = {
        {"model", DDPSIM_SOURCE_DIR "/models/cpu-distilbert-small-2ranks.json"},
        {"training", {{"data_parallel", "zero2"}, {"world_size", 2}, {"global_batch", 16}, {"micro_batches", micro}}},
        {"simulation", {{"mode", mode}}}};
    std::string all;
    for (const std::string& note : parse_config(doc, "c.json", "").notes) all += note + "\n";
    return all;
  };
  CHECK(notes(2, "fast").find("ZeRO-2's fast mode leaves out how model") != std::string::npos);
  CHECK(notes(2, "full").find("ZeRO-2's fast mode") == std::string::npos);
  CHECK(notes(1, "fast").find("ZeRO-2's fast mode") == std::string::npos);
}
