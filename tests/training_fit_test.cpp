// Training runs beside a profile: a run simulated with a known spike model and first-use cost
// calibrates back to them, and the engine charges a shape's first use once per process.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "calib/training_fit.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/stats.hpp"
#include "eval/simulate.hpp"
#include "eval/uncertainty.hpp"
#include "known_surface.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {

constexpr double kSpike = 3.0, kSpikeShare = 0.05, kFirstUse = 50.0;

// The known model: a quiet surface, steps in which one rank in twenty spikes ×3 (two ranks of
// the same step together, as spikes of ranks taking turns in one process come), and a first
// use of a shape costing 50 ms.
nlohmann::json spiky_model() {
  nlohmann::json m = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  m["name"] = "spiky";
  m["forward_ms"] = {{"a", 2.0}, {"beta", 0.002}, {"gamma", 1e-5}};
  m["backward_ms"] = {{"a", 4.0}, {"beta", 0.004}, {"gamma", 2e-5}};
  nlohmann::json steps = nlohmann::json::array();
  for (int s = 0; s < 200; ++s)  // 20 of 200 steps hold two spiking ranks of four: 5% of rank-steps
    steps.push_back(s % 10 == 0 ? nlohmann::json{kSpike, 1.0, kSpike, 1.0} : nlohmann::json{1.0, 1.0, 1.0, 1.0});
  m["noise"] = {{"sigma", 0}, {"steps", steps}};
  m["first_use_ms"] = kFirstUse;
  return m;
}

Config spiky_config(const std::string& policy, const std::string& first_use, int steps = 400) {
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 45}, {"min", 8}, {"max", 250}, {"samples", 20000}}},
      {"training", {{"world_size", 4}, {"global_batch", 48}, {"steps", steps}, {"seed", 5}}},
      {"simulation", {{"first_use", first_use}}},
      {"policies", {policy}},
      {"model", "rtx3090-distilbert"}};
  Config config = parse_config(doc, "test", "");
  config.model = std::make_shared<PerfModel>(parse_perf_model(spiky_model(), "spiky"));
  return config;
}

Trace as_trace(const SimulationRun& sim, const std::string& emulated) {
  Trace t;
  t.path = "simulated.csv";
  t.metadata = {{"emulated_ranks", emulated}};
  t.runs = sim.runs;
  return t;
}

// A run at another level: every phase's time ×f.
void scale_times(Trace& t, double f) {
  for (RankStep& r : t.runs[0].rows) r.fwd_ms *= f, r.bwd_ms *= f, r.opt_ms *= f;
}

}  // namespace

TEST_CASE("a run simulated with known spikes and first-use cost calibrates back to them") {
  for (const std::string policy : {"static", "minmax"}) {
    CAPTURE(policy);
    const Config config = spiky_config(policy, "shared");
    const auto dataset = make_length_source(config.data, 256)->dataset(5);
    const SimulationRun sim = simulate(config, dataset);
    const TrainingFit t = fit_training({as_trace(sim, "4")}, known_surface(*config.model));
    MESSAGE(training_report(t));
    CHECK(t.first_uses >= kMinFirstUses);
    CHECK(t.first_use_ms == doctest::Approx(kFirstUse).epsilon(0.10));
    CHECK(t.spike_pct == doctest::Approx(100 * kSpikeShare).epsilon(0.10));
    CHECK(t.factor_p99 == doctest::Approx(kSpike).epsilon(0.10));
    CHECK(t.factor_p50 == doctest::Approx(1.0).epsilon(0.01));
    // Spikes came two ranks a step; the fitted steps keep them together.
    const auto together = std::count_if(t.step_factors.begin(), t.step_factors.end(), [](const auto& s) {
      return std::count_if(s.begin(), s.end(), [](double f) { return f > 2; }) == 2;
    });
    const auto alone = std::count_if(t.step_factors.begin(), t.step_factors.end(), [](const auto& s) {
      return std::count_if(s.begin(), s.end(), [](double f) { return f > 2; }) == 1;
    });
    CHECK(together > 0);
    CHECK(alone == 0);
  }
}

