// Performance model files and DDP bucketing.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "model/buckets.hpp"
#include "model/perf_model.hpp"

using namespace ddpsim;

namespace {

nlohmann::json minimal() {
  return {{"name", "m"},
          {"source", "test"},
          {"forward_ms", {{"a", 1.0}, {"beta", 0.01}, {"gamma", 0.001}}},
          {"backward_ms", {{"a", 2.0}, {"beta", 0.02}, {"gamma", 0.0}}},
          {"optimizer_ms", 3.0},
          {"layers",
           {{{"name", "a"}, {"params", 1000}, {"bwd_fraction", 1}},
            {{"name", "b"}, {"params", 3000}, {"bwd_fraction", 3}}}}};
}

}  // namespace

TEST_CASE("phase times follow a + beta b L + gamma b L^2") {
  const PerfModel m = parse_perf_model(minimal(), "m.json");
  CHECK(m.fwd_ms(4, 10) == doctest::Approx(1.0 + 0.01 * 40 + 0.001 * 400));
  CHECK(m.bwd_ms(4, 10) == doctest::Approx(2.0 + 0.02 * 40));
  CHECK(m.layers[1].bwd_fraction == doctest::Approx(0.75));  // weights are normalised
}

TEST_CASE("the built-in models load and describe DistilBERT") {
  for (const auto& name : builtin_model_names()) {
    const PerfModel m = load_perf_model(name);
    CHECK(m.total_params() == 66955010);  // distilbert-base-uncased + sequence-classification head
    CHECK(m.source.find(name == "h100-distilbert" ? "measured: ddptrain --profile" : "derived, not profiled") !=
          std::string::npos);
    CHECK(m.max_batch(256) > 64);
  }
}

TEST_CASE("the built-ins bucket their gradients as PyTorch's reducer does: the HF-derived layout, at any cap") {
  const PerfModel spec = derive_perf_model({{"hf_config", DDPSIM_SOURCE_DIR "/models/hf/distilbert-base-uncased.json"},
                                            {"gpu", "h100-sxm"},
                                            {"dtype", "fp32"},
                                            {"efficiency", 0.5}},
                                           "spec");
  for (const auto& name : builtin_model_names()) {
    const PerfModel m = load_perf_model(name);
    REQUIRE(m.layers.size() == spec.layers.size());
    for (std::size_t i = 0; i < m.layers.size(); ++i) CHECK(m.layers[i].name == spec.layers[i].name);
    for (const auto& caps : {std::pair{25.0, 1.0}, {10.0, 0.5}, {4.0, 4.0}}) {
      const double cap = caps.first, first = caps.second;  // named, not bound: clang 14 captures no binding
      CAPTURE(cap);
      const auto a = make_buckets(m, cap * 1024 * 1024, first * 1024 * 1024);
      const auto b = make_buckets(spec, cap * 1024 * 1024, first * 1024 * 1024);
      REQUIRE(a.size() == b.size());
      for (std::size_t k = 0; k < a.size(); ++k) CHECK(a[k].bytes == b[k].bytes);
    }
  }
  // Beyond its measured grid the H100 model grows as the spec derivation does (the script that
  // writes it copies these figures).
  const PerfModel h100 = load_perf_model("h100-distilbert");
  CHECK(h100.forward.analytic.beta_ms == doctest::Approx(spec.forward.analytic.beta_ms).epsilon(1e-8));
  CHECK(h100.backward.analytic.gamma_ms == doctest::Approx(spec.backward.analytic.gamma_ms).epsilon(1e-8));
  CHECK(h100.measured_reach() == std::pair{128, 512});
}

