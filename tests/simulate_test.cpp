// Timed runs of whole configs: stragglers, determinism, fast vs full mode, the model cost,
// and the config sections the simulator adds.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"

using namespace ddpsim;

namespace {

Config config_of(nlohmann::json doc) {
  return parse_config(doc, "test config", "");
}

SimulationRun simulate_doc(const nlohmann::json& doc, std::pair<int, int> timeline = {0, 0}) {
  const Config c = config_of(doc);
  const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(c.training.seed);
  return simulate(c, dataset, timeline);
}

nlohmann::json with(nlohmann::json doc, const std::string& assignment) {
  apply_override(doc, assignment);
  return doc;
}

}  // namespace

TEST_CASE("a straggler sets every rank's step time while only its own compute grows") {
  // Every sample 20 tokens long, no noise: the ranks differ only by the straggler.
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 20}, {"std", 1}, {"min", 20}, {"max", 20}, {"samples", 5000}}},
      {"training", {{"steps", 12}}},
      {"policies", {"static"}},
      {"simulation", {{"noise_sigma", 0}, {"stragglers", {{{"rank", 2}, {"factor", 1.3}, {"from_step", 5}}}}}}};
  const Config c = config_of(doc);
  const SimulationRun sim = simulate_doc(doc);
  const auto& rows = sim.runs[0].rows;
  const double nominal = c.model->compute_ms(12, 20);
  for (const RankStep& r : rows) {
    CAPTURE(r.step);
    CAPTURE(r.rank);
    const double expected = nominal * (r.rank == 2 && r.step >= 5 ? 1.3 : 1.0);
    CHECK(r.fwd_ms + r.bwd_ms == doctest::Approx(expected).epsilon(1e-9));
    if (r.step > 5)  // the step after the onset onwards: every rank waits for rank 2
      CHECK(r.step_ms == doctest::Approx(rows[static_cast<std::size_t>(r.step * 4 + 2)].step_ms).epsilon(1e-9));
  }
  const TokenSummary s = summarize(sim.runs[0]);
  CHECK(s.mean_std_compute_ms > 0.05 * nominal);                   // compute spread is visible...
  CHECK(s.mean_std_step_ms < 0.01 * s.mean_std_compute_ms + 0.2);  // ...the wall-time spread is not
  CHECK(rows[11 * 4 + 0].comm_wait_ms > rows[11 * 4 + 2].comm_wait_ms + 0.25 * nominal);
}

// Byte-identical outputs across invocations are checked end to end (tests/cli); inside one
// process SimGrid's clock keeps running from one engine to the next, so times taken as
// clock differences may differ in the last bits.
TEST_CASE("same config and seed give the same steps; another seed other steps") {
  const nlohmann::json doc = with(default_config_json(), "training.steps=60");
  const auto a = simulate_doc(doc), b = simulate_doc(doc), c = simulate_doc(with(doc, "training.seed=7"));
  bool any_difference = false;
  for (std::size_t p = 0; p < a.runs.size(); ++p)
    for (std::size_t i = 0; i < a.runs[p].rows.size(); ++i) {
      CHECK(a.runs[p].rows[i].step_ms == doctest::Approx(b.runs[p].rows[i].step_ms).epsilon(1e-12));
      any_difference |= a.runs[p].rows[i].step_ms != c.runs[p].rows[i].step_ms;
    }
  CHECK(any_difference);
}

TEST_CASE("fast and full mode agree within 1% on mean and P95 max step time") {
  const nlohmann::json study = with(default_config_json(), "training.steps=300");
  nlohmann::json nvlink8 = with(study, "training.world_size=8");
  nvlink8 = with(nvlink8, "training.global_batch=96");
  nvlink8 = with(nvlink8, "platform.topology=nvlink");
  nvlink8 = with(nvlink8, "model=h100-distilbert");
  for (const auto& doc : {study, nvlink8}) {
    const auto fast = simulate_doc(with(doc, "simulation.mode=fast"));
    const auto full = simulate_doc(with(doc, "simulation.mode=full"));
    for (std::size_t p = 0; p < fast.runs.size(); ++p) {
      CAPTURE(fast.runs[p].label);
      const TokenSummary f = summarize(fast.runs[p]), s = summarize(full.runs[p]);
      CHECK(s.mean_max_step_ms == doctest::Approx(f.mean_max_step_ms).epsilon(0.01));
      CHECK(s.p95_max_step_ms == doctest::Approx(f.p95_max_step_ms).epsilon(0.01));
    }
  }
}

