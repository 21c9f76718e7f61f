// `ddpsim bench`: decision latency of every policy at growing scale.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "eval/bench.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim bench [--json] [--quick]

Measures the mean and P95 decision latency of each policy (one plan() call on filled
prefetch buffers, SST-2 lengths, seed 1) at (G, B, K) = (4, 48, 64), (8, 256, 64),
(64, 2048, 64) and (1024, 16384, 64); the enumeration solver only where it can finish.
Targets: minmax/exact <= 5 us at (4,48,64) and <= 1 ms at (1024,16384,64); kk <= 1 ms at
(1024,16384,64). Build in Release for meaningful figures.
)";

}  // namespace

int bench(const Args& args) {
  po::options_description visible("options");
  visible.add_options()("json",
                        "print {\"sched\": [{policy, solver, G, B, K, mean_us, p95_us}, ...]} instead of a table")(
      "quick", "a tenth of the decisions: a smoke test, not a measurement")("help,h", "this help");
  po::variables_map vm;
  if (!parse(args, USAGE, visible, {}, {}, vm)) return 0;

  const bool json = vm.count("json") > 0;
  const auto results = run_sched_bench(vm.count("quick") ? 0.1 : 1.0,
                                       [&](const std::string& what) { std::cerr << "bench: " << what << "\n"; });
  if (json) {
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
    std::cout << nlohmann::ordered_json{{"sched", rows}}.dump(2) << "\n";
    return 0;
  }
  std::printf("%-14s %-10s %6s %6s %4s %10s %12s %12s\n", "policy", "solver", "G", "B", "K", "decisions", "mean us",
              "p95 us");
  for (const auto& r : results)
    std::printf("%-14s %-10s %6d %6d %4d %10d %12.2f %12.2f\n", r.policy.c_str(), r.solver.c_str(), r.G, r.B, r.K,
                r.decisions, r.mean_us, r.p95_us);
  return 0;
}

}  // namespace ddpsim::cli
