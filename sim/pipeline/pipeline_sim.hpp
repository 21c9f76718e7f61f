// Pipeline-parallel training steps on SimGrid: S stages inside each of D data-parallel
// groups (GPU g = group·S + stage). Each GPU runs its stage's forward and backward passes in
// the schedule's order (schedule.hpp); a forward waits for the previous stage's activations,
// a backward for the next stage's activation gradients, and both send theirs on as SimGrid
// flows (network.hpp). Every `sync_every` backward passes, a stage's D peers sync gradients
// in a collective on their grad_sync flows, one sync at a time per GPU, started once every
// peer has joined (as DDP's); compute goes on beside it at 1/(1 + impact) of its speed. The
// step ends when every sync is done, the optimizer has run and (ZeRO-2) the updated parameter
// shards are all-gathered; steps start together.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "pipeline/network.hpp"

namespace ddpsim::pipeline {

struct PipelineSetup {
  int stages = 4, groups = 1;
  std::string schedule = "1f1b";  // gpipe | 1f1b
  int micro_batches = 8;
  // ddp: a sync is an allreduce; zero2: a reduce-scatter, and the parameters are all-gathered
  // after the optimizer. Each over a stage's D peers, by `algorithm` (engine/collective.hpp):
  // ring, or hierarchical (rings inside nodes and across them).
  std::string data_parallel = "zero2";
  std::string algorithm = "ring";
  // Where the syncs' links carry nothing else (separate channels) and no two stages' syncs share
  // a link, simulate one group of each kind of alike flows (CollectiveRunner's reduction).
  bool reduce_flows = true;
  // full: every flow on SimGrid; fast: the transfers between stages timed without it, where
  // that is exact (fast_pipeline.hpp).
  std::string mode = "full";
  int sync_every = 0;  // backward passes between syncs; 0: one sync after the last
  ChannelConfig channels;
  double fwd_impact = 0, bwd_impact = 0;  // compute slowdown while a sync runs on the GPU

  int gpus() const { return stages * groups; }
  int syncs_per_step() const;
};

// One GPU's work in one step: seconds and bytes.
struct GpuWork {
  std::vector<double> fwd_s, bwd_s;  // per micro-batch
  std::vector<double> act_bytes;     // per micro-batch: activations sent on (and their gradients back)
  double sync_bytes = 0;             // a sync's size: the stage's gradient bytes it reduces
  double gather_bytes = 0;           // zero2: the stage's parameter bytes all-gathered after the optimizer
  double opt_s = 0;
};

using StepWork = std::vector<GpuWork>;  // by GPU

struct GpuStep {
  double busy_s = 0;  // computing, slowdowns included
  double end_s = 0;   // from the step's start
};

struct StepResult {
  double step_s = 0;
  std::vector<GpuStep> gpus;
};

// Steps [from, to) as a timeline shows them, times from the start of step `from`: every
// compute pass (lane 0) and transfer (lane 1 + its class) on its GPU, and the network's
// link-utilisation samples.
struct Recording {
  struct Span {
    int step = 0, gpu = 0, lane = 0;
    std::string name;  // forward, backward, optimizer; a transfer: its micro-batch, sync or gather
    int micro = -1;    // the micro-batch, or -1
    int peer = -1;     // a transfer's destination GPU
    double start_s = 0, dur_s = 0;
  };
  int from = 0, to = 0;
  std::vector<Span> spans;
  std::vector<Network::Sample> samples;
};

struct PipelineResult {
  std::vector<StepResult> steps;
  Recording recording;
  std::array<FlowStats, FLOW_CLASSES> flows{};
  double total_s = 0;
  std::vector<int> max_in_flight;  // per stage: micro-batches whose activations it holds at once
  // Flows of one run of every stage's collectives: in their plans, and those simulated (fewer
  // where alike groups are reduced to one).
  std::size_t sync_flows_planned = 0, sync_flows_simulated = 0;
};

// Checks the setup's shape; throws InputError naming `where` and the key.
void check_setup(const PipelineSetup& setup, const std::string& where);

// `record` = the [from, to) steps the result's recording covers (empty: none).
PipelineResult simulate_pipeline(const PipelineSetup& setup, const std::vector<StepWork>& steps,
                                 std::pair<int, int> record = {0, 0});

}  // namespace ddpsim::pipeline
