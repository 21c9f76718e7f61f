// The training runs' level by a rank-step's tokens (calibrate --training's levels): a run
// simulated with known levels calibrates back to them, runs of other shapes then show no level
// of their own, and the simulator charges each rank-step the level at its tokens.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "calib/training_fit.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "eval/simulate.hpp"
#include "known_surface.hpp"

using namespace ddpsim;

namespace {

// Small rank-steps run at 0.7 of the surface, large ones at 1.3, in between by log tokens.
const std::vector<std::pair<double, double>> kTrue = {{100, 0.7}, {1500, 1.3}};

nlohmann::json leveled_model(bool with_levels) {
  nlohmann::json m = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  m["name"] = "leveled";
  m["forward_ms"] = {{"a", 2.0}, {"beta", 0.002}, {"gamma", 1e-5}};
  m["backward_ms"] = {{"a", 4.0}, {"beta", 0.004}, {"gamma", 2e-5}};
  m["noise"] = {{"sigma", 0}, {"steps", nlohmann::json::array({{1.0, 1.0, 1.0, 1.0}})}};
  if (with_levels) {
    m["noise"]["steps_levels"] = nlohmann::json::array();
    for (const auto& [tokens, factor] : kTrue) m["noise"]["steps_levels"].push_back({tokens, factor});
  }
  return m;
}

Config leveled_config(const std::string& policy) {
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 45}, {"min", 8}, {"max", 250}, {"samples", 20000}}},
      {"training", {{"world_size", 4}, {"global_batch", 48}, {"steps", 150}, {"seed", 5}}},
      {"simulation", {{"first_use", "off"}}},
      {"policies", {policy}},
      {"model", "rtx3090-distilbert"}};
  Config config = parse_config(doc, "test", "");
  config.model = std::make_shared<PerfModel>(parse_perf_model(leveled_model(true), "leveled"));
  return config;
}

Trace simulated_trace(const std::string& policy) {
  const Config config = leveled_config(policy);
  Trace t;
  t.path = policy + ".csv";
  t.metadata = {{"emulated_ranks", "4"}, {"policy", policy}};
  t.runs = simulate(config, make_length_source(config.data, 256)->dataset(5)).runs;
  return t;
}

// The leveled model's surface without its levels: what the runs' levels are read against.
Calibration leveled_surface() { return known_surface(parse_perf_model(leveled_model(false), "surface")); }

}  // namespace

TEST_CASE("runs at known levels by tokens calibrate back to them, and runs of other shapes then agree") {
  const std::vector<Trace> runs = {simulated_trace("static"), simulated_trace("sorted")};
  const TrainingFit t = fit_training(runs, leveled_surface());
  MESSAGE(training_report(t));
  REQUIRE(t.step_levels.size() >= 4);
  for (const auto& item : t.step_levels) {
    const auto& tokens = item.first;  // named, not bound: clang 14 captures no binding
    const auto& factor = item.second;
    CAPTURE(tokens);
    CHECK(factor == doctest::Approx(level_at(kTrue, static_cast<long long>(tokens))).epsilon(0.02));
  }
  CHECK(t.factor_p50 == doctest::Approx(1.0).epsilon(0.01));
  CHECK(t.factor_p99 < 1.1);  // no spread invented from the shapes
  REQUIRE(t.run_levels.size() == 2);
  CHECK(t.run_levels[1].level / t.run_levels[0].level == doctest::Approx(1.0).epsilon(0.02));

  // With one level, the sorted run's small shapes read as a faster run, and its spread as noise.
  const TrainingFit one =
      fit_training(runs, leveled_surface(), {.levels_by_tokens = false, .warmup = AUTO_WARMUP, .pooled = {}});
  CHECK(one.step_levels.empty());
  REQUIRE(one.run_levels.size() == 2);
  CHECK(std::abs(one.run_levels[1].level / one.run_levels[0].level - 1) > 0.05);
  CHECK(one.run_level_spread > 5 * t.run_level_spread);
  CHECK(training_report(one).find("one level for every shape (--training-levels one)") != std::string::npos);

  // The fit's levels reach the model file and load back.
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(leveled_model(false).dump());
  add_training(doc, t, {});
  const PerfModel m = parse_perf_model(nlohmann::json::parse(doc.dump()), "with levels");
  CHECK(m.step_levels == t.step_levels);
}

TEST_CASE("a run of other shapes at a level of its own keeps its level: it does not lend it to its shapes") {
  // The static run (large shapes only) 10% slower than the sorted one (every size).
  std::vector<Trace> runs = {simulated_trace("static"), simulated_trace("sorted")};
  for (RankStep& r : runs[0].runs[0].rows) r.fwd_ms *= 1.1, r.bwd_ms *= 1.1;
  const TrainingFit t = fit_training(runs, leveled_surface());
  REQUIRE(t.run_levels.size() == 2);
  CHECK(t.run_levels[0].level / t.run_levels[1].level == doctest::Approx(1.1).epsilon(0.02));
  // The levels are the true ones times the runs' pooled level, the same at every size.
  REQUIRE(t.step_levels.size() >= 2);
  const double pooled = t.step_levels.front().second / level_at(kTrue, std::llround(t.step_levels.front().first));
  for (const auto& item : t.step_levels) {
    const auto& tokens = item.first;  // named, not bound: clang 14 captures no binding
    const auto& factor = item.second;
    CAPTURE(tokens);
    CHECK(factor / level_at(kTrue, std::llround(tokens)) == doctest::Approx(pooled).epsilon(0.02));
  }
}