TEST_CASE("a shape's first use is charged once per process: per rank, once for all ranks, or not at all") {
  const auto dataset = make_length_source(spiky_config("minmax", "own").data, 256)->dataset(5);
  auto first_uses = [&](const std::string& mode) {
    const Config config = spiky_config("minmax", mode, 60);
    const SimulationRun sim = simulate(config, dataset);
    const Config quiet = spiky_config("minmax", "off", 60);
    const SimulationRun base = simulate(quiet, dataset);
    long charged = 0;
    for (std::size_t i = 0; i < sim.runs[0].rows.size(); ++i) {
      const RankStep &a = sim.runs[0].rows[i], &b = base.runs[0].rows[i];
      charged += (a.fwd_ms + a.bwd_ms) - (b.fwd_ms + b.bwd_ms) > kFirstUse / 2;
    }
    return charged;
  };
  std::set<std::pair<int, int>> all;
  std::vector<std::set<std::pair<int, int>>> each(4);
  const SimulationRun plan = simulate(spiky_config("minmax", "off", 60), dataset);
  for (const RankStep& r : plan.runs[0].rows)
    all.emplace(r.batch_size, r.max_len), each[r.rank].emplace(r.batch_size, r.max_len);
  long per_rank = 0;
  for (const auto& s : each) per_rank += static_cast<long>(s.size());
  CHECK(first_uses("shared") == static_cast<long>(all.size()));
  CHECK(first_uses("own") == per_rank);
  CHECK(first_uses("off") == 0);
  CHECK(per_rank > static_cast<long>(all.size()));
}

// A process's slow start (DDP's bucket rebuild after step 0, allocators filling) is no noise to
// draw for any step: its slow leading steps leave the fit, where slow steps later on stay.
TEST_CASE("a process's slow leading steps are left out of the fit, slow steps later on are not") {
  const Config config = spiky_config("static", "shared", 120);
  const auto dataset = make_length_source(config.data, 256)->dataset(5);
  const Trace run = as_trace(simulate(config, dataset), "4");
  const auto slowed = [&](int from, int to) {
    Trace t = run;
    for (RankStep& r : t.runs[0].rows)
      if (r.step >= from && r.step <= to) r.fwd_ms *= 5, r.bwd_ms *= 5;
    return fit_training({t}, known_surface(*config.model));
  };
  const TrainingFit quiet = fit_training({run}, known_surface(*config.model));
  REQUIRE(quiet.first_uses >= kMinFirstUses);
  REQUIRE(quiet.warmups.size() == 1);
  CHECK(quiet.warmups[0].left_out == 0);

  const TrainingFit slow_start = slowed(1, 2);
  MESSAGE(training_report(slow_start));
  REQUIRE(slow_start.warmups.size() == 1);
  CHECK(slow_start.warmups[0].left_out == 2);
  CHECK(slow_start.warmups[0].first_kept == 3);
  CHECK(slow_start.warmups[0].slowest > 4);
  CHECK(slow_start.step_factors.size() == quiet.step_factors.size() - 2);
  CHECK(slow_start.factor_mean == doctest::Approx(quiet.factor_mean).epsilon(0.02));
  CHECK(slow_start.factor_p99 == doctest::Approx(quiet.factor_p99).epsilon(0.02));
  CHECK(training_report(slow_start).find("warm-up: left out steps 1 to 2 of simulated.csv") != std::string::npos);
  CHECK(training_report(quiet).find("warm-up") == std::string::npos);

  const TrainingFit slow_later = slowed(40, 41);
  CHECK(slow_later.warmups[0].left_out == 0);
  CHECK(slow_later.step_factors.size() == quiet.step_factors.size());
  CHECK(slow_later.factor_mean > 1.02 * quiet.factor_mean);
}

TEST_CASE("--training needs timed steps after step 0") {
  const Config config = spiky_config("static", "own", 1);
  const auto dataset = make_length_source(config.data, 256)->dataset(5);
  const SimulationRun sim = simulate(config, dataset);
  CHECK_THROWS_WITH_AS(fit_training({as_trace(sim, "0")}, known_surface(*config.model)),
                       doctest::Contains("simulated.csv: no step after step 0"), InputError);
}

