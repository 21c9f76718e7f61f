// `ddpsim bench`: decision latency of every policy at growing scale.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "common/error.hpp"
#include "eval/bench.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim bench [--json] [--quick]

Measures the mean and P95 decision latency of each policy (one plan() call on filled
prefetch buffers, SST-2 lengths, seed 1) at (G, B, K) = (4, 48, 64), (8, 256, 64),
(64, 2048, 64) and (1024, 16384, 64); the enumeration solver only where it can finish.
Targets: minmax/exact <= 5 us at (4,48,64) and <= 1 ms at (1024,16384,64); kk <= 1 ms at
(1024,16384,64).

Then times the simulator end to end (planning, compute model, SimGrid) on the embedded
default's six policies: the study's setting (G=4, 800 steps) in fast mode (target < 1 s) and
in full mode; G=64 (8 nodes x 8 GPUs, ring), 800 steps, full mode (target < 30 s); G=1024
(128 nodes x 8, hierarchical), 200 steps, fast mode (target < 60 s). Build in Release for
meaningful figures.
)";

}  // namespace

int bench(const Args& args) {
  po::options_description visible("options");
  visible.add_options()(
      "json",
      "print {\"sched\": [{policy, solver, G, B, K, mean_us, p95_us}, ...], \"sim\": [{config, mode, G, steps, "
      "policies, wall_s, rank_steps_per_s, target_s}, ...]} instead of tables")(
      "quick", "a tenth of the decisions and steps: a smoke test, not a measurement")(
      "only", po::value<std::string>(), "sched or sim: run one half")("help,h", "this help");
  po::variables_map vm;
  if (!parse(args, USAGE, visible, {}, {}, vm)) return 0;

  const bool json = vm.count("json") > 0;
  const std::string only = vm.count("only") ? vm["only"].as<std::string>() : "";
  if (!only.empty() && only != "sched" && only != "sim")
    throw UsageError("--only is sched or sim, got \"" + only + "\"");
  const double scale = vm.count("quick") ? 0.1 : 1.0;
  const auto say = [&](const std::string& what) { std::cerr << "bench: " << what << "\n"; };
  const auto results = only == "sim" ? std::vector<SchedBenchResult>{} : run_sched_bench(scale, say);
  const auto sims = only == "sched" ? std::vector<SimBenchResult>{} : run_sim_bench(scale, say);
  if (json) {
    nlohmann::ordered_json sim_rows = nlohmann::ordered_json::array();
    for (const auto& r : sims)
      sim_rows.push_back(
          {{"config", r.name},
           {"mode", r.mode},
           {"topology", r.topology},
           {"algorithm", r.algorithm},
           {"G", r.G},
           {"steps", r.steps},
           {"policies", r.policies},
           {"wall_s", r.wall_s},
           {"rank_steps_per_s", r.rank_steps_per_s},
           {"target_s", r.target_s > 0 ? nlohmann::ordered_json(r.target_s) : nlohmann::ordered_json()}});
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& r : results)
      rows.push_back({{"policy", r.policy},
                      {"solver", r.solver},
                      {"G", r.G},
                      {"B", r.B},
                      {"K", r.K},
                      {"decisions", r.decisions},
                      {"mean_us", r.mean_us},
                      {"p95_us", r.p95_us}});
    std::cout << nlohmann::ordered_json{{"sched", rows}, {"sim", sim_rows}}.dump(2) << "\n";
    return 0;
  }
  if (!sims.empty()) {
    std::printf("%-36s %-5s %5s %6s %8s %10s %14s %8s\n", "simulation", "mode", "G", "steps", "policies", "wall s",
                "rank-steps/s", "target");
    for (const auto& r : sims)
      std::printf("%-36s %-5s %5d %6d %8d %10.3f %14.0f %8s\n", r.name.c_str(), r.mode.c_str(), r.G, r.steps,
                  r.policies, r.wall_s, r.rank_steps_per_s,
                  r.target_s > 0 ? ("< " + std::to_string(static_cast<int>(r.target_s)) + " s").c_str() : "");
    if (results.empty()) return 0;
    std::printf("\n");
  }
  std::printf("%-14s %-10s %6s %6s %4s %10s %12s %12s\n", "policy", "solver", "G", "B", "K", "decisions", "mean us",
              "p95 us");
  for (const auto& r : results)
    std::printf("%-14s %-10s %6d %6d %4d %10d %12.2f %12.2f\n", r.policy.c_str(), r.solver.c_str(), r.G, r.B, r.K,
                r.decisions, r.mean_us, r.p95_us);
  return 0;
}

}  // namespace ddpsim::cli
