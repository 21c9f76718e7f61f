// `ddpsim scorecard`: every prediction this project compared with a real run, in one table —
// how often a measured gain fell inside its predicted interval, how wide the intervals were,
// and how far the gains missed, by campaign and compute regime; then each run's mean step against
// its interval — read from the validation.json files that `ddpsim validate` wrote and the
// predictions `compare --register` wrote.
#pragma once

#include <string>
#include <vector>

namespace ddpsim {

// Markdown: the gains table by campaign (a validation.json's folder above its policy's, relative
// to the root it was found under) and regime, the step times by campaign, the registered
// predictions scored, and those still awaiting their run. Files are read in path order, so the same files give the same
// bytes.
std::string scorecard(const std::vector<std::string>& roots);

}  // namespace ddpsim
