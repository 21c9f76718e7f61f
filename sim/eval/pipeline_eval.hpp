// A config's `parallel` job, simulated and summed up: step times, the share of time the GPUs
// compute (the rest is pipeline bubble and waiting), each flow class's traffic, each stage's
// memory. Abstract mode runs the given unit times; model mode takes stage times from the
// performance model for the micro-batches each policy forms from the length stream.
#pragma once

#include <array>
#include <string>
#include <utility>
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
  std::vector<double> step_times, bubbles;        // each step's
  struct Flow {
    double volume = 0;  // MB (units) moved, all GPUs
    long transfers = 0;
    double mean_time = 0;    // ms (units), start to arrival
    double throughput = 0;   // GB/s (units per unit), all GPUs
    double utilisation = 0;  // throughput / (GPUs × one link's): the share of the class's links it kept busy
  };
  std::array<Flow, pipeline::FLOW_CLASSES> flows{};
  std::vector<int> max_in_flight;     // per stage
  std::vector<double> stage_mem_mib;  // model mode, per stage: state + the activations held at most
  pipeline::Recording recording;      // the steps a timeline shows
};

// The layers each stage holds in model mode (first layer per stage), from the config's partition.
pipeline::Partition stage_partition(const Config& config);

// Simulates config.training.steps steps: one column in abstract mode, one per policy in model
// mode; `record` = the [from, to) steps whose spans and link samples each column keeps.
std::vector<PipelineFigures> simulate_parallel(const Config& config, std::pair<int, int> record = {0, 0});
// The table `ddpsim run` prints, and summary.json's content: {config, units, steps,
// stage_layers, policies: {column: flat metrics}}, the shape a sweep cell has.
std::string pipeline_table(const Config& config, const std::vector<PipelineFigures>& columns);
nlohmann::ordered_json pipeline_summary(const Config& config, const std::vector<PipelineFigures>& columns);

// Each column's steps: policy, step, step time (ms, or units), bubble; DIR/pipeline_steps.csv.
std::string pipeline_steps_csv(const Config& config, const std::vector<PipelineFigures>& columns);
// The recorded steps as a Chrome trace (Perfetto): a process per column and GPU, with lanes
// compute, fwd_prop, bwd_prop and grad_sync. Abstract time units show as milliseconds.
std::string pipeline_timeline(const Config& config, const std::vector<PipelineFigures>& columns);
// Per column and bin of `bin` ms (units), each class's link utilisation over the recorded steps:
// bytes moved / (bin × GPUs × one GPU link's rate). bin <= 0: a 200th of the recorded time.
std::string link_series_csv(const Config& config, const std::vector<PipelineFigures>& columns, double bin);

}  // namespace ddpsim
