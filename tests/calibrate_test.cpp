// Calibration, replay and validation: parameters recovered from a simulated trace, replay as
// an exact oracle of the simulation, and the bad traces each named by file, line and column.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "calib/calibrate.hpp"
#include "calib/validate.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/rng.hpp"
#include "profile_row.hpp"
#include "report/outputs.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::profile_row;
using ddpsim::test::TempDir;
namespace fs = std::filesystem;

namespace {

// A known model whose three terms all matter at these lengths.
nlohmann::json known_model(double sigma) {
  nlohmann::json m = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  m["name"] = "known";
  m["forward_ms"] = {{"a", 2.0}, {"beta", 0.002}, {"gamma", 1e-5}};
  m["backward_ms"] = {{"a", 4.0}, {"beta", 0.004}, {"gamma", 2e-5}};
  m["optimizer_ms"] = 1.5;
  m["noise"] = {{"sigma", sigma}};
  m.erase("platform");  // the tests' platform is the config's
  return m;
}

// Simulated steps of three policies over wide lengths, written as a trace file.
std::string simulated_trace(const TempDir& dir, double sigma, const std::string& name,
                            std::vector<std::string> policies, int steps = 300,
                            const std::string& attention = "padded") {
  std::ofstream(dir / (name + ".json")) << known_model(sigma).dump();
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 45}, {"min", 8}, {"max", 250}, {"samples", 20000}}},
      {"training", {{"world_size", 4}, {"global_batch", 48}, {"steps", steps}, {"seed", 3}, {"attention", attention}}},
      {"policies", policies},
      {"model", dir / (name + ".json")}};
  const Config config = parse_config(doc, "test", "");
  const auto dataset = make_length_source(config.data, 256)->dataset(3);
  const SimulationRun sim = simulate(config, dataset);
  const std::string path = dir / (name + ".csv");
  std::ofstream(path) << trace_csv(sim.runs, {{"device", "simulated"}});
  return path;
}

// The config a replay of simulated_trace(dir, ..., name, ...) runs under: its own model.
Config replay_config(const TempDir& dir, const std::string& name) {
  nlohmann::json doc = default_config_json();
  doc["model"] = dir / (name + ".json");
  doc["training"]["max_length"] = 256;
  return parse_config(doc, "test", "");
}

}  // namespace

