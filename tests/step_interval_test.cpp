// A mean step's prediction interval: which level term a model carries, the quadrature, the
// process level calibrate measures over processes, and validate's interval around a replay.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "calib/trace_reader.hpp"
#include "calib/training_fit.hpp"
#include "calib/validate.hpp"
#include "common/stats.hpp"
#include "eval/config.hpp"
#include "eval/step_interval.hpp"
#include "known_surface.hpp"
#include "report/outputs.hpp"
#include "simulated_trace.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::known_model;
using ddpsim::test::simulated_trace;
using ddpsim::test::TempDir;

namespace {

double term(const std::vector<UncertaintyTerm>& terms, const std::string& name) {
  const auto it = std::find_if(terms.begin(), terms.end(), [&](const UncertaintyTerm& t) { return t.name == name; });
  return it == terms.end() ? -1 : it->half_width_pp;
}

Config config_with(const std::string& model_path) {
  nlohmann::json doc = default_config_json();
  doc["model"] = model_path;
  doc["training"]["max_length"] = 256;
  return parse_config(doc, "test", "");
}

// A trace of one policy, each rank-step's phases ×f: a run at another level.
Trace scaled(Trace t, double f) {
  for (auto& run : t.runs)
    for (RankStep& r : run.rows) r.fwd_ms *= f, r.bwd_ms *= f, r.opt_ms *= f, r.step_ms *= f;
  return t;
}

}  // namespace

TEST_CASE("a step's level term: a profile's training loop, a process's level, none for specs") {
  PerfModel profile = parse_perf_model(known_model(0.0), "known");
  profile.fit_heldout_mape = 0.04;
  auto terms = step_fixed_terms(profile);
  CHECK(term(terms, "training loop") == kStepTrainingLoopPct);
  CHECK(term(terms, "fit") == doctest::Approx(4));
  CHECK(step_level_source(profile).find("a profile alone") != std::string::npos);

  PerfModel trained = profile;
  trained.step_levels = {{100, 1.2}};
  terms = step_fixed_terms(trained);
  CHECK(term(terms, "training loop") < 0);
  CHECK(term(terms, "fit") < 0);  // its levels were measured on the training runs' own rank-steps
  CHECK(term(terms, "process level") == kStepProcessLevelPct);
  trained.process_level_spread = 0.31, trained.process_level_source = "measured";
  CHECK(term(step_fixed_terms(trained), "process level") == doctest::Approx(31));
  CHECK(step_level_source(trained) == "process level: measured");

  PerfModel spec = profile;
  spec.source = "derived from specs: ...";
  CHECK(step_fixed_terms(spec).empty());
}

TEST_CASE("a step's interval adds its seeds' sides and its terms in quadrature, in % of the step") {
  const StepPrediction s = predict_step(200, 196, 206, {{"noise model", 3}, {"process level", 4}, {"noise model", 1}});
  CHECK(s.terms.size() == 2);  // a term twice counts once, its wider
  CHECK(s.lo_ms == doctest::Approx(200 - std::hypot(4.0, 10.0)));
  CHECK(s.hi_ms == doctest::Approx(200 + std::hypot(6.0, 10.0)));
  CHECK(s.mostly == "process level");
  CHECK(s.holds(190));
  CHECK_FALSE(s.holds(212));
  CHECK(step_prediction_text(s) ==
        "200.00 ms (seeds [196.00, 206.00]; prediction [189.2, 211.7] ms, mostly: "
        "process level)");
  CHECK(terms_text(s.terms, "%") == "noise model ±3.00, process level ±4.00 %");
  // Terms that would take the step below 0 stop at 0.
  CHECK(predict_step(10, 10, 10, {{"training loop", 150}}).lo_ms == 0);
}