TEST_CASE("measured steps keep their regime: a launch-bound run's spikes shrink on compute-bound rank-steps") {
  // The spiky run's steps, measured below a knee of 5,000 padded tokens, with a profile whose σ
  // from the knee is a fiftieth of its σ below.
  Config config = spiky_config("static", "off", 200);
  const auto dataset = make_length_source(config.data, 256)->dataset(5);
  Calibration c = known_surface(*config.model);
  c.regimes.knee_tokens = 5000;
  c.noise_sigma = 0.1;
  c.noise_above_sigma = 0.002;
  const TrainingFit t = fit_training({as_trace(simulate(config, dataset), "4")}, c);
  CHECK(t.above_share == doctest::Approx(0.0));  // 12 samples a rank of at most 250 tokens: below
  CHECK(t.steps_scale == doctest::Approx(0.02));
  nlohmann::ordered_json doc = nlohmann::ordered_json::parse(spiky_model().dump());
  add_training(doc, t, {});
  CHECK(doc["noise"]["steps_regime"] == "below");
  const PerfModel m = parse_perf_model(nlohmann::json::parse(doc.dump()), "with training");
  CHECK(m.noise_above.steps_scale == doctest::Approx(0.02));

  // Drawn for rank-steps below the knee, the ×3 spikes stay; from it, they shrink to ×3^0.02.
  for (const int global_batch : {48, 800}) {  // 12 and 200 samples a rank
    Config run = config;
    run.training.global_batch = global_batch;
    run.model = std::make_shared<PerfModel>(m);
    const SimulationRun sim = simulate(run, dataset);
    double largest = 0;
    for (const RankStep& r : sim.runs[0].rows)
      largest = std::max(largest, (r.fwd_ms + r.bwd_ms) / (m.compute_ms(r.batch_size, r.max_len)));
    CAPTURE(global_batch);
    if (global_batch == 48)
      CHECK(largest == doctest::Approx(kSpike).epsilon(0.05));
    else
      CHECK(largest < 1.05);
  }
}

TEST_CASE("runs trained in turn at different levels give the spread of a gain's run-level term") {
  const Config config = spiky_config("static", "off", 60);
  const auto dataset = make_length_source(config.data, 256)->dataset(5);
  const SimulationRun sim = simulate(config, dataset);
  Trace fast = as_trace(sim, "4"), slow = as_trace(sim, "4");
  fast.path = "runs/static/steps.csv";
  slow.path = "runs/sorted/steps.csv";
  slow.runs[0].label = "sorted";
  for (Trace* t : {&fast, &slow}) t->metadata["interleaved"] = "one step of each policy in turn: static,sorted";
  scale_times(slow, 1.02);
  const Calibration surface = known_surface(*config.model);
  CHECK(fit_training({fast}, surface).run_level_spread == 0);
  const TrainingFit t = fit_training({fast, slow}, surface);
  REQUIRE(t.run_levels.size() == 2);
  CHECK(t.run_levels[1].level / t.run_levels[0].level == doctest::Approx(1.02).epsilon(1e-6));
  // Two draws 2% apart: the standard deviation of their logs is ln 1.02 / √2, over one degree of
  // freedom, where Student's t is 12.71 (the normal's 1.96 would say 4.0%).
  const double spread = std::pow(1.02, t95(1)) - 1;
  CHECK(t95(1) == doctest::Approx(12.706).epsilon(1e-4));
  CHECK(t.run_level_spread == doctest::Approx(spread).epsilon(1e-6));
  const std::string report = training_report(t);
  CHECK(report.find("run level: two runs' levels may differ by 28.6% (95%; levels static ×") != std::string::npos);
  CHECK(report.find("not all trained in turn") == std::string::npos);

  // The model keeps it, and every gain predicted with it carries it, scaled by 1 − gain.
  auto doc = nlohmann::ordered_json::parse(spiky_model().dump());
  add_training(doc, t, {fast, slow});
  CHECK(doc["run_level"]["levels"].size() == 2);
  const PerfModel m = parse_perf_model(nlohmann::json::parse(doc.dump()), "trained");
  CHECK(m.run_level_spread == doctest::Approx(spread).epsilon(1e-3));
  const TokenSummary any{};
  const auto terms = fixed_terms(m, 20, any, any);
  const auto it = std::find_if(terms.begin(), terms.end(), [](const auto& x) { return x.name == "run level"; });
  REQUIRE(it != terms.end());
  CHECK(it->half_width_pp == doctest::Approx(100 * m.run_level_spread * 0.8));

  // Runs alike, and runs that do not say they were trained in turn.
  Trace same = fast;
  same.path = "runs/kk/steps.csv";
  same.runs[0].label = "kk";
  const TrainingFit alike = fit_training({fast, same}, surface);
  CHECK(alike.run_level_spread == 0);
  CHECK(training_report(alike).find("run level: the runs' levels agreed (levels static ×1.000, kk ×1.000): no term") !=
        std::string::npos);
  Trace same2 = same, fast3 = fast;  // two sessions, alike within each, 20% apart
  for (Trace* t : {&same2, &fast3}) {
    t->metadata["seed"] = "2";
    scale_times(*t, 0.8);
  }
  CHECK(training_report(fit_training({fast, same, fast3, same2}, surface))
            .find("run level: the runs' levels agreed within each session (levels") != std::string::npos);
  auto quiet = nlohmann::ordered_json::parse(spiky_model().dump());
  add_training(quiet, alike, {fast, same});
  CHECK_FALSE(quiet.contains("run_level"));
  // A second session (another process: its metadata differs), 20% faster throughout, its runs
  // 2% apart as in the first: a gain within a session sees only that, not the 20%; two degrees
  // of freedom (four runs, two sessions), where Student's t is 4.30.
  Trace fast2 = fast, slow2 = slow;
  for (Trace* t : {&fast2, &slow2}) {
    t->metadata["seed"] = "2";
    scale_times(*t, 0.8);
  }
  const TrainingFit two = fit_training({fast, slow, fast2, slow2}, surface);
  CHECK(two.sessions == 2);
  CHECK(two.run_level_spread == doctest::Approx(std::pow(1.02, t95(2)) - 1).epsilon(1e-6));
  CHECK(training_report(two).find("two runs of one session may differ by 8.9% (95%; each against its session's "
                                  "mean, 2 sessions; levels") != std::string::npos);
  // The levels by process, each process's runs by their policies.
  const std::string by_process = training_report(two);
  CHECK(by_process.find("; levels static ×") != std::string::npos);
  CHECK(by_process.find(", sorted ×") < by_process.find(" | static ×"));
  CHECK(by_process.find("runs/static/steps.csv ×") == std::string::npos);
  for (Trace* t : {&fast2, &slow2}) t->metadata.erase("seed");  // one session of four: the 20% counts
  CHECK(fit_training({fast, slow, fast2, slow2}, surface).run_level_spread > 2 * spread);
  // One run a process: nothing to take within a session, so the levels pool, and it is said.
  slow2.metadata["seed"] = "2";
  const TrainingFit apart = fit_training({fast, slow2}, surface);
  CHECK(apart.sessions_pooled);
  CHECK(apart.run_level_spread > spread);
  CHECK(training_report(apart).find("no process trained two of the runs: their levels were pooled") !=
        std::string::npos);
  slow.metadata.erase("interleaved");
  CHECK(training_report(fit_training({fast, slow}, surface)).find("the runs were not all trained in turn") !=
        std::string::npos);
}