TEST_CASE("DDP buckets: reverse layer order, a small first bucket, caps close a bucket") {
  const PerfModel m = load_perf_model("rtx3090-distilbert");
  constexpr double MiB = 1024.0 * 1024.0;
  const auto buckets = make_buckets(m, 25 * MiB, 1 * MiB);
  double total = 0, previous = 0;
  for (const Bucket& b : buckets) {
    total += b.bytes;
    CHECK(b.ready_fraction > previous);
    previous = b.ready_fraction;
  }
  CHECK(total == doctest::Approx(66955010.0 * 4));
  CHECK(buckets.front().bytes >= 1 * MiB);
  CHECK(buckets.front().bytes < 25 * MiB);
  CHECK(buckets.back().bytes > 89 * MiB);  // the word embeddings, the last gradient, alone
  CHECK(buckets.back().ready_fraction == 1.0);
  CHECK(make_buckets(m, 1e12, 1e12).size() == 1);
}

TEST_CASE("malformed model files are named with the field at fault") {
  auto broken = minimal();
  broken.erase("optimizer_ms");  // optional
  broken["backward_ms"].erase("gamma");
  CHECK_THROWS_WITH_AS(parse_perf_model(broken, "m.json"), doctest::Contains("m.json: backward_ms: missing \"gamma\""),
                       InputError);
  broken = minimal();
  broken["forward_ms"]["beta"] = -1;
  CHECK_THROWS_WITH_AS(parse_perf_model(broken, "m.json"), doctest::Contains("m.json: forward_ms: beta must be"),
                       InputError);
  broken = minimal();
  broken["forward_ms"]["delta"] = 1;
  CHECK_THROWS_WITH_AS(parse_perf_model(broken, "m.json"), doctest::Contains("unknown key \"delta\""), InputError);
  broken = minimal();
  broken["precision"] = "int8";
  CHECK_THROWS_WITH_AS(
      parse_perf_model(broken, "m.json"),
      doctest::Contains("m.json: precision is \"fp32\", \"tf32\", \"bf16\", \"fp16\" or \"fp8\", got \"int8\""),
      InputError);
  broken = minimal();
  broken.erase("source");
  CHECK_THROWS_WITH_AS(parse_perf_model(broken, "m.json"), doctest::Contains("missing key \"source\""), InputError);
  broken = minimal();
  broken["layers"][1]["params"] = "many";
  CHECK_THROWS_WITH_AS(parse_perf_model(broken, "m.json"), doctest::Contains("m.json: layers[1]"), InputError);
  CHECK_THROWS_WITH_AS(load_perf_model("/nonexistent/model.json"), doctest::Contains("cannot open"), InputError);
}

