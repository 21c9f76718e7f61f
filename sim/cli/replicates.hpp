// `ddpsim run/compare --replicates R`: the config again under R seeds (sample streams and noise
// draws), so that a predicted figure or gain comes with the spread that R real runs of the same
// length would show, instead of one seed's draw.
#pragma once

#include <functional>
#include <string>

#include "data/lengths.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"

namespace ddpsim::cli {

// `first` is the run already simulated at the config's seed; seeds seed+1 ... seed+R-1 follow.
// The table gives each policy's mean max step time, P95 and gain over the first policy, as the
// mean over the seeds with the 2.5-97.5% range.
std::string replicates_report(const Config& config, const LengthSource& source, const SimulationRun& first,
                              int replicates, const std::function<void(long, long)>& progress);

}  // namespace ddpsim::cli