TEST_CASE("calibration recovers known parameters from a noisy simulated trace") {
  TempDir dir;
  const std::string path = simulated_trace(dir, 0.05, "noisy", {"static", "minmax", "token_budget:max_tokens=1024"});
  CalibrationOptions analytic;
  analytic.form = "analytic";
  const Calibration c = calibrate({read_trace(path, {"fwd_ms", "bwd_ms"})}, analytic);
  const PhaseTime &f = c.forward.model.analytic, &b = c.backward.model.analytic;
  CHECK(f.a_ms == doctest::Approx(2.0).epsilon(0.02));
  CHECK(f.beta_ms == doctest::Approx(0.002).epsilon(0.02));
  CHECK(f.gamma_ms == doctest::Approx(1e-5).epsilon(0.02));
  CHECK(b.a_ms == doctest::Approx(4.0).epsilon(0.02));
  CHECK(b.beta_ms == doctest::Approx(0.004).epsilon(0.02));
  CHECK(b.gamma_ms == doctest::Approx(2e-5).epsilon(0.02));
  // Scattered shapes of a quadratic device with noise: the analytic form generalises better.
  CHECK(c.forward.heldout.analytic < c.forward.heldout.grid);
  CHECK(c.noise_sigma == doctest::Approx(0.05).epsilon(0.10));
  CHECK(c.optimizer_ms == doctest::Approx(1.5).epsilon(0.02));
  CHECK(c.has_memory);
  CHECK(c.memory.r2 > 0.999);  // the simulator writes m(b, L) exactly
  CHECK(c.forward.quality.r2 > 0.9);
  MESSAGE(fit_report(c));
  // What calibrate writes loads as a model.
  const auto json = calibrated_model(c, {read_trace(path)}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  const PerfModel fitted = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(fitted.forward.analytic.beta_ms == f.beta_ms);
  CHECK(std::string(fitted.forward.form()) == "analytic");
}

TEST_CASE("packed sequences: a + β·Σs + γ·Σs² comes back from a noisy packed trace, and only from one mode") {
  TempDir dir;
  const std::string path =
      simulated_trace(dir, 0.05, "packed", {"static", "minmax", "token_budget:max_tokens=1024"}, 300, "packed");
  const Trace trace = read_trace(path, {"fwd_ms", "bwd_ms"});
  REQUIRE(trace.runs.front().packed);
  const Calibration c = calibrate({trace});
  CHECK(c.packed);
  const PhaseTime &f = c.forward.model.analytic, &b = c.backward.model.analytic;
  CHECK(f.a_ms == doctest::Approx(2.0).epsilon(0.03));
  CHECK(f.beta_ms == doctest::Approx(0.002).epsilon(0.03));
  CHECK(f.gamma_ms == doctest::Approx(1e-5).epsilon(0.03));
  CHECK(b.gamma_ms == doctest::Approx(2e-5).epsilon(0.03));
  CHECK(!c.forward.model.use_grid());
  CHECK(std::isnan(c.forward.heldout.grid));
  CHECK(c.noise_sigma == doctest::Approx(0.05).epsilon(0.10));
  CHECK(c.memory.r2 > 0.999);  // m0 + μ·Σs + ν·Σs², written exactly by the simulator
  MESSAGE(fit_report(c));
  const auto json = calibrated_model(c, {trace}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  const PerfModel fitted = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(fitted.fwd_packed_ms(100, 2000) == doctest::Approx(f.packed(100, 2000)));
  const std::string padded = simulated_trace(dir, 0.05, "padded", {"static", "minmax"}, 50);
  CHECK_THROWS_WITH_AS(calibrate({trace, read_trace(padded)}), doctest::Contains("one attention mode at a time"),
                       InputError);
}

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

TEST_CASE("the ring's alpha-beta comes back from allreduce timings of the simulated platform") {
  TempDir dir;
  EngineSetup setup;
  setup.G = 4;
  setup.platform.host_GBps = 0;  // 24 GB/s links, 5 us each: 10 us per ring step
  const std::vector<double> sizes = {65536, 1048576, 4194304, 16777216, 67108864};
  const auto ms = measure_allreduce_ms(setup, sizes);
  PolicyRun run{"allreduce", "", 1, {}, {}};
  for (double s : sizes) {
    RankStep r;
    r.step = static_cast<int>(run.rows.size());
    r.allreduce_bytes = s;
    r.allreduce_ms = r.step_ms = ms.at(s);
    run.rows.push_back(r);
  }
  std::ofstream(dir / "allreduce.csv") << trace_csv({run}, {{"world_size", "4"}, {"profile", "allreduce"}});
  const std::string compute = simulated_trace(dir, 0.0, "compute", {"minmax"}, 50);
  const Calibration c = calibrate({read_trace(compute), read_trace(dir / "allreduce.csv")});
  REQUIRE(c.has_allreduce);
  CHECK(c.allreduce_ranks == 4);
  CHECK(c.allreduce_link_GBps == doctest::Approx(24.0).epsilon(1e-3));
  CHECK(c.allreduce_step_latency_us == doctest::Approx(10.0).epsilon(1e-3));
  CHECK(fit_report(c).find("written into the model as its platform (pcie, link_GBps 24,") != std::string::npos);

  // The model carries that network: a config without a platform of its own simulates it, a
  // config's own keys win one by one, and another topology keeps the config's figures whole.
  const auto model = calibrated_model(c, {read_trace(compute), read_trace(dir / "allreduce.csv")},
                                      load_perf_model("rtx3090-distilbert"), "fit", "sim");
  std::ofstream(dir / "fit.json") << model.dump();
  nlohmann::json doc = default_config_json();
  doc["model"] = dir / "fit.json";
  const Config carried = parse_config(doc, "test", "");
  CHECK(carried.platform.link_GBps == doctest::Approx(24.0).epsilon(1e-3));
  CHECK(carried.platform.latency_us == doctest::Approx(5.0).epsilon(1e-3));
  CHECK(carried.platform.host_GBps == 0);
  CHECK(carried.platform_source.find("from model fit (fitted by ddpsim calibrate: a ring allreduce over 4 ranks") !=
        std::string::npos);
  doc["platform"] = {{"link_GBps", 10}};
  const Config own_link = parse_config(doc, "test", "");
  CHECK(own_link.platform.link_GBps == 10);
  CHECK(own_link.platform.latency_us == doctest::Approx(5.0).epsilon(1e-3));
  CHECK(own_link.platform_source.find("the rest from the config") != std::string::npos);
  doc["platform"] = {{"topology", "nvlink"}};
  const Config other = parse_config(doc, "test", "");
  CHECK(other.platform.link_GBps != doctest::Approx(24.0));
  CHECK(other.platform_source.find("is not used") != std::string::npos);
  const Config builtin = parse_config(default_config_json(), "test", "");
  // The built-in RTX 3090 carries its network as a hypothesis, and says so.
  CHECK(builtin.platform_source.find("hypothesis, not measured") != std::string::npos);
  nlohmann::json plain = default_config_json();
  plain["model"] = dir / "known.json";
  std::ofstream(dir / "known.json") << known_model(0).dump();
  // A model without a network leaves the config's, and the preset's nominal figures are named as such.
  CHECK(parse_config(plain, "test", "").platform_source.find("the pcie preset's nominal") != std::string::npos);
  // A model's own platform figures are checked, and blamed on the model.
  nlohmann::json broken = nlohmann::json::parse(model.dump());
  broken["platform"]["link_GBps"] = -1;
  std::ofstream(dir / "broken.json") << broken.dump();
  doc["model"] = dir / "broken.json";
  doc.erase("platform");
  CHECK_THROWS_WITH_AS(parse_config(doc, "test", ""), doctest::Contains("broken.json: platform: link_GBps"),
                       InputError);
}

TEST_CASE("the allreduce line is fitted at the DDP bucket sizes a profile names") {
  // Times that are no line (a CPU's: small sizes in cache, large ones at another rate), and two
  // bucket sizes among the profiled ones: the line goes through those, where a line through
  // every size misses them.
  TempDir dir;
  const std::vector<double> sizes = {65536, 1048576, 2369544, 4194304, 16777216, 26214400, 42312704, 67108864};
  std::map<double, double> ms = {{65536, 0.41},     {1048576, 0.43},  {2369544, 1.9},   {4194304, 3.76},
                                 {16777216, 13.68}, {26214400, 16.0}, {42312704, 27.0}, {67108864, 43.9}};
  const std::string compute = simulated_trace(dir, 0.0, "compute", {"minmax"}, 50);
  const auto fitted = [&](const std::string& buckets) {
    PolicyRun run{"allreduce", "", 1, {}, {}};
    Rng rng(5);
    for (int rep = 0; rep < 5; ++rep)
      for (double s : sizes) {
        RankStep r;
        r.step = static_cast<int>(run.rows.size());
        r.allreduce_bytes = s;
        r.allreduce_ms = r.step_ms = ms.at(s) * std::exp(0.02 * rng.normal());
        run.rows.push_back(r);
      }
    std::vector<std::pair<std::string, std::string>> meta = {{"world_size", "2"}, {"profile", "allreduce"}};
    if (!buckets.empty()) meta.emplace_back("ddp_buckets", buckets);
    std::ofstream(dir / "allreduce.csv") << trace_csv({run}, meta);
    return calibrate({read_trace(compute), read_trace(dir / "allreduce.csv")});
  };
  // t = c0 + c1·S of a ring of two: c1 = 1 / link bandwidth, c0 = 2 steps of latency.
  const auto at = [](const Calibration& c, double S) {
    return 2 * c.allreduce_step_latency_us * 1e-3 + S / (c.allreduce_link_GBps * 1e6);
  };
  const Calibration buckets = fitted("2369544,42312704");
  CHECK(buckets.allreduce_at_buckets);
  CHECK(buckets.allreduce_fitted_bytes == std::vector<double>{2369544, 42312704});
  CHECK(at(buckets, 42312704) == doctest::Approx(27.0).epsilon(0.03));
  CHECK(at(buckets, 2369544) == doctest::Approx(1.9).epsilon(0.03));
  CHECK(fit_report(buckets).find("fitted at the trace's DDP bucket sizes (2369544, 42312704 bytes)") !=
        std::string::npos);
  const Calibration every = fitted("");
  CHECK_FALSE(every.allreduce_at_buckets);
  CHECK(at(every, 42312704) < 0.9 * 27.0);  // the line through every size: the last bucket 10%+ short
  // One bucket size timed is no line: every size, and the report says which.
  const Calibration one = fitted("42312704,99");
  CHECK_FALSE(one.allreduce_at_buckets);
  CHECK(fit_report(one).find("fitted at every size, fewer than two of the trace's DDP bucket sizes being timed") !=
        std::string::npos);
  // A small bucket faster than the line allows (no negative latency): the large one, which a
  // step waits for, is met, as a fit by absolute error does; one by relative error splits the two.
  ms[2369544] = 0.5;
  CHECK(at(fitted("2369544,42312704"), 42312704) == doctest::Approx(27.0).epsilon(0.02));
  ms[2369544] = 1.9;
  CHECK_THROWS_WITH_AS(fitted("2369544,,42312704"),
                       doctest::Contains("metadata ddp_buckets=2369544,,42312704: expected"), InputError);
}

TEST_CASE("bad traces are named by file, line and column") {
  TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return dir / name;
  };
  CHECK_THROWS_WITH_AS(read_trace(write("nocol.csv", "step,rank,batch_size\n0,0,4\n")),
                       doctest::Contains("nocol.csv:1: the header lacks column \"max_len\""), InputError);
  CHECK_THROWS_WITH_AS(read_trace(write("notime.csv", "step,rank,batch_size,max_len\n0,0,4,9\n"), {"fwd_ms"}),
                       doctest::Contains("lacks column \"fwd_ms\""), InputError);
  CHECK_THROWS_WITH_AS(
      read_trace(write("nan.csv", "# device=x\nstep,rank,batch_size,max_len,fwd_ms\n0,0,4,9,1.5\n1,0,4,9,fast\n")),
      doctest::Contains("nan.csv:4: column fwd_ms: \"fast\" is not a number"), InputError);
  CHECK_THROWS_WITH_AS(read_trace(write("neg.csv", "step,rank,batch_size,max_len\n0,0,-4,9\n")),
                       doctest::Contains("neg.csv:2: column batch_size: expected an integer from 0 to 2147483647"),
                       InputError);
  CHECK_THROWS_WITH_AS(
      read_trace(write("mixed.csv", "step,rank,batch_size,max_len\n0,0,4,9\n0,0,5,9\n")),
      doctest::Contains("mixed.csv:3: step 0, rank 0 appears twice: several runs mixed without a policy column"),
      InputError);
  CHECK_THROWS_WITH_AS(read_trace(write("short.csv", "step,rank,batch_size,max_len\n0,0,4\n")),
                       doctest::Contains("short.csv:2: 3 fields, the header has 4"), InputError);
  CHECK_THROWS_WITH_AS(read_trace(write("negms.csv", "step,rank,batch_size,max_len,step_ms\n0,0,4,9,-3\n")),
                       doctest::Contains("negms.csv:2: column step_ms: expected a value ≥ 0, got \"-3\""), InputError);
  CHECK_THROWS_WITH_AS(read_trace(write("zero.csv", "step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,0,9,1,2\n")),
                       doctest::Contains("zero.csv:2: a row with compute times needs batch_size and max_len ≥ 1"),
                       InputError);
  CHECK_THROWS_WITH_AS(read_trace(write("big.csv", "step,rank,batch_size,max_len\n0,0,4294967296,9\n")),
                       doctest::Contains("column batch_size: expected an integer from 0 to 2147483647"), InputError);
  const auto one = write("one.csv", "step,rank,batch_size,max_len,fwd_ms,bwd_ms\n0,0,4,9,1,2\n1,0,4,9,1.1,2.1\n");
  CHECK_THROWS_WITH_AS(calibrate({read_trace(one, {"fwd_ms", "bwd_ms"})}),
                       doctest::Contains("1 distinct (batch size, length) point(s)"), InputError);
  CHECK_THROWS_WITH_AS(read_trace(dir / "absent.csv"), doctest::Contains("absent.csv: cannot open trace"), InputError);
}

TEST_CASE("both interference factors come back from a profile of each activity alone and beside the other") {
  TempDir dir;
  // Backward of three shapes, alone and 1.25× slower beside allreduces; allreduces of two
  // sizes alone, and of the larger 1.4× slower beside backward; all with 3% noise.
  Rng rng(11);
  PolicyRun run{"allreduce", "", 1, {}, {}};
  for (int L : {16, 32, 64})
    for (int r = 0; r < 20; ++r)
      for (int with : {0, 1}) {
        RankStep row;
        row.step = static_cast<int>(run.rows.size());
        row.batch_size = 12;
        row.max_len = L;
        row.padded_tokens = 12 * L;
        row.bwd_ms = (4.0 + 0.01 * 12 * L) * (with ? 1.25 : 1.0) * std::exp(0.03 * rng.normal());
        row.concurrent_allreduce_bytes = with ? 25 << 20 : 0;
        run.rows.push_back(row);
      }
  for (double bytes : {1 << 20, 25 << 20})
    for (int r = 0; r < 20; ++r)
      for (int with : {0, 1}) {
        if (with && bytes < (25 << 20)) continue;
        RankStep row;
        row.step = static_cast<int>(run.rows.size());
        row.allreduce_bytes = bytes;
        row.allreduce_ms = (0.5 + bytes / 3e6) * (with ? 1.4 : 1.0) * std::exp(0.03 * rng.normal());
        if (with) row.batch_size = 12, row.max_len = 64, row.padded_tokens = 12 * 64, row.bwd_ms = 20;
        run.rows.push_back(row);
      }
  std::ofstream(dir / "interference.csv") << trace_csv({run}, {{"world_size", "2"}, {"profile", "interference"}});
  const std::string compute = simulated_trace(dir, 0.0, "compute", {"minmax"}, 50);
  const Calibration c = calibrate({read_trace(compute), read_trace(dir / "interference.csv")});
  CHECK(c.compute_beside_comm.size() == 3);
  CHECK(c.comm_slowdown == doctest::Approx(1.25).epsilon(0.02));
  REQUIRE(c.comm_beside_compute.size() == 1);
  CHECK(c.comm_beside_compute[0].bytes == 25 << 20);
  CHECK(c.allreduce_slowdown == doctest::Approx(1.4).epsilon(0.02));
  CHECK(c.allreduce.mape < 0.05);  // the α–β fit leaves the rows timed beside backward out
  const auto json = calibrated_model(c, {read_trace(compute)}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  const PerfModel fitted = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(fitted.comm_slowdown == c.comm_slowdown);
  CHECK(fitted.allreduce_slowdown == c.allreduce_slowdown);
  CHECK(fit_report(c).find("interference: backward runs ×1.2") != std::string::npos);
  CHECK(fit_report(c).find("an allreduce runs ×1.") != std::string::npos);
}

TEST_CASE("noise timed by four ranks at once splits into each rank's own and the step's shared") {
  // Four ranks time every step's shape together; a step's factor exp(0.08·z) is shared, each
  // rank adds exp(0.04·z') of its own; 3×3 shapes, 40 steps each.
  TempDir dir;
  Rng rng(5);
  PolicyRun run{"profile", "", 4, {}, {}};
  for (int b : {2, 8, 24})
    for (int L : {16, 48, 128})
      for (int r = 0; r < 40; ++r) {
        const double shared = std::exp(0.08 * rng.normal());
        const int step = static_cast<int>(run.rows.size() / 4);
        for (int g = 0; g < 4; ++g) {
          const double factor = shared * std::exp(0.04 * rng.normal());
          RankStep row;
          row.step = step;
          row.rank = g;
          row.batch_size = b;
          row.max_len = L;
          row.padded_tokens = std::int64_t{b} * L;
          row.global_batch = 4 * b;
          row.fwd_ms = (2 + 0.002 * b * L + 1e-5 * b * L * L) * factor;
          row.bwd_ms = 2 * row.fwd_ms;
          run.rows.push_back(row);
        }
      }
  std::ofstream(dir / "together.csv") << trace_csv({run}, {{"world_size", "4"}, {"profile", "ranks together"}});
  const Calibration c = calibrate({read_trace(dir / "together.csv")});
  CHECK(c.noise_ranks == 4);
  CHECK(c.noise_sigma == doctest::Approx(0.04).epsilon(0.15));
  CHECK(c.noise_shared_sigma == doctest::Approx(0.08).epsilon(0.15));
  CHECK(std::hypot(c.noise_sigma, c.noise_shared_sigma) == doctest::Approx(std::hypot(0.04, 0.08)).epsilon(0.1));
  CHECK(fit_report(c).find("split over the 4 ranks that timed each step at once") != std::string::npos);
  const auto base = load_perf_model("rtx3090-distilbert");
  const auto json = calibrated_model(c, {read_trace(dir / "together.csv")}, base, "fit", "sim");
  const PerfModel fitted = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(fitted.noise_shared_sigma == c.noise_shared_sigma);
  // One rank's rows of the same steps: no split, the total as before.
  PolicyRun alone{"profile", "", 1, {}, {}};
  for (const RankStep& row : run.rows)
    if (row.rank == 0) alone.rows.push_back(row), alone.rows.back().global_batch = row.batch_size;
  std::ofstream(dir / "alone.csv") << trace_csv({alone}, {{"world_size", "1"}, {"profile", "one rank"}});
  const Calibration one = calibrate({read_trace(dir / "alone.csv")});
  CHECK(one.noise_ranks == 0);
  CHECK(one.noise_shared_sigma == 0);
  CHECK(one.noise_sigma == doctest::Approx(std::hypot(0.04, 0.08)).epsilon(0.15));
}

TEST_CASE("slow spells that lift all of a shape's repetitions come back as measured; the phases keep a quiet level") {
  // One rank, 8×8 shapes of 5 back-to-back repetitions; a spell lifts one shape in five ×1.4,
  // and every repetition has its own exp(0.03·z).
  TempDir dir;
  Rng rng(11);
  PolicyRun run{"profile", "", 1, {}, {}};
  const auto quiet = [](int b, int L) { return 2 + 0.002 * b * L + 1e-5 * b * L * L; };
  int lifted = 0;
  for (int b : {1, 2, 4, 8, 12, 16, 24, 32})
    for (int L : {8, 16, 32, 48, 64, 96, 128, 192}) {
      const bool spell = rng.uniform() < 0.2;
      lifted += spell;
      for (int r = 0; r < 5; ++r)
        run.rows.push_back(profile_row(static_cast<int>(run.rows.size()), b, L,
                                       quiet(b, L) * (spell ? 1.4 : 1.0) * std::exp(0.03 * rng.normal())));
    }
  REQUIRE(lifted > 6);
  REQUIRE(lifted < 20);
  std::ofstream(dir / "spells.csv") << trace_csv({run}, {{"world_size", "1"}, {"profile", "one rank"}});
  CalibrationOptions analytic;
  analytic.form = "analytic";
  const Calibration c = calibrate({read_trace(dir / "spells.csv")}, analytic);
  CHECK(c.noise_sigma == doctest::Approx(0.03).epsilon(0.2));  // the repetitions, not the spells
  CHECK(c.spell_groups == 64);
  REQUIRE(c.spell_quantiles.size() == 101);
  CHECK(c.spell_quantiles[50] == doctest::Approx(1.0));
  CHECK(c.spell_quantiles[100 - 100 * lifted / 64 + 3] == doctest::Approx(1.4).epsilon(0.04));
  CHECK(c.spell_quantiles[100 - 100 * lifted / 64 - 5] < 1.05);
  for (const auto& [b, L] : {std::pair{2, 16}, {24, 64}, {8, 192}})  // the bisquare fit leaves the spells out
    CHECK(c.forward.model.at(b, L) == doctest::Approx(quiet(b, L) * std::exp(0.5 * 0.03 * 0.03)).epsilon(0.03));
  CHECK(fit_report(c).find("slow spells as measured: how far each of 64 repeated shapes") != std::string::npos);
  const auto json =
      calibrated_model(c, {read_trace(dir / "spells.csv")}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  const PerfModel fitted = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(fitted.spell_quantiles == c.spell_quantiles);
  // Drawn per rank-step, the spells lift mean compute to what the rows measured.
  double measured = 0, predicted = 0;
  for (const RankStep& row : run.rows) measured += row.fwd_ms, predicted += fitted.fwd_ms(row.batch_size, row.max_len);
  CHECK(measured / predicted == doctest::Approx(quantile_table_mean(fitted.spell_quantiles)).epsilon(0.03));
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
