// Policies trained in turn in one process: the optimizer does the same work in every policy's
// model, so its medians far apart say the machine ran each model at a level of its own, and a
// gain between the runs carries it. ddptrain says so where the runs are made; ddpsim calibrate
// --training (over every rank's rows) and validate (from the steady state) read the same
// control from the traces.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/policy_run.hpp"

namespace ddptrain {

// ddpsim::optimizer_levels_text for ddptrain's policies, which it trains in turn: their medians
// from rank 0's rows (which time the process's own optimizer) after step 0 (which pays the first
// step's warm-up); "" with fewer than two timed runs.
std::string optimizer_control_text(
    const std::vector<std::pair<std::string, const std::vector<ddpsim::RankStep>*>>& runs);

}  // namespace ddptrain
