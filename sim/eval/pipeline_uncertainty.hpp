// A pipeline job's predicted gains with their 95% prediction intervals: the terms DDP's gains
// carry (eval/uncertainty.hpp), with the model's variants simulated through the pipeline engine.
// A pipeline's step is no one rank-step, so its gains are not placed in a regime: they carry the
// wider, launch-bound session spread.
#pragma once

#include <vector>

#include "eval/config.hpp"
#include "eval/pipeline_eval.hpp"
#include "eval/uncertainty.hpp"

namespace ddpsim {

// Each column's gain over the first in mean step time, in %.
std::vector<double> pipeline_gains(const std::vector<PipelineFigures>& columns);

// Each policy's gain prediction (none for the first): `gains[p]` over the seeds, the first at the
// config's seed, whose columns are `first` (`quiet`: that seed with the compute noise off; null:
// none drawn).
std::vector<GainPrediction> pipeline_gain_predictions(const Config& config, const std::vector<PipelineFigures>& first,
                                                      const std::vector<PipelineFigures>* quiet,
                                                      const std::vector<std::vector<double>>& gains);

}  // namespace ddpsim
