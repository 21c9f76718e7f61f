#include "eval/bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "common/stats.hpp"
#include "data/lengths.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

namespace {

struct Shape {
  int G, B, K, decisions;
};

// Enumeration tries ~B^(G-1)/(G-1)! allocations: only the study's own shape finishes.
bool enumeration_feasible(const Shape& s) {
  return s.G <= 4 && s.B <= 64;
}

}  // namespace

std::vector<SchedBenchResult> run_sched_bench(double scale, const std::function<void(const std::string&)>& progress) {
  static const Shape shapes[] = {{4, 48, 64, 4000}, {8, 256, 64, 2000}, {64, 2048, 64, 400}, {1024, 16384, 64, 60}};
  const std::vector<int> dataset = histogram_source(sst2_train_histogram(), 256)->dataset(/*seed=*/1);
  std::vector<SchedBenchResult> results;
  for (const Shape& shape : shapes) {
    const std::string k = std::to_string(shape.K);
    std::vector<std::string> specs = {"static", "minmax:cost=tokens:buffer=" + k + ":solver=exact"};
    if (enumeration_feasible(shape)) specs.push_back("minmax:cost=tokens:buffer=" + k + ":solver=enumerate");
    specs.insert(specs.end(), {"kk", "sorted", "token_budget:max_tokens=512:buffer=" + k});
    for (const auto& text : specs) {
      const PolicySpec spec = parse_policy_spec(text);
      const int decisions = std::max(5, static_cast<int>(std::lround(shape.decisions * scale)));
      const int warmup = std::max(2, decisions / 10);
      progress(spec.label() + " at G=" + std::to_string(shape.G) + ", B=" + std::to_string(shape.B) + ", K=" + k +
               " (" + std::to_string(decisions) + " decisions)");
      StepShape step_shape;
      step_shape.G = shape.G;
      step_shape.B = shape.B;
      step_shape.seed = 1;
      const PolicyRun run = run_policy(spec, step_shape, warmup + decisions, dataset);
      const std::span<const double> timed(run.decision_us.data() + warmup, static_cast<std::size_t>(decisions));
      results.push_back(
          {spec.name, run.solver, shape.G, shape.B, shape.K, decisions, mean(timed), percentile(timed, 95)});
    }
  }
  return results;
}

}  // namespace ddpsim

namespace ddpsim {

std::vector<SimBenchResult> run_sim_bench(double scale, const std::function<void(const std::string&)>& progress) {
  struct Case {
    const char* name;
    int G, B, steps;
    const char* topology;
    const char* mode;
    const char* algorithm;
    double target_s;
  };
  static const Case cases[] = {
      {"study (4x RTX 3090, PCIe)", 4, 48, 800, "pcie", "fast", "ring", 1.0},
      {"study, every collective in SimGrid", 4, 48, 800, "pcie", "full", "ring", 0},
      {"64 GPUs (8 nodes x 8)", 64, 768, 800, "cluster", "full", "ring", 30.0},
      {"1024 GPUs (128 nodes x 8)", 1024, 16384, 200, "cluster", "fast", "hierarchical", 60.0},
  };
  std::vector<SimBenchResult> results;
  for (const Case& c : cases) {
    const int steps = std::max(2, static_cast<int>(std::lround(c.steps * scale)));
    nlohmann::json doc = default_config_json();
    doc["training"]["world_size"] = c.G;
    doc["training"]["global_batch"] = c.B;
    doc["training"]["steps"] = steps;
    doc["platform"] = {{"topology", c.topology}};
    doc["simulation"] = {{"mode", c.mode}, {"algorithm", c.algorithm}};
    if (c.G > 4) doc["model"] = "h100-distilbert";
    const Config config = parse_config(doc, std::string("bench case ") + c.name, "");
    progress(std::string(c.name) + ": " + std::to_string(config.policies.size()) + " policies x " +
             std::to_string(steps) + " steps, " + c.mode + " mode");
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int> dataset = config_dataset(config, *make_length_source(config.data, config.training.max_length));
    simulate_streamed(config, dataset, {0, 0}, {}, {});  // as `compare` runs it, summaries included
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rank_steps = double(config.policies.size()) * steps * c.G;
    results.push_back({c.name, c.mode, c.topology, c.algorithm, c.G, steps, static_cast<int>(config.policies.size()),
                       wall, rank_steps / wall, scale == 1.0 ? c.target_s : 0.0});
  }
  return results;
}

}  // namespace ddpsim
