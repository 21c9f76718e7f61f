#include "calib/session_fit.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>

#include "common/stats.hpp"
#include "eval/uncertainty.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {

using Shape = std::pair<int, int>;

// A trace's median forward + backward per padded (b, L) shape of one micro-batch.
std::map<Shape, double> shape_medians(const Trace& t) {
  std::map<Shape, std::vector<double>> times;
  for (const auto& run : t.runs) {
    if (run.packed) continue;
    for (const RankStep& r : run.rows)
      if (std::isfinite(r.fwd_ms) && std::isfinite(r.bwd_ms) && r.batch_size > 0 && r.micro.empty() &&
          r.fwd_ms + r.bwd_ms > 0)
        times[{r.batch_size, r.max_len}].push_back(r.fwd_ms + r.bwd_ms);
  }
  std::map<Shape, double> medians;
  for (auto& [shape, ms] : times) medians[shape] = percentile(ms, 50);
  return medians;
}

}  // namespace

SessionFit fit_session(const std::vector<Trace>& traces, long long knee_tokens) {
  SessionFit s;
  if (traces.size() < 2) return s;
  const std::map<Shape, double> first = shape_medians(traces.front());
  std::vector<double> below, above;
  for (std::size_t k = 1; k < traces.size(); ++k)
    for (const auto& [shape, ms] : shape_medians(traces[k]))
      if (const auto it = first.find(shape); it != first.end()) {
        const long long tokens = static_cast<long long>(shape.first) * shape.second;
        (knee_tokens > 0 && tokens >= knee_tokens ? above : below).push_back(std::abs(std::log(ms / it->second)));
      }
  s.shapes_below = static_cast<int>(below.size());
  s.shapes_above = static_cast<int>(above.size());
  if (s.shapes_below < kMinSessionShapes && s.shapes_above < kMinSessionShapes) return s;
  const auto scaled = [](const std::vector<double>& spreads, double campaign_spread, double campaign_pp, double& spread,
                         double& pp) {
    if (static_cast<int>(spreads.size()) < kMinSessionShapes) {
      pp = campaign_pp;
      return false;
    }
    spread = mean(spreads);
    pp = campaign_pp * spread / campaign_spread;
    return true;
  };
  const bool own_below = scaled(below, kCampaignShapeSpreadBelow, kCampaignSessionBelowPp, s.spread_below, s.below_pp);
  const bool own_above = scaled(above, kCampaignShapeSpreadAbove, kCampaignSessionAbovePp, s.spread_above, s.above_pp);
  char text[640];
  std::snprintf(text, sizeof text,
                "fitted by ddpsim calibrate from %zu profiles taken as sessions of their own: per-shape medians "
                "differ by a mean %.1f%% %s(%d shapes)%s; scaled by the H100 campaigns' relation (12.5%% to "
                "±2.2 pp, 0.5%% to ±0.5 pp)%s",
                traces.size(), 100 * (own_below ? s.spread_below : s.spread_above),
                knee_tokens > 0 ? (own_below ? "below the knee " : "from the knee ") : "",
                own_below ? s.shapes_below : s.shapes_above,
                own_below && own_above ? (", " + format("%.1f%%", 100 * s.spread_above) + " from it (" +
                                          std::to_string(s.shapes_above) + " shapes)")
                                             .c_str()
                                       : "",
                knee_tokens > 0 && !(own_below && own_above) ? "; the other regime takes the campaigns' figure" : "");
  s.source = text;
  return s;
}

}  // namespace ddpsim