TEST_CASE("the optimizer, the same work in every run, tells a machine that runs each model at its own level") {
  const Config config = spiky_config("static", "off", 60);
  const auto dataset = make_length_source(config.data, 256)->dataset(5);
  const SimulationRun sim = simulate(config, dataset);
  std::vector<Trace> runs;
  for (const std::string policy : {"static", "kk", "sorted"}) {
    Trace t = as_trace(sim, "4");
    t.path = "runs/" + policy + "/steps.csv";
    t.runs[0].label = policy;
    t.metadata["interleaved"] = "one step of each policy in turn: static,kk,sorted";
    runs.push_back(t);
  }
  const Calibration surface = known_surface(*config.model);
  const auto optimizer_times = [](Trace& t, double f) {
    for (RankStep& r : t.runs[0].rows) r.opt_ms *= f;
  };
  optimizer_times(runs[1], 1.05);
  const TrainingFit alike = fit_training(runs, surface);
  REQUIRE(alike.optimizer_by_session.size() == 1);
  CHECK(alike.optimizer_by_session[0][1].first == "kk");
  CHECK(alike.optimizer_apart == doctest::Approx(0.05).epsilon(1e-9));
  const std::string quiet = training_report(alike);
  CHECK(quiet.find("optimizer, the same work in every run: its medians at most 5.0% apart (static ") !=
        std::string::npos);
  CHECK(quiet.find("a level of its own") == std::string::npos);

  // A second process 30% slower throughout is its session's level, not a model's; a model 25%
  // slower than the others of its process is.
  std::vector<Trace> both = runs;
  for (Trace t : runs) {
    t.metadata["seed"] = "2";
    optimizer_times(t, 1.3);
    both.push_back(t);
  }
  CHECK(fit_training(both, surface).optimizer_apart == doctest::Approx(0.05).epsilon(1e-9));
  optimizer_times(both[5], 1.25);
  const TrainingFit own = fit_training(both, surface);
  CHECK(own.optimizer_by_session.size() == 2);
  CHECK(own.optimizer_apart == doctest::Approx(0.25).epsilon(1e-9));
  const std::string warned = training_report(own);
  CHECK(warned.find("its medians within a session at most 25.0% apart") != std::string::npos);
  CHECK(warned.find("the machine ran each run's model at a level of its own") != std::string::npos);
  auto doc = nlohmann::ordered_json::parse(spiky_model().dump());
  add_training(doc, own, both);
  CHECK(doc["calibration"]["fit"]["training"]["optimizer_apart"] == 0.25);

  // Two processes started alike are one session: its runs named by their traces where a policy repeats.
  std::vector<Trace> alike_flags = runs;
  for (Trace t : runs) {
    t.path = "again/" + t.path;
    alike_flags.push_back(t);
  }
  const TrainingFit repeated = fit_training(alike_flags, surface);
  REQUIRE(repeated.optimizer_by_session.size() == 1);
  CHECK(repeated.optimizer_by_session[0][3].first == "again/runs/static/steps.csv");
  // Runs not trained in turn differ by their minutes' drift too: no control.
  std::vector<Trace> apart = both;
  for (Trace& t : apart) t.metadata.erase("interleaved");
  CHECK(fit_training(apart, surface).optimizer_apart < 0);

  // Traces without optimizer times: no control, no line.
  for (Trace& t : runs)
    for (RankStep& r : t.runs[0].rows) r.opt_ms = std::nan("");
  const TrainingFit untimed = fit_training(runs, surface);
  CHECK(untimed.optimizer_apart < 0);
  CHECK(training_report(untimed).find("optimizer, the same work") == std::string::npos);
}