TEST_CASE("a grid-form phase is exact at its points, bilinear between, anchored to the analytic shape outside") {
  nlohmann::json doc = minimal();
  doc["forward_ms"]["form"] = "grid";
  doc["forward_ms"]["grid"] = {{"b", {1, 4}}, {"L", {10, 20}}, {"ms", {{1.0, 3.0}, {2.0, 8.0}}}};
  const PerfModel m = parse_perf_model(doc, "m.json");
  CHECK(m.fwd_ms(1, 10) == 1.0);
  CHECK(m.fwd_ms(4, 20) == 8.0);
  CHECK(m.fwd_ms(1, 15) == doctest::Approx(2.0));  // halfway along L
  CHECK(m.fwd_ms(4, 15) == doctest::Approx(5.0));
  const double edge = 8.0, ratio = m.forward.analytic.at(8, 40) / m.forward.analytic.at(4, 20);
  CHECK(m.fwd_ms(8, 40) == doctest::Approx(edge * ratio));     // beyond the table
  CHECK(m.bwd_ms(4, 10) == doctest::Approx(2.0 + 0.02 * 40));  // the analytic phase is untouched
  // Beyond the table a prediction is the analytic form's extrapolation, and says so.
  CHECK(m.measured_reach() == std::pair{4, 20});
  CHECK(m.extrapolation_note(4, 20).empty());
  CHECK(m.extrapolation_note(1, 3).empty());  // below: held at the edge, still measured ground
  CHECK(m.extrapolation_note(8, 20).find("measured up to b = 4, L = 20; shapes up to b = 8, L = 20") !=
        std::string::npos);
  CHECK(m.extrapolation_note(8, 20, true)
            .find("a rank's even share of the batch at the data's longest length, b = 8, "
                  "L = 20, lies beyond") != std::string::npos);
  CHECK_FALSE(m.extrapolation_note(4, 21).empty());
  CHECK(parse_perf_model(minimal(), "m.json").extrapolation_note(1000, 1000).empty());  // no measured range

  auto rejected = [&](nlohmann::json grid, const char* message) {
    nlohmann::json bad = minimal();
    bad["forward_ms"]["form"] = "grid";
    bad["forward_ms"]["grid"] = std::move(grid);
    CHECK_THROWS_WITH_AS(parse_perf_model(bad, "m.json"), doctest::Contains(message), InputError);
  };
  rejected({{"b", {1, 4}}, {"L", {10, 20}}, {"ms", {{1.0, 3.0}, {2.0, 2.5}}}},
           "m.json: forward_ms: grid: ms at b=4, L=20 is below a smaller batch's or length's time");
  rejected({{"b", {4, 1}}, {"L", {10}}, {"ms", {{1.0}, {2.0}}}}, "strictly increasing batch sizes");
  rejected({{"b", {1}}, {"L", {10, 20}}, {"ms", {{1.0}}}}, "ms row 0 must have one value per length");
  nlohmann::json no_grid = minimal();
  no_grid["forward_ms"]["form"] = "grid";
  CHECK_THROWS_WITH_AS(parse_perf_model(no_grid, "m.json"), doctest::Contains("form \"grid\" needs a \"grid\""),
                       InputError);
  nlohmann::json slow = minimal();
  slow["comm_slowdown"] = 0.5;
  CHECK_THROWS_WITH_AS(parse_perf_model(slow, "m.json"), doctest::Contains("comm_slowdown must be in [1, 100]"),
                       InputError);
  slow["comm_slowdown"] = -1;  // the same message below 0 as between 0 and 1, echoing the value as written
  CHECK_THROWS_WITH_AS(parse_perf_model(slow, "m.json"),
                       "m.json: comm_slowdown must be in [1, 100] (1: compute is not slowed by "
                       "communication), got -1",
                       InputError);
  slow = minimal();
  slow["allreduce_slowdown"] = 101;
  CHECK_THROWS_WITH_AS(parse_perf_model(slow, "m.json"), doctest::Contains("allreduce_slowdown must be in [1, 100]"),
                       InputError);
}

TEST_CASE("slow spells: a quantile table scaled to median one on load, drawn linearly between its points") {
  auto doc = minimal();
  doc["noise"] = {{"sigma", 0.01}, {"spells", {1.6, 2.0, 4.4}}};  // median 2.0
  const PerfModel m = parse_perf_model(doc, "m.json");
  REQUIRE(m.spell_quantiles.size() == 3);
  CHECK(m.spell_quantiles[1] == 1.0);
  CHECK(quantile_table_at(m.spell_quantiles, 0.25) == doctest::Approx(0.9));
  CHECK(quantile_table_at(m.spell_quantiles, 1.0) == doctest::Approx(2.2));
  CHECK(quantile_table_mean(m.spell_quantiles) == doctest::Approx((0.9 + 1.6) / 2));
  for (const auto& [spells, message] : std::vector<std::pair<nlohmann::json, std::string>>{
           {{1.0}, "m.json: noise: spells has 1 value(s): expected an array of at least 2"},
           {"wide", "m.json: noise: spells is string: expected an array of at least 2"},
           {{1.0, 0.5},
            "m.json: noise: spells[1] is number 0.5: expected a number in (0, 1e6], at least the one before"},
           {{0.0, 1.0}, "m.json: noise: spells[0] is number 0.0: expected a number in (0, 1e6]"},
           {{1.0, "x"}, "m.json: noise: spells[1]"}}) {
    const nlohmann::json& given = spells;  // named, not bound: clang 14 captures no binding
    CAPTURE(given);
    doc["noise"]["spells"] = spells;
    CHECK_THROWS_WITH_AS(parse_perf_model(doc, "m.json"), doctest::Contains(message.c_str()), InputError);
  }
}
