#include "calib/step_levels.hpp"

#include <algorithm>
#include <cmath>

#include "common/stats.hpp"
#include "model/perf_model.hpp"

namespace ddpsim {

namespace {

// Offsets and levels in turn until no run's offset moves by more than 1e-5 in log (at most 200
// rounds): where runs share few shapes, each round closes only part of the way.
constexpr int kMaxLevelRounds = 200;
constexpr double kLevelConverged = 1e-5;

// [from, to) of each bin over rank-steps sorted by tokens; bins never split a token count.
std::vector<std::pair<std::size_t, std::size_t>> token_bins(const std::vector<SteadyStep>& steady, std::size_t size) {
  std::vector<std::pair<std::size_t, std::size_t>> bins;
  std::size_t from = 0;
  for (std::size_t i = 1; i <= steady.size(); ++i)
    if (i - from >= size && (i == steady.size() || steady[i].tokens > steady[i - 1].tokens))
      bins.emplace_back(from, i), from = i;
  if (!bins.empty()) bins.back().second = steady.size();  // a short last bin joins the one before
  return bins;
}

// Each bin's median factor, each run's offset taken out, at the bin's median tokens.
std::vector<std::pair<double, double>> bin_levels(const std::vector<SteadyStep>& steady,
                                                  const std::vector<std::pair<std::size_t, std::size_t>>& bins,
                                                  const std::vector<double>& offset) {
  std::vector<std::pair<double, double>> levels;
  for (const auto& [a, b] : bins) {
    std::vector<double> tokens, ratios;
    for (std::size_t i = a; i < b; ++i)
      tokens.push_back(double(steady[i].tokens)), ratios.push_back(steady[i].ratio / std::exp(offset[steady[i].run]));
    levels.emplace_back(percentile(tokens, 50), std::max(1e-3, percentile(ratios, 50)));
  }
  return levels;
}

// Each run's offset (log) about the levels: its median, the offsets weighted by rank-steps
// summing to 0 so that the levels keep the runs' pooled level.
std::vector<double> run_offsets(const std::vector<SteadyStep>& steady, const std::vector<std::pair<double, double>>& levels,
                                std::size_t runs) {
  std::vector<std::vector<double>> logs(runs);
  for (const SteadyStep& s : steady) logs[s.run].push_back(std::log(s.ratio / level_at(levels, s.tokens)));
  std::vector<double> offset(runs, 0.0);
  double sum = 0, count = 0;
  for (std::size_t r = 0; r < runs; ++r)
    if (!logs[r].empty()) {
      offset[r] = percentile(logs[r], 50);
      sum += offset[r] * double(logs[r].size()), count += double(logs[r].size());
    }
  for (std::size_t r = 0; r < runs; ++r)
    if (!logs[r].empty()) offset[r] -= sum / count;
  return offset;
}

}  // namespace

std::vector<std::pair<double, double>> fit_step_levels(std::vector<SteadyStep> steady, std::size_t runs,
                                                       std::size_t& size) {
  std::erase_if(steady, [](const SteadyStep& s) { return !(s.ratio > 0 && std::isfinite(s.ratio)) || s.tokens < 1; });
  std::stable_sort(steady.begin(), steady.end(),
                   [](const SteadyStep& a, const SteadyStep& b) { return a.tokens < b.tokens; });
  size = std::max(kLevelBinSteps, steady.size() / kMaxLevelBins);
  const auto bins = token_bins(steady, size);
  if (bins.size() < 2) return {};
  std::vector<double> offset(runs, 0.0);
  std::vector<std::pair<double, double>> levels;
  for (int round = 0; round < kMaxLevelRounds; ++round) {
    levels = bin_levels(steady, bins, offset);
    std::vector<double> next = run_offsets(steady, levels, runs);
    double moved = 0;
    for (std::size_t r = 0; r < runs; ++r) moved = std::max(moved, std::abs(next[r] - offset[r]));
    offset = std::move(next);
    if (moved < kLevelConverged) break;
  }
  for (auto& level : levels) level.second = std::round(level.second * 1e4) / 1e4;  // a readable model file
  return levels;
}

std::pair<RegimeSpread, RegimeSpread> regime_spreads(const std::vector<SteadyStep>& steady,
                                                     const std::vector<std::pair<double, double>>& levels) {
  std::vector<double> about[2];
  for (const SteadyStep& s : steady)
    if (s.ratio > 0) about[s.above].push_back(s.ratio / level_at(levels, s.tokens));
  RegimeSpread side[2];
  for (int k = 0; k < 2; ++k) {
    side[k].rank_steps = static_cast<long>(about[k].size());
    if (side[k].rank_steps < kMinRegimeSteps) continue;
    side[k].p50 = percentile(about[k], 50);
    side[k].sigma = (std::log(percentile(about[k], 95)) - std::log(side[k].p50)) / 1.6449;
  }
  return {side[0], side[1]};
}

}  // namespace ddpsim