TEST_CASE("a model's run level is checked key by key") {
  nlohmann::json doc = spiky_model();
  const auto refused = [&](const nlohmann::json& run_level, const std::string& message) {
    doc["run_level"] = run_level;
    CAPTURE(run_level.dump());
    CHECK_THROWS_WITH_AS(parse_perf_model(doc, "m.json"), doctest::Contains(message.c_str()), InputError);
  };
  refused({{"spread", 0.05}}, "m.json: run_level: missing \"source\"");
  refused({{"spread", -1}, {"source", "s"}}, "spread must be a finite number ≥ 0 (at most 1.0)");
  refused({{"spread", 2}, {"source", "s"}}, "spread must be a finite number ≥ 0 (at most 1.0)");
  refused({{"spread", 0.05}, {"source", ""}}, "source is empty");
  refused({{"spread", 0.05}, {"source", "s"}, {"levels", {1, 2}}}, "run_level: levels");
  refused({{"spread", 0.05}, {"source", "s"}, {"levels", {{"a", -5}}}}, "run_level: levels: a");
  refused({{"spread", 0.05}, {"source", "s"}, {"spreed", 1}}, "spreed");
  doc["run_level"] = {{"spread", 0.05}, {"source", "s"}, {"levels", {{"a", 0.98}, {"b", 1.02}}}};
  CHECK(parse_perf_model(doc, "m.json").run_level_spread == doctest::Approx(0.05));
}

TEST_CASE("a model's source tells its traces apart by the folders they do not share") {
  const auto names = [](std::vector<std::string> paths) {
    std::vector<Trace> traces(paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) traces[i].path = paths[i];
    return trace_names(traces);
  };
  CHECK(names({"runs/a/static/steps.csv", "runs/a/kk/steps.csv", "runs/b/static/steps.csv"}) ==
        "a/static/steps.csv, a/kk/steps.csv, b/static/steps.csv");
  CHECK(names({"traces/cpu/profile-1core/steps.csv"}) == "profile-1core/steps.csv");
  CHECK(names({"steps.csv"}) == "steps.csv");
  CHECK(names({"x/one.csv", "x/two.csv"}) == "one.csv, two.csv");
  CHECK(names({"/abs/run/steps.csv", "rel/steps.csv"}) == "/abs/run/steps.csv, rel/steps.csv");
}
