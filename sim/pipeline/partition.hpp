// Which layers each pipeline stage holds: contiguous ranges, chosen to balance time, memory, or
// both (Galvatron-BMW's bi-objective method). SimGrid-free, like sched/.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace ddpsim::pipeline {

struct LayerCost {
  double time = 0;              // forward + backward of one micro-batch
  double state_bytes = 0;       // parameters, gradients and optimizer state kept on the stage
  double activation_bytes = 0;  // one micro-batch's activations, held until its backward
};

struct PartitionProblem {
  std::vector<LayerCost> layers;  // in model order
  std::vector<int> in_flight;     // per stage: micro-batches whose activations it holds at once
  double capacity_bytes = std::numeric_limits<double>::infinity();  // each device
  int stages() const { return static_cast<int>(in_flight.size()); }
};

// first[s]: the first layer of stage s; stage s holds layers [first[s], first[s + 1]).
using Partition = std::vector<int>;

// One past stage `stage`'s last layer, of `layers` in all; and the layer count of each stage.
int stage_end(const Partition& first, int stage, int layers);
std::vector<int> layers_per_stage(const Partition& first, int layers);

double stage_time(const PartitionProblem& p, const Partition& first, int stage);
double stage_memory(const PartitionProblem& p, const Partition& first, int stage);
double max_stage_time(const PartitionProblem& p, const Partition& first);
double max_stage_memory(const PartitionProblem& p, const Partition& first);

const std::vector<std::string>& partition_names();  // uniform, time, memory, balanced

// uniform: equal layer counts (the earlier stages one more). time / memory: the partition
// whose slowest / fullest stage is least (exact, by dynamic programming). balanced: from the
// memory-balanced partition, moves a boundary layer off the slowest stage to a neighbour while
// the stage times, slowest first, decrease, the fullest stage stays within the time-balanced
// partition's and every stage fits the device. Throws InputError for an unknown name, fewer
// layers than stages, or (every name) a partition that does not fit the device.
Partition make_partition(const std::string& name, const PartitionProblem& problem);

}  // namespace ddpsim::pipeline
