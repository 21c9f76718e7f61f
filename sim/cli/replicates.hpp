// `ddpsim run/compare --replicates R`: the config again under R seeds (sample streams and noise
// draws), so that a predicted figure or gain comes with the spread that R real runs of the same
// length would show, instead of one seed's draw.
#pragma once

#include <functional>
#include <span>
#include <string>

#include "data/lengths.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"

namespace ddpsim::cli {

// Each policy's gain over the first at the config's seed, beside the same gain with the compute
// noise off (eval/simulate.hpp, without_compute_noise): how much of a predicted gain the noise
// model makes. "" where the config draws no noise or simulates one policy.
std::string noise_off_report(const Config& config, std::span<const int> dataset, const SimulationRun& noisy);

// `first` is the run already simulated at the config's seed; seeds seed+1 ... seed+R-1 follow.
// The table gives each policy's mean max step time, P95 and gain over the first policy, as the
// mean over the seeds with the 2.5-97.5% range, and where the config draws compute noise, each
// gain with the noise off over the same seeds.
std::string replicates_report(const Config& config, const LengthSource& source, const SimulationRun& first,
                              int replicates, const std::function<void(long, long)>& progress);

}  // namespace ddpsim::cli
