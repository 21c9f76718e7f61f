// A pipeline job's fast mode (simulation.mode "fast"): the passes and the transfers between
// stages without SimGrid, the stages' syncs on it. Full mode simulates a flow, a semaphore and
// an actor's switch per micro-batch and GPU; at thousands of GPUs that is a second a step.
#pragma once

#include <string>
#include <vector>

#include "pipeline/pipeline_sim.hpp"

namespace ddpsim::pipeline {

// Why fast mode would not give full mode's steps for this job (a sentence naming the key), or
// empty where it does: every transfer's route must be its sender's alone.
std::string fast_mode_obstacle(const PipelineSetup& s);

// Whether the syncs' endpoints go in a SimGrid zone per leaf switch (the platform has leaf links):
// above MAX_PIPELINE_GPUS fast mode needs it, one flat zone's route table growing with the square.
bool syncs_zoned(const PipelineSetup& s);

// The steps as simulate_pipeline's full mode gives them (to SimGrid's rounding), without a
// recording. The setup must have no fast_mode_obstacle.
PipelineResult simulate_fast(const PipelineSetup& s, const std::vector<StepWork>& steps);

}  // namespace ddpsim::pipeline
