// Replay and validation: replay as an exact oracle of the simulation, gains over the steps two
// runs share and per sample, and where a run's warm-up settles.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "calib/trace_reader.hpp"
#include "calib/validate.hpp"
#include "common/rng.hpp"
#include "eval/config.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"
#include "simulated_trace.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::known_model;
using ddpsim::test::simulated_trace;
using ddpsim::test::TempDir;

namespace {

// The config a replay of simulated_trace(dir, ..., name, ...) runs under: its own model.
Config replay_config(const TempDir& dir, const std::string& name) {
  nlohmann::json doc = default_config_json();
  doc["model"] = dir / (name + ".json");
  doc["training"]["max_length"] = 256;
  return parse_config(doc, "test", "");
}

}  // namespace

TEST_CASE("replaying a simulated trace with its own model reproduces it; validation says so") {
  TempDir dir;
  const std::string path = simulated_trace(dir, 0.0, "exact", {"static", "minmax"}, 100);
  const Trace trace = read_trace(path);
  const Config config = replay_config(dir, "exact");
  const SimulationRun sim = replay(trace, config);
  for (std::size_t p = 0; p < trace.runs.size(); ++p)
    for (std::size_t i = 0; i < trace.runs[p].rows.size(); ++i)
      CHECK(sim.runs[p].rows[i].step_ms == doctest::Approx(trace.runs[p].rows[i].step_ms).epsilon(1e-5));

  // The static run as the baseline of the minmax run, each in a file of its own.
  const SimulationRun both = replay(trace, config);
  std::ofstream(dir / "static.csv") << trace_csv({trace.runs[0]}, {});
  std::ofstream(dir / "minmax.csv") << trace_csv({trace.runs[1]}, {});
  const Trace baseline = read_trace(dir / "static.csv"), measured = read_trace(dir / "minmax.csv");
  const Validation v = validate(measured, config, &baseline);
  REQUIRE(v.steady.policies.size() == 1);
  CHECK(std::abs(v.steady.policies[0].mean_error_pct) < 0.01);
  CHECK(std::abs(v.steady.policies[0].p95_error_pct) < 0.01);
  CHECK(v.steady.policies[0].step_mape_pct < 0.01);
  CHECK(std::abs(v.steady.predicted_gain_pct[0] - v.steady.measured_gain_pct[0]) < 0.01);
  CHECK(validation_report(v).find("gain of minmax over the baseline") != std::string::npos);
  CHECK(v.steady.policies[0].measured_mean_ci.contains(v.steady.policies[0].measured_mean_ms));
  CHECK(v.steady.measured_gain_ci[0].contains(v.steady.measured_gain_pct[0]));
  // The baseline against itself: a gain that cannot be told from noise, and said so.
  const Validation same = validate(baseline, config, &baseline);
  CHECK(same.steady.measured_gain_ci[0].contains(0));
  CHECK(validation_report(same).find("cannot be told from noise") != std::string::npos);
  CHECK(validation_json(same, baseline, "m")["policies"]["static"]["gain_resolved"] == false);
  for (const auto& phase : v.steady.policies[0].phases) CHECK(std::abs(phase.error()) < 0.01);

  // A model whose backward is 25% too slow: the phases say which term is wrong.
  nlohmann::json slow = known_model(0.0);
  for (const char* term : {"a", "beta", "gamma"})
    slow["backward_ms"][term] = 1.25 * slow["backward_ms"][term].get<double>();
  std::ofstream(dir / "slow.json") << slow.dump();
  const Validation off = validate(measured, replay_config(dir, "slow"), &baseline);
  std::map<std::string, double> error;
  for (const auto& phase : off.steady.policies[0].phases) error[phase.phase] = phase.error();
  CHECK(error.size() == 5);
  CHECK(error["backward"] == doctest::Approx(25).epsilon(1e-3));
  CHECK(std::abs(error["forward"]) < 0.01);
  CHECK(std::abs(error["optimizer"]) < 0.01);
  CHECK(error["comm wait"] < 0);  // a longer backward hides more of the allreduce
  CHECK(off.steady.policies[0].mean_error_pct > 0);
  const std::string report = validation_report(off);
  CHECK(report.find("phases, mean ms per rank-step") != std::string::npos);
  CHECK(report.find("(+25.0%)") != std::string::npos);
  CHECK(validation_json(off, measured, "m")["policies"]["minmax"]["phases"]["backward"]["error_pct"] ==
        doctest::Approx(25).epsilon(1e-3));
}

