// The order in which one pipeline stage runs its micro-batches' forward and backward passes.
// GPipe ("F-then-B") runs every forward, then every backward; 1F1B (PipeDream-flush, as in
// Megatron-LM) runs S − stage − 1 warm-up forwards, then alternates one forward and one
// backward, then drains the remaining backwards, so a stage holds at most S − stage
// micro-batches' activations instead of M.
#pragma once

#include <string>
#include <vector>

namespace ddpsim::pipeline {

struct Op {
  bool forward = true;
  int micro = 0;
  bool operator==(const Op&) const = default;
};

const std::vector<std::string>& schedule_names();  // gpipe, 1f1b

// Stage `stage` (0-based) of `stages`, `micro_batches` micro-batches. Throws InputError for an
// unknown schedule.
std::vector<Op> stage_ops(const std::string& schedule, int stages, int stage, int micro_batches);

// The most micro-batches whose activations the op sequence holds at once (forward done,
// backward not yet).
int max_in_flight(const std::vector<Op>& ops);

}  // namespace ddpsim::pipeline
