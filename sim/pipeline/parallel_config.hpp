// The config's `parallel` section: a pipeline-parallel job and, for method studies, its work
// given directly in time units (the "abstract" mode).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/pipeline_sim.hpp"

namespace ddpsim::pipeline {

// Per-micro-batch stage times and transfer times in time units; a link moves one unit of
// transfer per unit of time, so a transfer's figure is its time alone on its link.
struct AbstractWork {
  double forward = 1, backward = 2, transfer = 1, sync = 2, gather = 0, optimizer = 0;
};

struct ParallelConfig {
  PipelineSetup setup;
  // Without `abstract`, the work comes from the performance model, the data and the policies.
  bool abstract_mode = false;
  AbstractWork abstract;
  // Model mode: which layers each stage holds (a partition name, or layer counts per stage),
  // and the bytes a stage sends on per token of a micro-batch (activations forward, their
  // gradients back): hidden size × element size.
  std::string partition = "uniform";
  std::vector<int> stage_layers;
  int activation_bytes_per_token = 768 * 4;
  std::string micro_batching = "even";  // how a group's samples form micro-batches (StepShape)
  nlohmann::json to_json() const;
};

// Reads the section; `world_size` must be stages × groups. Errors name `where` and the key.
ParallelConfig parse_parallel(const nlohmann::json& doc, const std::string& where, int world_size);

// Every GPU's work in one abstract step, in seconds and bytes (one unit = 1 s = 1e9 bytes).
StepWork abstract_step(const PipelineSetup& setup, const AbstractWork& work);
constexpr double ABSTRACT_BYTES_PER_UNIT = 1e9;
// The largest pipeline jobs full mode simulates: SimGrid's routing table grows with the square
// of the endpoints, three a GPU in one zone. Fast mode takes training.world_size's whole range.
constexpr int MAX_PIPELINE_GPUS = 4096;
constexpr long MAX_PIPELINE_PASSES = 1L << 18;  // GPUs × micro-batches

}  // namespace ddpsim::pipeline