TEST_CASE("the built-in RTX 3090 model reproduces the study's static baseline") {
  const auto sim = simulate_doc(with(with(default_config_json(), "policies=[\"static\"]"), "training.steps=800"));
  const TokenSummary s = summarize(sim.runs[0]);
  CHECK(s.mean_max_step_ms == doctest::Approx(118.51).epsilon(0.01));   // published: 118.51 ms
  CHECK(s.p95_max_step_ms == doctest::Approx(120.96).epsilon(0.015));   // published: 120.96 ms; 119.32 here
  CHECK(s.mean_samples_per_s == doctest::Approx(405.1).epsilon(0.01));  // published: 405.1
}

TEST_CASE("minmax balances predicted time with cost=model") {
  nlohmann::json doc = with(with(default_config_json(), "training.steps=200"), "simulation.noise_sigma=0");
  doc["policies"] = {"static", "minmax:cost=tokens", "minmax:cost=model"};
  const auto sim = simulate_doc(doc);
  const TokenSummary stat = summarize(sim.runs[0]), tokens = summarize(sim.runs[1]), model = summarize(sim.runs[2]);
  CHECK(model.mean_max_compute_ms < stat.mean_max_compute_ms);
  CHECK(model.mean_max_compute_ms <= tokens.mean_max_compute_ms);  // it minimises exactly this, step by step
  CHECK(model.mean_std_compute_ms < 0.5 * stat.mean_std_compute_ms);
  StepShape bare;  // no model in force: the library refuses
  CHECK_THROWS_WITH_AS(make_scheduler(parse_policy_spec("minmax:cost=model"), bare),
                       doctest::Contains("needs a performance model"), InputError);
}

TEST_CASE("noise is mean-one, seeded per rank and step, and the same for every policy") {
  nlohmann::json doc = with(default_config_json(), "training.steps=400");
  doc["policies"] = {"static"};
  doc["simulation"] = {{"noise_sigma", 0.1}};
  const Config c = config_of(doc);
  const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(0);
  const PolicyRun run = run_policy(c.policies[0], c.shape(), 400, dataset);
  const PolicyWork a = charge_compute(c, run), b = charge_compute(c, run);
  double ratio = 0;
  for (std::size_t i = 0; i < a.work.size(); ++i) {
    CHECK(a.work[i].fwd_ms == b.work[i].fwd_ms);
    ratio += a.work[i].fwd_ms / c.model->fwd_ms(run.rows[i].batch_size, run.rows[i].max_len);
  }
  CHECK(ratio / double(a.work.size()) == doctest::Approx(1.0).epsilon(0.01));
  CHECK(a.work[0].fwd_ms != a.work[1].fwd_ms);
}

TEST_CASE("shared noise: one mean-one factor per step for every rank, beside each rank's own") {
  nlohmann::json doc = with(default_config_json(), "training.steps=400");
  doc["policies"] = {"static"};
  doc["simulation"] = {{"noise_sigma", 0}, {"noise_shared_sigma", 0.2}};
  const Config c = config_of(doc);
  const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(0);
  const PolicyRun run = run_policy(c.policies[0], c.shape(), 400, dataset);
  const PolicyWork shared = charge_compute(c, run);
  auto factor = [&](const PolicyWork& w, std::size_t i) {
    return w.work[i].fwd_ms / c.model->fwd_ms(run.rows[i].batch_size, run.rows[i].max_len);
  };
  std::vector<double> factors, logs;
  for (std::size_t i = 0; i < shared.work.size(); ++i) {
    CHECK(factor(shared, i) == doctest::Approx(factor(shared, i - i % 4)).epsilon(1e-12));  // a step's ranks alike
    if (i % 4 == 0) factors.push_back(factor(shared, i)), logs.push_back(std::log(factors.back()));
  }
  CHECK(population_std(logs) == doctest::Approx(0.2).epsilon(0.1));
  CHECK(mean(factors) == doctest::Approx(1.0).epsilon(0.03));  // 400 draws: the mean's error is about 1%
  // Beside it, each rank's own noise draws exactly what it draws alone: the streams are apart.
  doc["simulation"]["noise_sigma"] = 0.1;
  const PolicyWork both = charge_compute(config_of(doc), run);
  doc["simulation"]["noise_shared_sigma"] = 0;
  const PolicyWork own = charge_compute(config_of(doc), run);
  for (std::size_t i = 0; i < both.work.size(); ++i)
    CHECK(factor(both, i) == doctest::Approx(factor(own, i) * factor(shared, i)).epsilon(1e-12));
}

