#include "calib/step_levels.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/stats.hpp"
#include "model/perf_model.hpp"

namespace ddpsim {

namespace {

// Offsets and levels in turn until no run's offset moves by more than 1e-5 in log (at most 200
// rounds; unsettled, the runs' offsets are left at 0): where runs share few shapes, each round
// closes only part of the way.
constexpr int kMaxLevelRounds = 200;
constexpr double kLevelConverged = 1e-5;
// A run is compared with another in a bin where each holds at least 10 of its rank-steps and a
// fifth of them.
constexpr std::size_t kSharedSteps = 10;
constexpr double kSharedShare = 0.2;

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

// Which runs a bin compares: those holding at least kSharedSteps of its rank-steps and a
// kSharedShare of them, where two or more do (none otherwise). A run seen only at the edge of
// another's shapes is not told apart from them there.
std::vector<std::vector<bool>> shared_bins(const std::vector<SteadyStep>& steady,
                                           const std::vector<std::pair<std::size_t, std::size_t>>& bins,
                                           std::size_t runs) {
  std::vector<std::vector<bool>> shared(bins.size(), std::vector<bool>(runs, false));
  for (std::size_t k = 0; k < bins.size(); ++k) {
    std::vector<std::size_t> held(runs, 0);
    for (std::size_t i = bins[k].first; i < bins[k].second; ++i) ++held[steady[i].run];
    const double size = double(bins[k].second - bins[k].first);
    std::size_t sharing = 0;
    for (std::size_t r = 0; r < runs; ++r)
      if (held[r] >= kSharedSteps && double(held[r]) >= kSharedShare * size) shared[k][r] = true, ++sharing;
    if (sharing < 2) std::fill(shared[k].begin(), shared[k].end(), false);
  }
  return shared;
}

// Each run's offset (log): the median of its rank-steps over the levels at their tokens, in the
// bins it shares with another run only (shared_bins), the offsets weighted by rank-steps summing
// to 0 so that the levels keep the runs' pooled level. A run that shares no bin keeps offset 0:
// nothing tells its level from its shapes' (taken everywhere, the levels between bins would tie
// such runs together and let their offsets drift apart).
std::vector<double> run_offsets(const std::vector<SteadyStep>& steady,
                                const std::vector<std::pair<std::size_t, std::size_t>>& bins,
                                const std::vector<std::vector<bool>>& shared,
                                const std::vector<std::pair<double, double>>& levels, std::size_t runs) {
  std::vector<std::vector<double>> logs(runs);
  for (std::size_t k = 0; k < bins.size(); ++k)
    for (std::size_t i = bins[k].first; i < bins[k].second; ++i)
      if (shared[k][steady[i].run])
        logs[steady[i].run].push_back(std::log(steady[i].ratio / level_at(levels, steady[i].tokens)));
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
  const auto shared = shared_bins(steady, bins, runs);
  std::vector<double> offset(runs, 0.0);
  std::vector<std::pair<double, double>> levels;
  bool settled = false;
  for (int round = 0; round < kMaxLevelRounds && !settled; ++round) {
    levels = bin_levels(steady, bins, offset);
    std::vector<double> next = run_offsets(steady, bins, shared, levels, runs);
    double moved = 0;
    for (std::size_t r = 0; r < runs; ++r) moved = std::max(moved, std::abs(next[r] - offset[r]));
    offset = std::move(next);
    settled = moved < kLevelConverged;
  }
  if (!settled) levels = bin_levels(steady, bins, std::vector<double>(runs, 0.0));
  for (auto& level : levels) level.second = std::round(level.second * 1e4) / 1e4;  // a readable model file
  return levels;
}

namespace {

// The batch size a run trained: the samples of 80% of its steady rank-steps or more, else 0
// (a policy that sizes its own micro-batches trains no one size).
std::map<std::size_t, int> run_sizes(const std::vector<SteadyStep>& steady) {
  std::map<std::size_t, std::map<int, std::size_t>> counts;
  std::map<std::size_t, std::size_t> total;
  for (const SteadyStep& s : steady) ++counts[s.run][s.samples], ++total[s.run];
  std::map<std::size_t, int> size;
  for (const auto& [run, held] : counts) {
    const auto most =
        std::max_element(held.begin(), held.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    size[run] = most->first > 0 && double(most->second) >= 0.8 * double(total[run]) ? most->first : 0;
  }
  return size;
}

// Each trained size's steady rank-steps (all of its runs'), and how many runs trained it with 10
// of them or more; sizes of fewer than kLevelBinSteps left out.
std::map<int, std::pair<std::vector<SteadyStep>, long>> by_size(const std::vector<SteadyStep>& steady) {
  const auto size = run_sizes(steady);
  std::map<int, std::pair<std::vector<SteadyStep>, long>> by;
  for (const SteadyStep& s : steady)
    if (const int b = size.at(s.run); b > 0 && s.ratio > 0 && std::isfinite(s.ratio)) by[b].first.push_back(s);
  for (auto& [samples, group] : by) {
    std::map<std::size_t, std::size_t> per_run;
    for (const SteadyStep& s : group.first) ++per_run[s.run];
    group.second = std::count_if(per_run.begin(), per_run.end(), [](const auto& r) { return r.second >= 10; });
  }
  std::erase_if(by, [](const auto& group) { return group.second.first.size() < kLevelBinSteps; });
  return by;
}

}  // namespace

std::vector<int> lone_sizes(const std::vector<SteadyStep>& steady) {
  const auto by = by_size(steady);
  std::vector<int> out;
  if (by.size() < 2) return out;
  for (const auto& [samples, group] : by)
    if (group.second < 2) out.push_back(samples);
  return out;
}

std::vector<SampleLevels> fit_samples_levels(const std::vector<SteadyStep>& steady, std::size_t runs,
                                             std::size_t& size) {
  // A size of its own needs two runs of it at least: one run's level and its size's are one figure.
  auto by = by_size(steady);
  std::erase_if(by, [](const auto& group) { return group.second.second < 2; });
  if (by.size() < 2) return {};
  std::vector<SampleLevels> out;
  size = 0;
  for (auto& [samples, sized] : by) {
    auto& group = sized.first;
    std::size_t own = 0;
    auto levels = fit_step_levels(group, runs, own);
    if (levels.empty()) {  // one bin: the size's median at its median tokens, no run's level taken out
      std::vector<double> ratios, tokens;
      for (const SteadyStep& s : group) ratios.push_back(s.ratio), tokens.push_back(double(s.tokens));
      levels = {{std::round(percentile(tokens, 50)), std::round(percentile(ratios, 50) * 1e4) / 1e4}};
      own = group.size();
    }
    size = size == 0 ? own : std::min(size, own);
    out.push_back({samples, std::move(levels)});
  }
  return out;
}

std::pair<RegimeSpread, RegimeSpread> regime_spreads(const std::vector<SteadyStep>& steady,
                                                     const std::function<double(const SteadyStep&)>& level) {
  std::vector<double> about[2];
  for (const SteadyStep& s : steady)
    if (s.ratio > 0) about[s.above].push_back(s.ratio / level(s));
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
