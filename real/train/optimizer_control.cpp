#include "train/optimizer_control.hpp"

#include <cmath>

#include "common/stats.hpp"

namespace ddptrain {

std::string optimizer_control_text(
    const std::vector<std::pair<std::string, const std::vector<ddpsim::RankStep>*>>& runs) {
  std::vector<std::pair<std::string, double>> medians;
  for (const auto& [policy, rows] : runs) {
    std::vector<double> opt;
    for (const ddpsim::RankStep& r : *rows)
      if (r.rank == 0 && r.step >= 1 && std::isfinite(r.opt_ms)) opt.push_back(r.opt_ms);
    if (!opt.empty()) medians.emplace_back(policy, ddpsim::percentile(opt, 50));
  }
  return ddpsim::optimizer_levels_text(medians, /*interleaved=*/true);
}

}  // namespace ddptrain