TEST_CASE("a gain compares the two runs over the same steps, from the later one's warm-up") {
  // Two runs trained in turn on a machine 4% slower for their first 50 steps (too little for the
  // warm-up to cut), minmax with a slow start of its own: over their own steady steps (static
  // from 0, minmax from about 30) the drift would enter the measured gain by about 0.8 pp.
  TempDir dir;
  const Trace trace = read_trace(simulated_trace(dir, 0.0, "exact", {"static", "minmax"}, 100));
  const Config config = replay_config(dir, "exact");
  std::vector<PolicyRun> runs = trace.runs;
  for (auto& run : runs)
    for (auto& row : run.rows) {
      if (row.step < 50) row.step_ms *= 1.04;
      if (run.label == "minmax" && row.step < 30) row.step_ms *= 3.0 - 2.0 * row.step / 30.0;
    }
  std::ofstream(dir / "static.csv") << trace_csv({runs[0]}, {});
  std::ofstream(dir / "minmax.csv") << trace_csv({runs[1]}, {});
  const Trace baseline = read_trace(dir / "static.csv"), measured = read_trace(dir / "minmax.csv");
  const Validation v = validate(measured, config, &baseline);
  REQUIRE(v.steady.policies.size() == 1);
  CHECK(v.steady.baseline.first_step == 0);
  CHECK(v.steady.policies[0].first_step >= 20);
  CHECK(v.steady.gain_from_step[0] == v.steady.policies[0].first_step);
  CHECK(std::abs(v.steady.predicted_gain_pct[0] - v.steady.measured_gain_pct[0]) < 0.2);
  const double own_windows = 100 * (1 - v.steady.policies[0].measured_mean_ms / v.steady.baseline.measured_mean_ms);
  CHECK(std::abs(own_windows - v.steady.predicted_gain_pct[0]) > 0.5);  // what the drift did to the old gain
  CHECK(validation_report(v).find(", both from step " + std::to_string(v.steady.policies[0].first_step)) !=
        std::string::npos);
  CHECK(v.all.gain_from_step[0] == 0);

  // Written by one ddptrain run that trained them in turn, both runs start where minmax settles.
  const Metadata one_run{{"seed", "0"}, {"interleaved", "static,minmax"}};
  std::ofstream(dir / "static-turn.csv") << trace_csv({runs[0]}, one_run);
  std::ofstream(dir / "minmax-turn.csv") << trace_csv({runs[1]}, one_run);
  const Trace turn_baseline = read_trace(dir / "static-turn.csv"), turn = read_trace(dir / "minmax-turn.csv");
  const Validation shared = validate(turn, config, &turn_baseline);
  CHECK(shared.shared_warmup == v.steady.policies[0].first_step);
  CHECK(shared.steady.baseline.first_step == shared.shared_warmup);
  CHECK(shared.steady.policies[0].first_step == shared.shared_warmup);
  CHECK(validation_report(shared).find("policies trained in turn, all from step " +
                                       std::to_string(shared.shared_warmup)) != std::string::npos);
  CHECK(validation_json(shared, turn, "m")["shared_warmup_steps"] == shared.shared_warmup);
  // Runs trained in turn are paired step by step; the drift they share leaves their gain's
  // interval narrower than that of the same runs taken apart.
  CHECK(shared.steady.paired);
  CHECK_FALSE(v.steady.paired);
  const Interval in_turn = shared.steady.measured_gain_ci[0], apart = v.steady.measured_gain_ci[0];
  CHECK(in_turn.contains(shared.steady.measured_gain_pct[0]));
  CHECK(in_turn.high - in_turn.low < apart.high - apart.low);
  CHECK(validation_report(shared).find("paired step by step") != std::string::npos);
  const auto json = validation_json(shared, turn, "m")["policies"]["minmax"];
  CHECK(json["measured_gain_ci95"][0] == in_turn.low);
  CHECK(json["gain_paired"] == true);
  // The optimizer is the same work in both: past 10% apart, each model ran at a level of its own.
  CHECK(validation_report(shared).find("the same work in both runs") == std::string::npos);
  std::vector<PolicyRun> own = runs;
  for (auto& row : own[1].rows) row.opt_ms *= 1.3;
  std::ofstream(dir / "minmax-own.csv") << trace_csv({own[1]}, one_run);
  const std::string own_level = validation_report(validate(read_trace(dir / "minmax-own.csv"), config, &turn_baseline));
  CHECK(own_level.find("the optimizer, the same work in both runs, took ") != std::string::npos);
  CHECK(own_level.find("under the baseline (medians, 30.0% apart): the machine ran each model at a level of its own") !=
        std::string::npos);
  // Another run's baseline (any other metadata differs) keeps its own warm-up, as does a fixed one.
  std::ofstream(dir / "static-other.csv") << trace_csv({runs[0]}, {{"seed", "1"}, {"interleaved", "static,minmax"}});
  const Trace other = read_trace(dir / "static-other.csv");
  CHECK(validate(turn, config, &other).shared_warmup == -1);
  CHECK(validate(turn, config, &other).steady.baseline.first_step == 0);
  CHECK(validate(turn, config, &turn_baseline, 5).shared_warmup == -1);
}

