// A pipeline job's predicted gains and mean steps with their 95% prediction intervals: the terms
// DDP's carry (eval/uncertainty.hpp, eval/step_interval.hpp), with the model's variants simulated
// through the pipeline engine. A pipeline's step is no one rank-step, so its gains are not placed
// in a regime: they carry the wider, launch-bound session spread.
#pragma once

#include <vector>

#include "eval/config.hpp"
#include "eval/pipeline_eval.hpp"
#include "eval/step_interval.hpp"
#include "eval/uncertainty.hpp"

namespace ddpsim {

// Each column's gain over the first in mean step time, in %.
std::vector<double> pipeline_gains(const std::vector<PipelineFigures>& columns);

struct PipelinePredictions {
  std::vector<GainPrediction> gains;  // none for the first policy
  std::vector<StepPrediction> steps;  // each policy's mean step
};

// Each policy's predictions from `gains[p]` and mean steps `means[p]` over the seeds, the first at
// the config's seed, whose columns are `first` (`quiet`: that seed with the compute noise off;
// null: none drawn). The model's variants are simulated once for both.
PipelinePredictions pipeline_predictions(const Config& config, const std::vector<PipelineFigures>& first,
                                         const std::vector<PipelineFigures>* quiet,
                                         const std::vector<std::vector<double>>& gains,
                                         const std::vector<std::vector<double>>& means);

}  // namespace ddpsim
