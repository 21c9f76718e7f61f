// `ddpsim bench`: decision latency of every policy at growing scale, simulator and sweep speed.
#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/validate_bench.hpp"
#include "cli/options.hpp"
#include "common/error.hpp"
#include "eval/bench.hpp"
#include "sweep/bench.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim bench [--json] [--quick] [--only PART]

Measures the mean and P95 decision latency of each policy (one plan() call on filled
prefetch buffers, SST-2 lengths, seed 1) at (G, B, K) = (4, 48, 64), (8, 256, 64),
(64, 2048, 64) and (1024, 16384, 64), over 4000, 2000, 400 and 300 decisions; the
enumeration solver only where it can finish. Targets for the mean, each row saying met or
missed: minmax/exact <= 5 us at (4,48,64) and <= 200 us at (1024,16384,64); kk <= 200 us
at (1024,16384,64). Wall time: a busy machine slows every row alike, so compare policies
and builds within one run.

Then times the simulator end to end (planning, compute model, SimGrid) on the embedded
default's six policies, each case in a child process (wall and CPU time, peak RSS): the
study's setting (G=4, 800 steps) in fast mode (target < 1 s) and in full mode; G=64 (8 nodes
x 8 GPUs, ring), 800 steps, full mode (target < 10 s); G=1024 (128 nodes x 8, hierarchical),
200 steps, fast mode (target < 60 s). The frontier cases, minutes each and left out of
--quick: G=1024, 200 steps, full mode (every collective in SimGrid, target < 60 s); G=16384
(2048 nodes x 8, hierarchical, log-normal lengths 2..66 over 3M samples, B=262144), 200
steps, fast mode (target < 60 s). Sharded: FSDP of Llama-3.2-1B (spec-derived, a unit per
layer) at G=1024 (B=4096) and, a frontier case, G=16384 (the log-normal lengths above), 200
steps, fast mode (target < 60 s each), and at G=1024 in full mode (target < 60 s). Pipelines:
Llama-3.2-1B in 4 stages, 1F1B, ZeRO-2, 16 micro-batches, one policy, 100 steps, at G=1024
in full and fast mode and, frontier cases, G=4096 in fast mode (target < 60 s) and in full mode,
G=16384 in fast mode (target < 500 s, 5 s a step), and G=65536 (4 micro-batches, 20 steps).

Then times `ddpsim sweep` with 2 worker processes over 1,000 cells of the study's setting (six
policies x 800 steps, fast mode; cells differ by seed), every cell checked, run, written and
tabulated: target < 60 s, reported as cells/s; and over 10,000 small cells (5 steps, static and
minmax; cells differ by seed and global batch), where a cell's checking, forking and writing
are most of its cost: targets < 60 s and <= 5 ms of CPU a cell (this process and its workers).

Then times `ddpsim validate` of a 200,000-row trace (minmax, 50,000 steps of the study's
setting) against a baseline of as many (static): reading both, replaying them with the
compute noise and without, every 95% interval (2,000 block-bootstrap resamples a series) and
the outputs' text: target < 3 s.

Build in Release for meaningful figures.
)";

// The --json document: every part that ran.
nlohmann::ordered_json bench_json(const std::vector<SchedBenchResult>& results, const std::vector<SimBenchResult>& sims,
                                  const std::vector<SweepBenchResult>& sweeps,
                                  const std::optional<ValidateBenchResult>& validation) {
  nlohmann::ordered_json sim_rows = nlohmann::ordered_json::array();
  for (const auto& r : sims)
    sim_rows.push_back({{"config", r.name},
                        {"mode", r.mode},
                        {"topology", r.topology},
                        {"algorithm", r.algorithm},
                        {"G", r.G},
                        {"steps", r.steps},
                        {"policies", r.policies},
                        {"wall_s", r.wall_s},
                        {"cpu_s", r.cpu_s},
                        {"peak_rss_mib", r.peak_rss_mib},
                        {"rank_steps_per_s", r.rank_steps_per_s},
                        {"target_s", r.target_s > 0 ? nlohmann::ordered_json(r.target_s) : nlohmann::ordered_json()},
                        {"met", r.target_s > 0 ? nlohmann::ordered_json(r.met()) : nlohmann::ordered_json()}});
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  for (const auto& r : results)
    rows.push_back({{"policy", r.policy},
                    {"solver", r.solver},
                    {"G", r.G},
                    {"B", r.B},
                    {"K", r.K},
                    {"decisions", r.decisions},
                    {"mean_us", r.mean_us},
                    {"p95_us", r.p95_us},
                    {"target_us", r.target_us > 0 ? nlohmann::ordered_json(r.target_us) : nlohmann::ordered_json()},
                    {"met", r.target_us > 0 ? nlohmann::ordered_json(r.met()) : nlohmann::ordered_json()}});
  nlohmann::ordered_json doc{{"sched", rows}, {"sim", sim_rows}};
  for (const SweepBenchResult& s : sweeps)
    doc[s.grid == "study" ? "sweep" : "sweep_small"] = {
        {"cells", s.cells},
        {"jobs", s.jobs},
        {"policies", s.policies},
        {"steps", s.steps},
        {"wall_s", s.wall_s},
        {"cpu_s", s.cpu_s},
        {"cpu_ms_per_cell", s.cpu_ms_per_cell()},
        {"cells_per_s", s.cells_per_s},
        {"target_s", s.target_s},
        {"target_cpu_ms", s.target_cpu_ms > 0 ? nlohmann::ordered_json(s.target_cpu_ms) : nlohmann::ordered_json()}};
  if (validation)
    doc["validate"] = {
        {"rows", validation->rows},
        {"steps", validation->steps},
        {"wall_s", validation->wall_s},
        {"target_s",
         validation->target_s > 0 ? nlohmann::ordered_json(validation->target_s) : nlohmann::ordered_json()},
        {"met", validation->target_s > 0 ? nlohmann::ordered_json(validation->met()) : nlohmann::ordered_json()}};
  return doc;
}

}  // namespace