TEST_CASE("the timeline keeps the requested steps: compute and one span per bucket per rank") {
  const auto sim = simulate_doc(with(with(default_config_json(), "training.steps=5"), "policies=[\"minmax\"]"), {1, 3});
  const auto& spans = sim.engine.policies[0].spans;
  int comm = 0, forward = 0;
  for (const Span& s : spans) {
    CHECK((s.step == 1 || s.step == 2));
    comm += s.comm;
    forward += s.name == "forward";
  }
  CHECK(forward == 2 * 4);
  CHECK(comm == 2 * 4 * static_cast<int>(sim.setup.buckets.size()));
  const std::string json = chrome_trace(sim);
  CHECK(json.find("\"traceEvents\"") != std::string::npos);
  CHECK(json.find("allreduce bucket 0") != std::string::npos);
}

TEST_CASE("HSDP's timeline: the allreduce across groups on a track of its own, so no track's boxes overlap") {
  nlohmann::json doc = with(with(default_config_json(), "training.steps=3"), "policies=[\"static\"]");
  for (const char* set : {"training.data_parallel=\"hybrid\"", "training.world_size=16", "training.global_batch=64",
                          "platform={\"topology\":\"cluster\",\"gpus_per_node\":8}"})
    doc = with(doc, set);
  const auto trace = nlohmann::json::parse(chrome_trace(simulate_doc(doc, {0, 3})))["traceEvents"];
  std::map<std::pair<long, int>, std::vector<std::pair<double, double>>> tracks;  // (pid, tid): boxes
  int across = 0;
  for (const auto& e : trace) {
    if (e["ph"] != "X") continue;
    const bool replica = e["name"].get<std::string>().starts_with("allreduce across groups");
    across += replica;
    CHECK((e["tid"] == 2) == replica);
    tracks[{e["pid"].get<long>(), e["tid"].get<int>()}].emplace_back(e["ts"].get<double>(), e["dur"].get<double>());
  }
  CHECK(across > 0);
  for (auto& [track, boxes] : tracks) {
    std::sort(boxes.begin(), boxes.end());
    for (std::size_t i = 1; i < boxes.size(); ++i)
      CHECK(boxes[i - 1].first + boxes[i - 1].second <= boxes[i].first + 0.002);
  }
}

TEST_CASE("packed sequences: compute and memory follow Σ s and Σ s², micro-batch by micro-batch") {
  nlohmann::json doc = {{"training", {{"steps", 5}, {"attention", "packed"}, {"micro_batches", 3}}},
                        {"policies", {"static"}},
                        {"simulation", {{"noise_sigma", 0}}}};
  const Config c = config_of(doc);
  const SimulationRun sim = simulate_doc(doc);
  const PerfModel& m = *c.model;
  for (const RankStep& r : sim.runs[0].rows) {
    REQUIRE(r.micro.size() == 3);
    double fwd = 0, bwd = 0, mem = 0;
    for (const MicroBatchShape& mb : r.micro) {
      fwd += m.forward.analytic.a_ms + m.forward.analytic.beta_ms * double(mb.real_tokens) +
             m.forward.analytic.gamma_ms * double(mb.sq_tokens);
      bwd += m.bwd_packed_ms(double(mb.real_tokens), double(mb.sq_tokens));
      mem = std::max(mem, m.packed_mem_mib(double(mb.real_tokens), double(mb.sq_tokens)));
    }
    CHECK(r.fwd_ms == doctest::Approx(fwd));
    CHECK(r.bwd_ms == doctest::Approx(bwd));
    CHECK(r.peak_mem_mib == doctest::Approx(mem));
    CHECK(r.padded_tokens == r.real_tokens);
  }
  // The same samples padded cost more: every micro-batch pads to its longest sample.
  const SimulationRun padded = simulate_doc(with(doc, "training.attention=padded"));
  CHECK(summarize(padded.runs[0]).mean_max_compute_ms > summarize(sim.runs[0]).mean_max_compute_ms);
  CHECK_THROWS_WITH_AS(config_of(with(doc, "training.attention=ragged")), doctest::Contains("\"padded\""), InputError);
}

