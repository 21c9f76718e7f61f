// Calibration: the compute surface, its noise and slow spells, the allreduce line and the
// interference factors recovered from simulated traces and profiles, and bad traces each named
// by file, line and column. Replay and validation are validate_test's.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>

#include "calib/calibrate.hpp"
#include "calib/trace_reader.hpp"
#include "common/error.hpp"
#include "common/rng.hpp"
#include "eval/config.hpp"
#include "profile_row.hpp"
#include "report/outputs.hpp"
#include "simulated_trace.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::known_model;
using ddpsim::test::profile_row;
using ddpsim::test::simulated_trace;
using ddpsim::test::TempDir;

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
