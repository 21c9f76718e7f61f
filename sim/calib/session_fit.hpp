// How far two sessions of one machine disagree, from profiles taken in each: the session term of
// a prediction interval (eval/uncertainty.hpp) fitted instead of taken from this project's
// campaigns. Each trace given to calibrate counts as a session of its own.
#pragma once

#include <string>
#include <vector>

#include "calib/trace_reader.hpp"

namespace ddpsim {

// Shapes a regime needs in two traces before its spread is read from them.
inline constexpr int kMinSessionShapes = 4;
// The H100 campaigns' relation the fitted spread is scaled by: the per-shape medians of the
// second and third campaigns' fp32 profiles differ by a mean |log ratio| of 0.125 below 2,048
// padded tokens (32 shapes) and 0.005 from it (24), while the gains moved ±2.2 pp and ±0.5 pp.
inline constexpr double kCampaignShapeSpreadBelow = 0.125, kCampaignShapeSpreadAbove = 0.005;

struct SessionFit {
  int shapes_below = 0, shapes_above = 0;     // shape medians compared, over the pairs of traces
  double spread_below = 0, spread_above = 0;  // mean |log ratio| of a shape's medians
  double below_pp = -1, above_pp = -1;        // < 0: not fitted (too few shared shapes)
  std::string source;                         // for the model's session.source
  bool fitted() const { return below_pp >= 0 || above_pp >= 0; }
};

// Compares each trace's per-shape median compute (forward + backward, padded shapes) with the
// first trace's, below and from `knee_tokens` padded tokens (0: one regime); a regime with too few
// shared shapes takes the campaign figure, and says so.
SessionFit fit_session(const std::vector<Trace>& traces, long long knee_tokens);

}  // namespace ddpsim
