#include "train/optimizer_control.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/stats.hpp"

namespace ddptrain {

std::string optimizer_control_text(
    const std::vector<std::pair<std::string, const std::vector<ddpsim::RankStep>*>>& runs) {
  std::string each;
  std::vector<double> medians;
  char text[64];
  for (const auto& [policy, rows] : runs) {
    std::vector<double> opt;
    for (const ddpsim::RankStep& r : *rows)
      if (r.rank == 0 && r.step >= 1 && std::isfinite(r.opt_ms)) opt.push_back(r.opt_ms);
    if (opt.empty()) continue;
    medians.push_back(ddpsim::percentile(opt, 50));
    std::snprintf(text, sizeof text, " %.1f", medians.back());
    each += (each.empty() ? "" : ", ") + policy + text;
  }
  const double apart = ddpsim::levels_apart(medians);
  if (apart < 0) return "";
  std::snprintf(text, sizeof text, " ms (%.1f%% apart)\n", 100 * apart);
  std::string out = "optimizer, the same work in every policy's model, median after step 0: " + each + text;
  if (apart > ddpsim::kOwnLevelApart)
    out +=
        "warning: this machine ran each policy's model at a level of its own; a gain between these runs carries it "
        "(ddpsim calibrate --training and validate say so too)\n";
  return out;
}

}  // namespace ddptrain