TEST_CASE("a policy that trains another number of samples a step gains per sample, as compare's gains") {
  TempDir dir;
  // With the model's noise, so that validate replays its runs with the noise off too (a term).
  const Trace trace = read_trace(simulated_trace(dir, 0.05, "noisy", {"static", "token_budget:max_tokens=1024"}, 60));
  const Config config = replay_config(dir, "noisy");
  std::ofstream(dir / "static.csv") << trace_csv({trace.runs[0]}, {});
  std::ofstream(dir / "budget.csv") << trace_csv({trace.runs[1]}, {});
  const Trace baseline = read_trace(dir / "static.csv"), measured = read_trace(dir / "budget.csv");
  const Validation v = validate(measured, config, &baseline, 0);
  REQUIRE(v.all.gain_per_sample.size() == 1);
  CHECK(v.all.gain_per_sample[0]);
  const TokenSummary own = summarize(trace.runs[1]), base = summarize(trace.runs[0]);
  REQUIRE(std::abs(own.mean_global_batch / base.mean_global_batch - 1) > 0.1);  // the case this tests
  const double per_sample =
      100 * (1 - own.mean_max_step_ms * base.mean_global_batch / own.mean_global_batch / base.mean_max_step_ms);
  CHECK(v.all.measured_gain_pct[0] == doctest::Approx(per_sample).epsilon(1e-9));
  CHECK(std::abs(v.all.predicted_gain_pct[0] - per_sample) < 3);  // its own model, its noise drawn again
  CHECK(v.all.measured_gain_ci[0].contains(per_sample));
  const GainPrediction& interval = v.all.predicted_gain_pi[0];  // its variants taken per sample too
  CHECK(interval.per_sample);
  CHECK(interval.lo <= per_sample);
  CHECK(per_sample <= interval.hi);
  for (const UncertaintyTerm& t : interval.terms)  // a variant taken per step would be tens of points off
    CHECK_MESSAGE(t.half_width_pp < 10, t.name);
  CHECK(validation_report(v).find("over the baseline, per sample") != std::string::npos);
  CHECK(validation_json(v, measured, "m")["policies"]["token_budget:max_tokens=1024"]["gain_per_sample"] == true);
  // Runs of one batch keep their gain per step, and say nothing of samples.
  const Validation same = validate(baseline, config, &baseline, 0);
  CHECK(!same.all.gain_per_sample[0]);
  CHECK(validation_report(same).find("per sample") == std::string::npos);
}

TEST_CASE("validate --warmup auto finds where an injected slow start settles") {
  Rng rng(5);
  std::vector<double> steps;
  for (int t = 0; t < 300; ++t) {
    const double slow = t < 30 ? 3.0 - 2.0 * t / 30.0 : 1.0;  // 3× at first, settling by step 30
    steps.push_back(100 * slow * std::exp(0.02 * rng.normal()));
  }
  const int settled = settled_step(steps);
  CHECK(settled >= 20);
  CHECK(settled <= 30);
  CHECK(settled_step(std::vector<double>(steps.begin() + 40, steps.end())) == 0);  // no warm-up to find
  CHECK(settled_step(std::vector<double>(10, 1.0)) == 0);                          // too short to judge
  // A lone slow first step (a process's start) is warm-up, though every window's median is steady.
  std::vector<double> lone(steps.begin() + 40, steps.end());
  lone[0] = 50 * lone[1];
  CHECK(settled_step(lone) == 1);
  std::vector<double> outlier = lone;  // a late outlier as slow as the first step does not keep it
  outlier[outlier.size() - 5] = lone[0];
  CHECK(settled_step(outlier) == 1);
  std::vector<double> quiet(300, 100.0);  // a quiet run 1% slower at first keeps its start
  for (int t = 0; t < 150; ++t) quiet[t] = 101.0;
  CHECK(settled_step(quiet) == 0);
  std::vector<double> drift;  // speeding up to the end: never settles, so half the run is left out
  for (int t = 0; t < 300; ++t) drift.push_back(3.0 - 2.0 * t / 300.0);
  CHECK(settled_step(drift) == 150);
}

TEST_CASE("the optimizer line warns past 10% apart, worded for runs in turn or one after another") {
  const std::vector<std::pair<std::string, double>> near{{"static", 20}, {"kk", 21}}, far{{"static", 20}, {"kk", 25}};
  CHECK(optimizer_levels_text(near, false) ==
        "optimizer, the same work in every policy's model, median after step 0: static 20.0, kk 21.0 ms (5.0% apart)\n");
  CHECK(optimizer_levels_text(far, true).find("(25.0% apart)\nwarning: this machine ran each policy's model at a "
                                              "level of its own") != std::string::npos);
  CHECK(optimizer_levels_text(far, false).find("(25.0% apart)\nwarning: the policies, trained one after another, met "
                                               "the machine at levels of their own") != std::string::npos);
  CHECK(optimizer_levels_text({{"static", 20}}, true).empty());
}
