// Levels by batch size (calibrate --training's noise.steps_levels_by_samples): runs simulated at
// known levels for rank-steps of 4 and of 8 samples calibrate back to them, a size one run
// alone trained gets no table, and the simulator charges a rank-step its size's level.
#include <doctest/doctest.h>

#include <cmath>

#include "calib/training_fit.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "eval/simulate.hpp"
#include "known_surface.hpp"

using namespace ddpsim;

namespace {

// Rank-steps of 4 samples run at 1.3 of the surface, of 8 samples at 0.85, whatever their tokens.
nlohmann::json sized_model(bool with_levels) {
  nlohmann::json m = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  m["name"] = "sized";
  m["forward_ms"] = {{"a", 2.0}, {"beta", 0.002}, {"gamma", 1e-5}};
  m["backward_ms"] = {{"a", 4.0}, {"beta", 0.004}, {"gamma", 2e-5}};
  m["noise"] = {{"sigma", 0}, {"steps", nlohmann::json::array({{1.0, 1.0}})}};
  if (with_levels) {
    m["noise"]["steps_levels_by_samples"] = {{4, {{100, 1.3}}}, {8, {{100, 0.85}}}};
    m["noise"]["steps_samples"] = {4, 8};
  }
  return m;
}

std::vector<RankStep> simulated_rows(const std::string& policy, int global_batch) {
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 45}, {"min", 8}, {"max", 250}, {"samples", 20000}}},
      {"training", {{"world_size", 2}, {"global_batch", global_batch}, {"steps", 150}, {"seed", 5}}},
      {"simulation", {{"first_use", "off"}}},
      {"policies", {policy}},
      {"model", "rtx3090-distilbert"}};
  Config config = parse_config(doc, "test", "");
  config.model = std::make_shared<PerfModel>(parse_perf_model(sized_model(true), "sized"));
  return simulate(config, make_length_source(config.data, 256)->dataset(5)).runs.front().rows;
}

Trace simulated_trace(const std::string& policy, int global_batch) {
  Trace t;
  t.path = policy + "-b" + std::to_string(global_batch) + ".csv";
  t.metadata = {{"emulated_ranks", "2"}, {"policy", policy}, {"global_batch", std::to_string(global_batch)}};
  PolicyRun run;
  run.label = policy;
  run.G = 2;
  run.rows = simulated_rows(policy, global_batch);
  t.runs = {run};
  return t;
}

Calibration surface() {
  return known_surface(parse_perf_model(sized_model(false), "surface"));
}

}  // namespace

TEST_CASE("runs of two batch sizes at known levels calibrate back to a table each") {
  const std::vector<Trace> runs = {simulated_trace("static", 8), simulated_trace("sorted", 8),
                                   simulated_trace("static", 16), simulated_trace("sorted", 16)};
  const TrainingFit t = fit_training(runs, surface());
  REQUIRE(t.samples_levels.size() == 2);
  CHECK(t.step_levels.empty());
  CHECK(t.samples_levels[0].samples == 4);
  CHECK(t.samples_levels[1].samples == 8);
  for (const auto& [tokens, factor] : t.samples_levels[0].levels) CHECK(factor == doctest::Approx(1.3).epsilon(0.02));
  for (const auto& [tokens, factor] : t.samples_levels[1].levels) CHECK(factor == doctest::Approx(0.85).epsilon(0.02));
  // The sizes' levels are no run's own: four runs at one level each.
  REQUIRE(t.run_levels.size() == 4);
  CHECK(t.own_df == 2);  // 4 runs, one session, two tables
  CHECK(t.run_level_spread < 0.02);
  CHECK(t.samples_min == 4);
  CHECK(t.samples_max == 8);
  // A size whose steps all miss a rank keeps its table: the recorded sizes still hold it, so the
  // model calibrate writes loads (its loader asks each table within them).
  std::vector<Trace> partial = runs;
  for (std::size_t i : {2, 3})
    std::erase_if(partial[i].runs.front().rows, [](const RankStep& r) { return r.rank == 1; });
  const TrainingFit p = fit_training(partial, surface());
  REQUIRE(p.samples_levels.size() == 2);
  CHECK(p.samples_min == 4);
  CHECK(p.samples_max == 8);
  // By tokens alone, the sizes' levels read as the runs' own.
  const TrainingFit by_tokens = fit_training({runs[0], runs[2]}, surface());
  CHECK(by_tokens.samples_levels.empty());
  CHECK(by_tokens.run_level_spread > 0.3);
}

TEST_CASE("a size one run alone trained gets no table of its own") {
  const std::vector<Trace> runs = {simulated_trace("static", 8), simulated_trace("sorted", 8),
                                   simulated_trace("static", 16)};
  const TrainingFit t = fit_training(runs, surface());
  CHECK(t.samples_levels.empty());
  CHECK(t.lone_sizes == std::vector<int>{8});
  CHECK(training_report(t).find("warning: one run alone trained 8 samples a rank-step") != std::string::npos);
}

TEST_CASE("a rank-step takes its neighbouring sizes' levels, held beyond them") {
  const std::vector<SampleLevels> by = {{4, {{100, 1.3}}}, {8, {{100, 0.85}}}};
  CHECK(level_at(by, 2, 50) == doctest::Approx(1.3));
  CHECK(level_at(by, 16, 50) == doctest::Approx(0.85));
  const double w = std::log(6.0 / 4) / std::log(2.0);
  CHECK(level_at(by, 6, 50) == doctest::Approx(std::exp((1 - w) * std::log(1.3) + w * std::log(0.85))));
  CHECK(level_at(std::vector<SampleLevels>{}, 6, 50) == 1);
}

TEST_CASE("a model's steps_levels_by_samples are checked") {
  nlohmann::json m = sized_model(true);
  m["noise"]["steps_levels_by_samples"] = {{8, {{100, 1.3}}}, {4, {{100, 0.85}}}};
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m"),
                       doctest::Contains("steps_levels_by_samples[1][0]: samples 4 not above the previous 8"),
                       InputError);
  m["noise"]["steps_levels_by_samples"] = {{4, {{100, 1.3}}}};
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m"), doctest::Contains("an array of two [samples, levels] or more"),
                       InputError);
  m = sized_model(true);
  m["noise"]["steps_levels"] = {{100, 1.0}};
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m"), doctest::Contains("and steps_levels both given: keep one"),
                       InputError);
  // The tables and steps_samples describe the same runs: a table outside their sizes is refused.
  m = sized_model(true);
  CHECK_NOTHROW(parse_perf_model(m, "m"));
  m["noise"].erase("steps_samples");
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m"), doctest::Contains("steps_levels_by_samples without steps_samples"),
                       InputError);
  m["noise"]["steps_samples"] = {4, 6};
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m"),
                       doctest::Contains("has a table at 8 samples, outside steps_samples [4, 6]"), InputError);
  m["noise"]["steps_samples"] = {8, 4};  // the malformed pair is shown as written
  CHECK_THROWS_WITH_AS(parse_perf_model(m, "m"), doctest::Contains("steps_samples is array [8,4]: expected [fewest"),
                       InputError);
}