TEST_CASE("runs that share no shapes keep the pooled level: their offsets are not told from their shapes'") {
  // Two runs at one level, one of small shapes only (global batch 8), one of large (128): no
  // bin holds both, so nothing tells a run's level from its shapes' and neither drifts.
  const auto run_at = [](int global_batch, const std::string& name) {
    Config config = leveled_config("static");
    config.training.global_batch = global_batch;
    nlohmann::json doc = leveled_model(true);  // a spread about the levels, as runs have
    doc["noise"]["steps"] = nlohmann::json::array({{1.1, 0.9, 1.05, 0.95}, {0.92, 1.08, 0.97, 1.03}});
    config.model = std::make_shared<PerfModel>(parse_perf_model(doc, "spread"));
    Trace t;
    t.path = name + ".csv";
    t.metadata = {{"emulated_ranks", "4"}, {"policy", "static"}};
    t.runs = simulate(config, make_length_source(config.data, 256)->dataset(5)).runs;
    return t;
  };
  const std::vector<Trace> runs = {run_at(8, "small"), run_at(128, "large")};
  const TrainingFit t = fit_training(runs, leveled_surface());
  REQUIRE(t.run_levels.size() == 2);
  CHECK(t.run_levels[0].level / t.run_levels[1].level == doctest::Approx(1.0).epsilon(0.02));
  for (const auto& item : t.step_levels) {
    const auto& tokens = item.first;  // named, not bound: clang 14 captures no binding
    const auto& factor = item.second;
    CAPTURE(tokens);
    CHECK(factor == doctest::Approx(level_at(kTrue, std::llround(tokens))).epsilon(0.03));
  }
}

TEST_CASE("across the knee a drawn factor's spread is scaled, the level at its tokens is not") {
  nlohmann::json doc = leveled_model(true);
  doc["noise"]["steps"] = nlohmann::json::array({{2.0, 1.0, 1.0, 1.0}});  // rank 0 always ×2 about its level
  doc["noise"]["above"] = {{"tokens", 500}, {"sigma", 0}, {"shared_sigma", 0}, {"steps_scale", 0.5}};
  Config config = leveled_config("sorted");
  config.model = std::make_shared<PerfModel>(parse_perf_model(doc, "knee"));
  const SimulationRun sim = simulate(config, make_length_source(config.data, 256)->dataset(5));
  int below = 0, above = 0;
  for (const RankStep& r : sim.runs[0].rows) {
    if (r.rank != 0) continue;
    const long long tokens = regime_tokens(r, false);
    const double about = (r.fwd_ms + r.bwd_ms) / config.model->compute_ms(r.batch_size, r.max_len) /
                         level_at(kTrue, tokens);
    CHECK(about == doctest::Approx(tokens >= 500 ? std::sqrt(2.0) : 2.0).epsilon(1e-6));
    ++(tokens >= 500 ? above : below);
  }
  CHECK(below > 10);
  CHECK(above > 10);
}

TEST_CASE("a rank-step is charged the level at its tokens, with the noise on or off") {
  const Config config = leveled_config("sorted");
  const auto dataset = make_length_source(config.data, 256)->dataset(5);
  for (const bool quiet : {false, true}) {
    CAPTURE(quiet);
    const Config run = quiet ? without_compute_noise(config) : config;
    const SimulationRun sim = simulate(run, dataset);
    double lowest = 10, highest = 0;
    for (const RankStep& r : sim.runs[0].rows) {
      const double factor = (r.fwd_ms + r.bwd_ms) / config.model->compute_ms(r.batch_size, r.max_len);
      CHECK(factor == doctest::Approx(level_at(kTrue, regime_tokens(r, false))).epsilon(1e-6));
      lowest = std::min(lowest, factor), highest = std::max(highest, factor);
    }
    CHECK(highest / lowest > 1.3);  // the sorted run's shapes span the levels
  }
  CHECK(level_at(kTrue, 10) == 0.7);  // held at the ends
  CHECK(level_at(kTrue, 100000) == 1.3);
  CHECK(level_at({}, 500) == 1);
}

TEST_CASE("a model's steps_levels are checked") {
  const auto refused = [](nlohmann::json levels, bool steps = true) {
    nlohmann::json m = leveled_model(false);
    if (!steps) m["noise"].erase("steps");
    m["noise"]["steps_levels"] = std::move(levels);
    try {
      parse_perf_model(m, "m.json");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(refused({{100, 0.9}}, false).find("m.json: noise: steps_levels without steps") != std::string::npos);
  const std::pair<nlohmann::json, std::string> cases[] = {
      {nlohmann::json::array(), "steps_levels: expected a non-empty array of [tokens, factor] pairs, got []"},
      {nlohmann::json{{100, 0.9}, {100, 1.1}}, "steps_levels[1]: tokens 100.0 not above the previous 100.0"},
      {nlohmann::json{{100, 0.0}}, "steps_levels[0]: factor 0.0 not in (0, 1e6]"},
      {nlohmann::json{{0, 1.0}}, "steps_levels[0]: tokens 0.0 not in [1, 1e12]"},
      {nlohmann::json{{100}}, "steps_levels[0]: expected a [tokens, factor] pair of numbers, got [100]"}};
  for (const auto& item : cases) {
    const auto& bad = item.first;  // named, not bound: clang 14 captures no binding
    const auto& message = item.second;
    CAPTURE(bad.dump());
    CHECK(refused(bad).find("m.json: noise: " + message) != std::string::npos);
  }
}