TEST_CASE("a streamed run, a few steps at a time, writes the same trace and summaries as one held whole") {
  // Full mode too: SimGrid asks for each block when its ranks first need it.
  for (const char* extra : {"training.micro_batches=1", "training.micro_batches=3", "training.attention=\"packed\"",
                            "simulation.sched_ms=0.5", "simulation.mode=\"full\""}) {
    CAPTURE(std::string(extra));
    nlohmann::json doc = with(default_config_json(), "training.steps=40");
    doc = with(with(doc, extra), "policies=[\"static\",\"minmax\",\"verl:max_token_len=256\",\"sorted:mega=3\"]");
    const Config c = config_of(doc);
    const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(c.training.seed);
    const SimulationRun whole = simulate(c, dataset, {3, 9});
    std::ostringstream streamed;
    TraceWriter writer(streamed, {{"k", "v"}}, trace_columns_for(c));
    long last = 0;
    const SimulationRun blocks = simulate_streamed(
        c, dataset, {3, 9},
        [&](long done, long) {
          CHECK(done > last);
          last = done;
        },
        [&](const std::string& policy, std::span<const RankStep> rows) { writer.write(policy, rows); },
        /*block_steps=*/7);
    CHECK(last == 4 * 40);
    CHECK(streamed.str() == trace_csv(whole.runs, {{"k", "v"}}));
    // Equal up to the last bits: a second SimGrid engine in one process times the allreduce
    // ~1e-14 apart from the first (two whole runs differ as much), and full mode, every
    // collective through it, gathers such differences over the steps.
    const bool full = std::string(extra).find("full") != std::string::npos;
    const double epsilon = full ? 1e-9 : 1e-12;
    REQUIRE(blocks.summaries.size() == whole.summaries.size());
    for (std::size_t p = 0; p < whole.summaries.size(); ++p) {
      CAPTURE(p);
      CHECK(blocks.runs[p].rows.empty());
      CHECK(blocks.summaries[p].mean_max_step_ms ==
            doctest::Approx(whole.summaries[p].mean_max_step_ms).epsilon(epsilon));
      CHECK(blocks.summaries[p].p95_max_step_ms ==
            doctest::Approx(whole.summaries[p].p95_max_step_ms).epsilon(epsilon));
      CHECK(blocks.summaries[p].mean_std_peak_mem_mib == whole.summaries[p].mean_std_peak_mem_mib);
      CHECK(blocks.summaries[p].mean_micro_batches == whole.summaries[p].mean_micro_batches);
      CHECK(blocks.summaries[p].mean_max_padded_tokens == whole.summaries[p].mean_max_padded_tokens);
    }
    if (!full) {
      CHECK(chrome_trace(blocks) == chrome_trace(whole));
      continue;
    }
    for (std::size_t p = 0; p < whole.engine.policies.size(); ++p) {  // the timeline's spans, to the last bits
      const auto& a = blocks.engine.policies[p].spans;
      const auto& b = whole.engine.policies[p].spans;
      REQUIRE(a.size() == b.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        CHECK((a[i].step == b[i].step && a[i].rank == b[i].rank && a[i].name == b[i].name));
        CHECK(a[i].start_ms == doctest::Approx(b[i].start_ms).epsilon(epsilon));
        CHECK(a[i].dur_ms == doctest::Approx(b[i].dur_ms).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("simulator config sections are checked") {
  const nlohmann::json base = default_config_json();
  CHECK_THROWS_WITH_AS(config_of(with(base, "simulation.mode=slow")), doctest::Contains("\"fast\" or \"full\""),
                       InputError);
  CHECK_THROWS_WITH_AS(config_of(with(base, "simulation.algoritm=ring")),
                       doctest::Contains("did you mean \"algorithm\""), InputError);
  CHECK_THROWS_WITH_AS(config_of(with(base, "simulation.rank_speed=[1,1]")), doctest::Contains("rank_speed lists 2"),
                       InputError);
  CHECK_THROWS_WITH_AS(config_of(with(base, "platform.topology=torus")), doctest::Contains("unknown topology"),
                       InputError);
  CHECK_THROWS_WITH_AS(config_of(with(with(base, "platform.topology=cluster"), "training.world_size=12")),
                       doctest::Contains("not a whole number of nodes"), InputError);
  CHECK_THROWS_WITH_AS(config_of(with(base, "model=a100-distilbert")), doctest::Contains("not a built-in model"),
                       InputError);
  const Config fits = config_of(with(base, "training.b_max=\"model\""));
  CHECK(fits.training.b_max == std::vector<int>(4, fits.model->max_batch(256)));
  CHECK(fits.model->peak_mem_mib(fits.training.b_max[0], 256) <= fits.model->mem_capacity_mib);
  CHECK(fits.model->peak_mem_mib(fits.training.b_max[0] + 1, 256) > fits.model->mem_capacity_mib);
}

TEST_CASE("slow spells: drawn per rank-step or once per step for all ranks, lifting mean compute by their mean") {
  nlohmann::json doc = with(default_config_json(), "training.steps=400");
  doc["policies"] = {"static"};
  doc["simulation"] = {{"noise_sigma", 0}, {"noise_shared_sigma", 0}};
  const auto charge = [&](const std::string& spells) {
    doc["simulation"]["spells"] = spells;
    Config c = config_of(doc);
    PerfModel m = *c.model;
    m.spell_quantiles = {0.8, 1.0, 2.2};  // median one, mean 1.25
    c.model = std::make_shared<const PerfModel>(m);
    const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(0);
    const PolicyRun run = run_policy(c.policies[0], c.shape(), 400, dataset);
    const PolicyWork w = charge_compute(c, run);
    std::vector<double> factors;
    for (std::size_t i = 0; i < w.work.size(); ++i)
      factors.push_back(w.work[i].fwd_ms / m.fwd_ms(run.rows[i].batch_size, run.rows[i].max_len));
    return factors;
  };
  const auto own = charge("own"), shared = charge("shared"), off = charge("off");
  CHECK(mean(own) == doctest::Approx(1.25).epsilon(0.02));     // 1600 draws
  CHECK(mean(shared) == doctest::Approx(1.25).epsilon(0.04));  // 400 draws
  int differing = 0;
  for (std::size_t i = 0; i < own.size(); ++i) {
    CHECK(own[i] >= 0.8 - 1e-12);
    CHECK(own[i] <= 2.2 + 1e-12);
    CHECK(shared[i] == doctest::Approx(shared[i - i % 4]).epsilon(1e-12));  // a step's ranks alike
    CHECK(off[i] == doctest::Approx(1.0).epsilon(1e-12));
    differing += own[i] != own[i - i % 4];
  }
  CHECK(differing > 1000);
  doc["simulation"]["spells"] = "sometimes";
  CHECK_THROWS_WITH_AS(config_of(doc), doctest::Contains("spells is \"own\""), InputError);
}

TEST_CASE("a wait that rounds to zero is written 0.0000, never -0.0000") {
  std::ostringstream out;
  TraceWriter writer(out, {{"k", "v"}}, trace_columns_for(config_of(default_config_json())));
  RankStep row;
  row.fwd_ms = 1, row.bwd_ms = 2, row.comm_wait_ms = -1e-9, row.opt_ms = 0.5, row.step_ms = 3.5;
  writer.write("static", std::span<const RankStep>(&row, 1));
  CHECK(out.str().find(",2.0000,0.0000,0.5000,3.5000,") != std::string::npos);
  CHECK(out.str().find("-0.0000") == std::string::npos);
}
