// A config's `parallel` job, simulated and summed up: step times, the share of time the GPUs
// compute (the rest is pipeline bubble and waiting), each flow class's traffic.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "eval/config.hpp"
#include "pipeline/pipeline_sim.hpp"

namespace ddpsim {

struct PipelineFigures {
  double step_mean = 0, step_p95 = 0, total = 0;  // time units (abstract mode)
  double compute_share = 0;                       // Σ compute / (GPUs × total)
  struct Flow {
    double volume = 0;  // units moved, all GPUs
    long transfers = 0;
    double mean_time = 0;   // start to arrival, per transfer
    double throughput = 0;  // units per unit of time, all GPUs
  };
  std::array<Flow, pipeline::FLOW_CLASSES> flows{};
  std::vector<int> max_in_flight;  // per stage
};

// Simulates config.training.steps steps of the config's parallel job (which must be set).
pipeline::PipelineResult simulate_parallel(const Config& config);
PipelineFigures pipeline_figures(const Config& config, const pipeline::PipelineResult& result);
// The table `ddpsim run` prints, and summary.json's content.
std::string pipeline_table(const Config& config, const PipelineFigures& figures);
nlohmann::json pipeline_summary(const Config& config, const PipelineFigures& figures);

}  // namespace ddpsim
