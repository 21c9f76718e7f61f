// Policies trained in turn in one process: the optimizer does the same work in every policy's
// model, so its medians far apart say the machine ran each model at a level of its own, and a
// gain between the runs carries it. ddptrain says so where the runs are made; ddpsim calibrate
// --training and validate read the same from the traces.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/policy_run.hpp"

namespace ddptrain {

// Past this, apart (as ddpsim's calibrate and validate judge it): on a 2-core Intel VM 15–42%,
// on an AMD VM under 3%.
inline constexpr double kOwnLevelApart = 0.10;

// One line of each policy's optimizer median (rank 0's rows after step 0) and how far apart they
// lie, and a second, a warning, past kOwnLevelApart; "" with fewer than two timed runs.
std::string optimizer_control_text(
    const std::vector<std::pair<std::string, const std::vector<ddpsim::RankStep>*>>& runs);

}  // namespace ddptrain
