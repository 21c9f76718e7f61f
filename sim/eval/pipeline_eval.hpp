// A config's `parallel` job, simulated and summed up: step times, the share of time the GPUs
// compute (the rest is pipeline bubble and waiting), each flow class's traffic, each stage's
// memory. Abstract mode runs the given unit times; model mode takes stage times from the
// performance model for the micro-batches each policy forms from the length stream.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/config.hpp"
#include "pipeline/partition.hpp"
#include "pipeline/pipeline_sim.hpp"

namespace ddpsim {

struct PipelineFigures {
  std::string label;                              // the policy, or "abstract"
  double step_mean = 0, step_p95 = 0, total = 0;  // ms, or time units (abstract mode)
  double compute_share = 0;                       // Σ compute / (GPUs × total)
  double bubble_mean = 0, bubble_p95 = 0;         // per step: 1 − Σ compute / (GPUs × step time)
  struct Flow {
    double volume = 0;  // MB (units) moved, all GPUs
    long transfers = 0;
    double mean_time = 0;   // ms (units), start to arrival
    double throughput = 0;  // GB/s (units per unit), all GPUs
  };
  std::array<Flow, pipeline::FLOW_CLASSES> flows{};
  std::vector<int> max_in_flight;     // per stage
  std::vector<double> stage_mem_mib;  // model mode, per stage: state + the activations held at most
};

// The layers each stage holds in model mode (first layer per stage), from the config's partition.
pipeline::Partition stage_partition(const Config& config);

// Simulates config.training.steps steps: one column in abstract mode, one per policy in model mode.
std::vector<PipelineFigures> simulate_parallel(const Config& config);
// The table `ddpsim run` prints, and summary.json's content.
std::string pipeline_table(const Config& config, const std::vector<PipelineFigures>& columns);
nlohmann::json pipeline_summary(const Config& config, const std::vector<PipelineFigures>& columns);

}  // namespace ddpsim
