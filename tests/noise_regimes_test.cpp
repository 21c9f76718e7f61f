// Noise by compute regime: calibrate finds the knee of padded tokens where repetitions stop
// spreading, and only where held-out repetitions say so; the engine draws each rank-step's
// factor from its own regime.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "calib/calibrate.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"
#include "data/lengths.hpp"
#include "eval/simulate.hpp"
#include "profile_row.hpp"
#include "report/outputs.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::profile_row;
using ddpsim::test::TempDir;

namespace {

double quiet_ms(int b, int L) {
  return 2 + 0.002 * b * L + 1e-6 * b * L * L;
}

// One rank's profile, 5 back-to-back repetitions a shape, each with exp(σ·z) of its own: σ below
// `knee` padded tokens, σ_above from it.
std::string profile(const TempDir& dir, double sigma, double sigma_above, long long knee) {
  Rng rng(21);
  PolicyRun run{"profile", "", 1, {}, {}};
  for (int b : {1, 2, 4, 8, 16, 32, 64})
    for (int L : {8, 16, 32, 64, 128, 256}) {
      const double s = std::int64_t{b} * L >= knee ? sigma_above : sigma;
      for (int r = 0; r < 5; ++r)
        run.rows.push_back(
            profile_row(static_cast<int>(run.rows.size()), b, L, quiet_ms(b, L) * std::exp(s * rng.normal())));
    }
  const std::string path = dir / "profile.csv";
  std::ofstream(path) << trace_csv({run}, {{"world_size", "1"}, {"profile", "one rank"}});
  return path;
}

Calibration fit(const std::string& path) {
  CalibrationOptions analytic;
  analytic.form = "analytic";
  return calibrate({read_trace(path)}, analytic);
}

}  // namespace

TEST_CASE("a profile with σ 0.08 below 2,048 padded tokens and 0.002 above calibrates back within 20%") {
  TempDir dir;
  const std::string path = profile(dir, 0.08, 0.002, 2048);
  const Calibration c = fit(path);
  // The knee lies between the largest shape below 2,048 tokens (1,024 or 1,536 here: 8·128,
  // 16·64...) and the smallest from it (2,048).
  CHECK(c.regimes.knee_tokens > 1024);
  CHECK(c.regimes.knee_tokens <= 2048);
  CHECK(c.noise_sigma == doctest::Approx(0.08).epsilon(0.2));
  CHECK(c.noise_above_sigma == doctest::Approx(0.002).epsilon(0.2));
  CHECK(c.regimes.heldout_two > c.regimes.heldout_one);
  CHECK(fit_report(c).find("two regimes: σ") != std::string::npos);
  // Written and read back, the model carries both regimes.
  const auto json = calibrated_model(c, {read_trace(path)}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  const PerfModel m = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(m.noise_sigma == c.noise_sigma);
  CHECK(m.noise_above.tokens == c.regimes.knee_tokens);
  CHECK(m.noise_above.sigma == c.noise_above_sigma);
}

TEST_CASE("one σ everywhere keeps one regime: a knee must predict held-out repetitions better") {
  TempDir dir;
  const Calibration c = fit(profile(dir, 0.05, 0.05, 0));
  CHECK(c.regimes.folds == 5);
  CHECK(c.regimes.knees_tried > 5);
  CHECK(c.regimes.knee_tokens == 0);
  CHECK(c.noise_sigma == doctest::Approx(0.05).epsilon(0.2));
  CHECK(c.noise_above_sigma == 0);
  CHECK(fit_report(c).find("one σ for every shape") != std::string::npos);
  const auto json = calibrated_model(c, {}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  CHECK_FALSE(json["noise"].contains("above"));
}

TEST_CASE("the engine draws each rank-step's noise from its regime") {
  TempDir dir;
  nlohmann::json model = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  model["forward_ms"] = {{"a", 2.0}, {"beta", 0.002}, {"gamma", 1e-6}};
  model["backward_ms"] = {{"a", 4.0}, {"beta", 0.004}, {"gamma", 2e-6}};
  model["noise"] = {{"sigma", 0.08}, {"above", {{"tokens", 1000}, {"sigma", 0.002}}}};
  std::ofstream(dir / "regimes.json") << model.dump();
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 45}, {"min", 8}, {"max", 250}, {"samples", 20000}}},
      {"training", {{"world_size", 4}, {"global_batch", 32}, {"steps", 400}, {"seed", 3}}},
      {"policies", {"static"}},
      {"model", dir / "regimes.json"}};
  const Config config = parse_config(doc, "test", "");
  const SimulationRun sim = simulate(config, make_length_source(config.data, 256)->dataset(3));
  std::vector<double> below, above;
  for (const RankStep& r : sim.runs.front().rows)
    (std::int64_t{r.batch_size} * r.max_len >= 1000 ? above : below)
        .push_back(std::log(r.fwd_ms / config.model->fwd_ms(r.batch_size, r.max_len)));
  REQUIRE(below.size() > 200);
  REQUIRE(above.size() > 200);
  CHECK(population_std(below) == doctest::Approx(0.08).epsilon(0.15));
  CHECK(population_std(above) == doctest::Approx(0.002).epsilon(0.15));
  // A knee no rank-step reaches draws exactly what one regime draws.
  model["noise"]["above"]["tokens"] = 1LL << 40;
  std::ofstream(dir / "regimes.json") << model.dump();
  const Config far = parse_config(doc, "test", "");
  model["noise"].erase("above");
  std::ofstream(dir / "regimes.json") << model.dump();
  const Config one = parse_config(doc, "test", "");
  const auto dataset = make_length_source(config.data, 256)->dataset(3);
  const auto a = simulate(far, dataset).runs.front().rows, b = simulate(one, dataset).runs.front().rows;
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].fwd_ms == b[i].fwd_ms);
}

TEST_CASE("a model's noise.above names what it lacks") {
  nlohmann::json model = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  model["noise"] = {{"sigma", 0.08}, {"above", {{"sigma", 0.002}}}};
  CHECK_THROWS_WITH_AS(parse_perf_model(model, "m.json"), doctest::Contains("m.json: noise: above: missing \"tokens\""),
                       InputError);
  model["noise"]["above"] = {{"tokens", 2048}};
  CHECK_THROWS_WITH_AS(parse_perf_model(model, "m.json"), doctest::Contains("m.json: noise: above: missing \"sigma\""),
                       InputError);
  model["noise"]["above"] = {{"tokens", 0}, {"sigma", 0.002}};
  CHECK_THROWS_WITH_AS(parse_perf_model(model, "m.json"), doctest::Contains("tokens"), InputError);
  model["noise"]["above"] = {{"tokens", 2048}, {"sigma", 0.002}, {"sigmas", 1}};
  CHECK_THROWS_WITH_AS(parse_perf_model(model, "m.json"), doctest::Contains("sigmas"), InputError);
}