TEST_CASE("calibrate measures one process's level from runs of several processes") {
  TempDir dir;
  const std::string path = simulated_trace(dir, 0.0, "known", {"static"}, 40);
  const Trace base = read_trace(path);
  const Calibration surface = known_surface(parse_perf_model(known_model(0.0), "known"));
  // Processes (their metadata differ) at levels 1, 1.1, 0.95 and 1.05, one run each.
  std::vector<Trace> runs;
  const std::vector<double> levels{1, 1.1, 0.95, 1.05};
  for (std::size_t k = 0; k < levels.size(); ++k) {
    Trace t = scaled(base, levels[k]);
    t.path = "p" + std::to_string(k) + "/steps.csv";
    t.metadata["seed"] = std::to_string(k);
    runs.push_back(std::move(t));
  }
  const TrainingFit one = fit_training({runs[0]}, surface);
  CHECK(one.process_spread == 0);
  const TrainingFit two = fit_training({runs[0], runs[1]}, surface);
  CHECK(two.processes == 2);
  // ln 1.1 apart over one degree of freedom: Student's t (12.71) × its standard deviation × √1.5
  // is past the term's cap.
  const double sd2 = std::log(1.1) / std::sqrt(2.0);
  CHECK(std::expm1(t95(1) * sd2 * std::sqrt(1.5)) > 1);
  CHECK(two.process_spread == 1);
  // 1.005 apart: 12.71 × its standard deviation × √1.5 is 5.6%, below the floor of 15%.
  const TrainingFit close = fit_training({runs[0], scaled(runs[1], 1.005 / 1.1)}, surface);
  CHECK(close.process_spread == doctest::Approx(0.15));
  const TrainingFit four = fit_training(runs, surface);
  CHECK(four.processes == 4);
  double centre = 0, squares = 0;
  for (double l : levels) centre += std::log(l) / 4;
  for (double l : levels) squares += (std::log(l) - centre) * (std::log(l) - centre);
  CHECK(four.process_spread == doctest::Approx(std::expm1(t95(3) * std::sqrt(squares / 3 * 1.25))).epsilon(1e-3));
  CHECK(training_report(four).find("process level: one process's level may land") != std::string::npos);

  // An earlier model's processes (levels ×1.2 and ×0.85, a run each and two of one) add their
  // deviations about their own mean and a degree of freedom; one process alone then has a figure.
  PooledRunLevels earlier;
  earlier.model = "earlier.json", earlier.levels = {1.2, 1.2, 0.85}, earlier.sessions = {"x", "x", "y"};
  const double apart = std::log(1.2 / 0.85) / 2, pooled_squares = 2 * apart * apart;
  const TrainingFit pooled =
      fit_training(runs, surface, {.levels_by_tokens = true, .warmup = AUTO_WARMUP, .pooled = {earlier}});
  CHECK(pooled.process_df == 4);
  CHECK(pooled.process_spread ==
        doctest::Approx(std::expm1(t95(4) * std::sqrt((squares + pooled_squares) / 4 * 1.25))).epsilon(1e-3));
  CHECK(training_report(pooled).find("pooled with 1 degrees of freedom of earlier models' processes, 4 in all") !=
        std::string::npos);
  const TrainingFit alone =
      fit_training({runs[0]}, surface, {.levels_by_tokens = true, .warmup = AUTO_WARMUP, .pooled = {earlier}});
  CHECK(alone.processes == 1);
  CHECK(alone.process_df == 1);  // below three: the floor
  CHECK(alone.process_spread ==
        doctest::Approx(std::min(1.0, std::max(0.15, std::expm1(t95(1) * std::sqrt(pooled_squares * 2))))));

  // The model keeps it, with where it came from, and a step's interval carries it.
  auto doc = nlohmann::ordered_json::parse(known_model(0.0).dump());
  add_training(doc, four, runs);
  const PerfModel m = parse_perf_model(nlohmann::json::parse(doc.dump()), "trained");
  CHECK(m.process_level_spread == doctest::Approx(four.process_spread).epsilon(1e-3));
  CHECK(m.process_level_source.find("4 processes") != std::string::npos);
  CHECK(term(step_fixed_terms(m), "process level") == doctest::Approx(100 * m.process_level_spread));
  doc["run_level"].erase("process_source");
  CHECK_THROWS_WITH_AS(parse_perf_model(nlohmann::json::parse(doc.dump()), "m.json"),
                       doctest::Contains("m.json: run_level: process_spread without process_source"), InputError);
}

TEST_CASE("validate sets each replayed mean in its interval: a run at its model's level inside, one far off outside") {
  TempDir dir;
  const std::string path = simulated_trace(dir, 0.0, "known", {"static", "minmax"}, 60);
  const Trace trace = read_trace(path);
  std::ofstream(dir / "static.csv") << trace_csv({trace.runs[0]}, {});
  std::ofstream(dir / "minmax.csv") << trace_csv({trace.runs[1]}, {});
  const Trace baseline = read_trace(dir / "static.csv"), measured = read_trace(dir / "minmax.csv");
  const Config config = config_with(dir / "known.json");
  const Validation v = validate(measured, config, &baseline);
  const StepPrediction& s = v.steady.policies[0].predicted_mean_pi;
  CHECK(s.holds(v.steady.policies[0].measured_mean_ms));
  CHECK(term(s.terms, "training loop") == kStepTrainingLoopPct);  // the known model is a profile's
  CHECK(v.all.baseline.predicted_mean_pi.holds(v.all.baseline.measured_mean_ms));
  const auto json = validation_json(v, measured, "m");
  CHECK(json["policies"]["minmax"]["measured_mean_in_prediction_interval"] == true);
  CHECK(json["baseline"]["figures"]["predicted_mean_pi95"].size() == 2);
  CHECK(validation_report(v).find("predicted, 95% prediction intervals") != std::string::npos);

  // A run 40% slower than its model: outside, and said so; without a baseline too.
  std::ofstream(dir / "slow.csv") << trace_csv(scaled(measured, 1.4).runs, {});
  const Validation slow = validate(read_trace(dir / "slow.csv"), config, nullptr);
  CHECK_FALSE(slow.steady.policies[0].predicted_mean_pi.holds(slow.steady.policies[0].measured_mean_ms));
  CHECK(validation_report(slow).find("the measured mean outside") != std::string::npos);
}