int bench(const Args& args) {
  po::options_description visible("options");
  visible.add_options()(
      "json",
      "print {\"sched\": [{policy, solver, G, B, K, decisions, mean_us, p95_us, target_us, met}, ...], \"sim\": "
      "[{config, mode, topology, algorithm, G, steps, "
      "policies, wall_s, cpu_s, peak_rss_mib, rank_steps_per_s, target_s, met}, ...], \"sweep\": {cells, jobs, "
      "policies, steps, wall_s, cells_per_s, target_s}} instead of tables")(
      "quick", "a tenth of the decisions and steps, without the frontier cases: a smoke test, not a measurement")(
      "only", po::value<std::string>(), "sched, sim, sweep or validate: run one part")("help,h", "this help");
  po::variables_map vm;
  if (!parse(args, USAGE, visible, {}, {}, vm)) return 0;

  const bool json = vm.count("json") > 0;
  const std::string only = vm.count("only") ? vm["only"].as<std::string>() : "";
  if (!only.empty() && only != "sched" && only != "sim" && only != "sweep" && only != "validate")
    throw UsageError("--only is sched, sim, sweep or validate, got \"" + only + "\"");
  const double scale = vm.count("quick") ? 0.1 : 1.0;
  const auto say = [&](const std::string& what) { std::cerr << "bench: " << what << "\n"; };
  const auto results = only.empty() || only == "sched" ? run_sched_bench(scale, say) : std::vector<SchedBenchResult>{};
  const auto sims = only.empty() || only == "sim" ? run_sim_bench(scale, say) : std::vector<SimBenchResult>{};
  std::vector<SweepBenchResult> sweeps;
  if (only.empty() || only == "sweep")
    for (const char* grid : {"study", "small"}) {
      say(std::string("sweep: ") +
          (grid == std::string("study")
               ? std::to_string(static_cast<int>(1000 * scale)) + " cells of the study's setting"
               : std::to_string(static_cast<int>(10'000 * scale)) + " small cells") +
          ", 2 jobs");
      sweeps.push_back(run_sweep_bench(grid, scale, 2));
    }
  std::optional<ValidateBenchResult> validation;
  if (only.empty() || only == "validate") {
    say("validate: a trace of " + std::to_string(static_cast<int>(200'000 * scale)) + " rows against a baseline");
    validation = run_validate_bench(scale);
  }
  if (json) {
    std::cout << bench_json(results, sims, sweeps, validation).dump(2) << "\n";
    return 0;
  }
  if (!sims.empty()) {
    std::printf("%-46s %-8s %5s %6s %8s %9s %9s %9s %13s %s\n", "simulation", "mode", "G", "steps", "policies",
                "wall s", "CPU s", "RSS MiB", "rank-steps/s", "target");
    for (const auto& r : sims) {
      const std::string target =
          r.target_s > 0 ? "< " + std::to_string(static_cast<int>(r.target_s)) + " s: " + (r.met() ? "met" : "missed")
                         : "";
      std::printf("%-46s %-8s %5d %6d %8d %9.3f %9.3f %9.0f %13.0f %s\n", r.name.c_str(), r.mode.c_str(), r.G, r.steps,
                  r.policies, r.wall_s, r.cpu_s, r.peak_rss_mib, r.rank_steps_per_s, target.c_str());
    }
    std::printf("\n");
  }
  for (const SweepBenchResult& s : sweeps) {
    std::printf(
        "sweep %s: %d cells (%d policies x %d steps, fast mode), %d jobs: %.1f s, %.1f cells/s, %.1f ms of "
        "CPU a cell (target: the full grid < %.0f s",
        s.grid.c_str(), s.cells, s.policies, s.steps, s.jobs, s.wall_s, s.cells_per_s, s.cpu_ms_per_cell(), s.target_s);
    if (s.target_cpu_ms > 0)
      std::printf(", <= %.0f ms of CPU a cell: %s", s.target_cpu_ms,
                  s.cpu_ms_per_cell() <= s.target_cpu_ms ? "met" : "missed");
    std::printf(")\n\n");
  }
  if (validation)
    std::printf(
        "validate: %ld rows against %ld (%d steps each): %.2f s%s\n\n", validation->rows, validation->rows,
        validation->steps, validation->wall_s,
        validation->target_s > 0 ? (validation->met() ? " (target < 3 s: met)" : " (target < 3 s: missed)") : "");
  if (results.empty()) return 0;
  std::printf("%-14s %-10s %6s %6s %4s %10s %12s %12s %s\n", "policy", "solver", "G", "B", "K", "decisions", "mean us",
              "p95 us", "target (mean)");
  for (const auto& r : results) {
    const std::string target =
        r.target_us > 0 ? "<= " + std::to_string(static_cast<int>(r.target_us)) + " us: " + (r.met() ? "met" : "missed")
                        : "";
    std::printf("%-14s %-10s %6d %6d %4d %10d %12.2f %12.2f %s\n", r.policy.c_str(), r.solver.c_str(), r.G, r.B, r.K,
                r.decisions, r.mean_us, r.p95_us, target.c_str());
  }
  return 0;
}

}  // namespace ddpsim::cli
