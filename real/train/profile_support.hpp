// What profile.cpp and profile_comm.cpp share: settling a timing, and a grid point's row.
#pragma once

#include <functional>

#include "report/policy_run.hpp"

namespace ddptrain {

// Runs `once` (which returns its time in ms) until the timing settles: the median of the last
// three runs within 5% of the median of the three before, at least 6 runs and at most `cap`.
// A fixed count when `fixed` ≥ 0. With several ranks, `all` turns this rank's verdict into
// every rank's (true only when all have settled), so that all run as many collectives.
// Returns the number of runs.
int warm_up(
    const std::function<double()>& once, int fixed, int cap,
    const std::function<bool(bool)>& all = [](bool settled) { return settled; });

// A profile row's shape: b samples of exactly L tokens, a whole step's batch.
ddpsim::RankStep shape_row(int b, int L);

}  // namespace ddptrain
