#include "eval/bench.hpp"

#include <algorithm>
#include <cmath>

#include "common/stats.hpp"
#include "data/lengths.hpp"
#include "eval/balance.hpp"

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
