#include "calib/noise_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numbers>
#include <numeric>
#include <optional>
#include <set>
#include <span>

#include <boost/math/distributions/fisher_f.hpp>

#include "calib/calibrate.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"
#include "model/perf_model.hpp"

namespace ddpsim {

namespace {

// A group's squared deviations from its own mean and their degrees of freedom.
struct Spread {
  double squares = 0;
  long degrees = 0;
  Spread& operator+=(const Spread& o) {
    squares += o.squares, degrees += o.degrees;
    return *this;
  }
  double sigma() const { return degrees > 0 ? std::sqrt(squares / double(degrees)) : 0; }
};

Spread spread(const std::vector<double>& logs) {
  Spread s;
  if (logs.size() < 2) return s;
  const double m = std::accumulate(logs.begin(), logs.end(), 0.0) / double(logs.size());
  for (double v : logs) s.squares += (v - m) * (v - m);
  s.degrees = static_cast<long>(logs.size()) - 1;
  return s;
}

// A σ of 0 (a timer's resolution on identical repetitions) would give any held-out deviation
// no likelihood at all.
constexpr double kSigmaFloor = 1e-6;

// Log-likelihood of a group's deviations from its mean under N(0, σ²) (degrees of freedom n − 1).
double log_likelihood(const Spread& s, double sigma) {
  const double v = std::max(sigma, kSigmaFloor) * std::max(sigma, kSigmaFloor);
  return -0.5 * double(s.degrees) * std::log(2 * std::numbers::pi * v) - s.squares / (2 * v);
}

struct Repeated {
  long long tokens;
  Spread spread;
  int fold;
};

// Held-out log-likelihood of every group, each predicted by the σ's of the other folds: one σ
// where knee is 0, else one below the knee and one from it (a side with no training group takes
// the training set's pooled σ).
double heldout_log_likelihood(const std::vector<Repeated>& groups, int folds, long long knee) {
  double total = 0;
  for (int f = 0; f < folds; ++f) {
    Spread below, above, all;
    for (const Repeated& g : groups)
      if (g.fold != f) {
        (knee > 0 && g.tokens >= knee ? above : below) += g.spread;
        all += g.spread;
      }
    const double sb = below.degrees ? below.sigma() : all.sigma(), sa = above.degrees ? above.sigma() : all.sigma();
    for (const Repeated& g : groups)
      if (g.fold == f) total += log_likelihood(g.spread, knee > 0 && g.tokens >= knee ? sa : sb);
  }
  return total;
}

// Steps whose ranks all timed one shape at once (a profile of ranks together): how the ranks
// differ within a step is each one's own noise; how a shape's step means differ, beyond what
// the own noise gives a mean of n, is the noise they share. The share of the variance they
// share (0 without such steps), and how many ranks timed a step in c.noise_ranks.
double shared_share(const std::map<long, std::vector<std::pair<int, double>>>& steps, Calibration& c) {
  double own_squares = 0;
  long own_degrees = 0;
  std::size_t ranks = 0;
  std::map<int, std::vector<double>> step_means;
  for (const auto& step : steps) {
    const auto& rows = step.second;  // a named reference: clang 14 cannot capture a structured binding
    const auto same = [&](const auto& r) { return r.first == rows[0].first; };
    if (rows.size() < 2 || !std::all_of(rows.begin(), rows.end(), same)) continue;
    double m = 0;
    for (const auto& r : rows) m += r.second / double(rows.size());
    for (const auto& r : rows) own_squares += (r.second - m) * (r.second - m);
    own_degrees += static_cast<long>(rows.size()) - 1;
    ranks = std::max(ranks, rows.size());
    step_means[rows[0].first].push_back(m);
  }
  double mean_squares = 0;
  long mean_degrees = 0;
  for (const auto& [shape, means] : step_means) {
    const double m = mean(means);
    for (double v : means) mean_squares += (v - m) * (v - m);
    mean_degrees += static_cast<long>(means.size()) - 1;
  }
  if (own_degrees == 0 || mean_degrees == 0) return 0;
  const double own = own_squares / double(own_degrees);
  const double shared = std::max(0.0, mean_squares / double(mean_degrees) - own / double(ranks));
  c.noise_ranks = static_cast<int>(ranks);
  return own + shared > 0 ? shared / (own + shared) : 0;
}

// P95/P50 of the compute factor a model draws: a log-normal of σ times a spell from the table
// (none when empty), from a fixed sample, so that a report is the same on every run.
double noise_p95_over_p50(double sigma, const std::vector<double>& spells) {
  Rng rng(0x5eed);
  std::vector<double> draws(100'000);
  for (double& d : draws)
    d = std::exp(sigma * rng.normal()) * (spells.empty() ? 1.0 : quantile_table_at(spells, rng.uniform()));
  return percentile(draws, 95) / percentile(draws, 50);
}

}  // namespace

double pooled_sigma(const std::vector<NoiseGroup>& groups) {
  double squares = 0;
  long degrees = 0;
  for (const NoiseGroup& g : groups) {
    const double m = mean(g.logs);
    for (double v : g.logs) squares += (v - m) * (v - m);
    degrees += static_cast<long>(g.logs.size()) - 1;
  }
  return degrees > 0 ? std::sqrt(squares / double(degrees)) : 0;
}

NoiseRegimes fit_noise_regimes(const std::vector<NoiseGroup>& groups, int folds, std::uint64_t seed) {
  NoiseRegimes r;
  std::vector<Repeated> repeated;
  for (const NoiseGroup& g : groups)
    if (g.logs.size() > 1) repeated.push_back({g.tokens, spread(g.logs), 0});
  r.sigma_below = pooled_sigma(groups);
  r.groups_below = static_cast<int>(repeated.size());
  // Knees with enough groups each side: a side's σ from three groups is chance.
  std::set<long long> tokens;
  for (const Repeated& g : repeated) tokens.insert(g.tokens);
  std::vector<long long> knees;
  for (long long t : tokens) {
    const auto below = std::count_if(repeated.begin(), repeated.end(), [&](const Repeated& g) { return g.tokens < t; });
    if (below >= kMinRegimeGroups && static_cast<long>(repeated.size()) - below >= kMinRegimeGroups) knees.push_back(t);
  }
  r.folds = std::min<int>(folds, static_cast<int>(repeated.size()));
  if (knees.empty() || r.folds < 2) {
    r.folds = 0;
    return r;
  }
  std::vector<std::size_t> order(repeated.size());
  std::iota(order.begin(), order.end(), 0);
  Rng(seed).shuffle(std::span(order));
  for (std::size_t k = 0; k < order.size(); ++k) repeated[order[k]].fold = static_cast<int>(k % std::size_t(r.folds));
  long degrees = 0;
  for (const Repeated& g : repeated) degrees += g.spread.degrees;
  r.heldout_one = heldout_log_likelihood(repeated, r.folds, 0) / double(degrees);
  r.heldout_two = r.heldout_one;
  long long best = 0;
  for (long long knee : knees) {
    const double ll = heldout_log_likelihood(repeated, r.folds, knee) / double(degrees);
    if (ll > r.heldout_two) r.heldout_two = ll, best = knee;
  }
  r.knees_tried = static_cast<int>(knees.size());
  if (best == 0) return r;
  Spread below, above;
  for (const Repeated& g : repeated) (g.tokens >= best ? above : below) += g.spread;
  // The best of many knees beats one σ by chance now and then: its two σ's must also differ
  // beyond chance (F-test of the variances, two-sided, at kRegimeAlpha over the knees tried).
  const double sb = std::max(below.sigma(), kSigmaFloor), sa = std::max(above.sigma(), kSigmaFloor);
  const boost::math::fisher_f_distribution<double> f(double(below.degrees), double(above.degrees));
  const double cdf = boost::math::cdf(f, (sb * sb) / (sa * sa));
  r.p_value = std::min(1.0, 2 * std::min(cdf, 1 - cdf) * double(knees.size()));
  r.best_knee = best;
  if (r.p_value >= kRegimeAlpha) return r;
  r.knee_tokens = best;
  r.sigma_below = below.sigma(), r.sigma_above = above.sigma();
  r.groups_below = static_cast<int>(
      std::count_if(repeated.begin(), repeated.end(), [&](const Repeated& g) { return g.tokens < best; }));
  r.groups_above = static_cast<int>(repeated.size()) - r.groups_below;
  return r;
}

namespace {

// Slow spells from groups' lifts (mean log over the surface, less the level): 101 factors of
// median one, or none from fewer than kMinSpellGroups groups.
std::vector<double> spell_table(const std::vector<double>& lifts, double level) {
  if (lifts.size() < kMinSpellGroups) return {};
  std::vector<double> factors, q;
  for (double l : lifts) factors.push_back(std::exp(l - level));
  for (int k = 0; k <= 100; ++k) q.push_back(percentile(factors, k));
  const double median = q[50];  // 1 but for the interpolation between two lifts
  for (double& v : q) v /= median;
  return q;
}

// The slow spells, by regime, from the repeated groups' lifts; the level of a quiet machine (their
// median lift) where there are enough of them for spells at all.
std::optional<double> fit_spells(const NoiseSample& sample, const std::vector<double>& lift, Calibration& c) {
  const long long knee = c.regimes.knee_tokens;
  std::vector<double> lifts, below, above;
  for (std::size_t g = 0; g < sample.groups.size(); ++g)
    if (sample.groups[g].logs.size() > 1) {
      lifts.push_back(lift[g]);
      (knee > 0 && sample.groups[g].tokens >= knee ? above : below).push_back(lift[g]);
    }
  if (lifts.size() < kMinSpellGroups) return std::nullopt;
  const double level = percentile(lifts, 50);
  const bool own_below = knee > 0 && below.size() >= kMinSpellGroups;
  c.spell_quantiles = spell_table(own_below ? below : lifts, level);
  c.spell_groups = static_cast<int>(own_below ? below.size() : lifts.size());
  if (knee == 0) return level;
  c.spell_quantiles_above = spell_table(above, level);
  c.spell_groups_above = static_cast<int>(above.size());
  // Too few groups above for a table of their own: the spells below, in proportion to the
  // regimes' σ's (a spell of the machine lifts a quiet kernel as little as its repetitions vary).
  c.spells_above_scaled = c.spell_quantiles_above.empty();
  if (c.spells_above_scaled) {
    const double scale = c.regimes.sigma_below > 0 ? c.regimes.sigma_above / c.regimes.sigma_below : 0;
    for (double q : c.spell_quantiles) c.spell_quantiles_above.push_back(std::exp(std::log(q) * scale));
  }
  return level;
}

}  // namespace

void fit_noise(const NoiseSample& sample, const CalibrationOptions& options, Calibration& c) {
  std::vector<double> logs, lift(sample.groups.size());
  for (const NoiseSample::Row& r : sample.rows) logs.push_back(r.log);
  bool repeated = false;
  for (std::size_t g = 0; g < sample.groups.size(); ++g) {
    lift[g] = mean(sample.groups[g].logs);
    repeated = repeated || sample.groups[g].logs.size() > 1;
  }
  // Each rank-step's σ: of the repetitions where there are any, else of the residuals (which
  // also hold the form's lack of fit).
  c.noise_from_repetitions = repeated;
  c.noise_sigma = repeated ? pooled_sigma(sample.groups) : population_std(logs);
  const double total_sigma = c.noise_sigma;
  if (repeated) c.regimes = fit_noise_regimes(sample.groups, options.folds, options.seed);
  const long long knee = c.regimes.knee_tokens;
  if (knee > 0) c.noise_sigma = c.regimes.sigma_below, c.noise_above_sigma = c.regimes.sigma_above;

  std::map<long, std::vector<std::pair<int, double>>> together;  // by step: its ranks' deviations
  for (const NoiseSample::Row& r : sample.rows)
    together[r.step].emplace_back(sample.groups[static_cast<std::size_t>(r.group)].shape,
                                  r.log - lift[static_cast<std::size_t>(r.group)]);
  // The total σ of each regime stays the one measured over all its repetitions; the shared share
  // splits it, the same in both regimes.
  const double share = shared_share(together, c);
  if (c.noise_ranks > 0) {
    for (auto [own, shared] : {std::pair{&c.noise_sigma, &c.noise_shared_sigma},
                               std::pair{&c.noise_above_sigma, &c.noise_above_shared_sigma}}) {
      const double total = *own;
      *own = total * std::sqrt(1 - share);
      *shared = total * std::sqrt(share);
    }
  }

  // The level of a quiet machine: the median repeated group's, else the median row's.
  const double level = fit_spells(sample, lift, c).value_or(logs.empty() ? 0.0 : percentile(logs, 50));
  c.mean_scale = std::exp(level + 0.5 * total_sigma * total_sigma);
  c.fitted_p95_over_p50 = noise_p95_over_p50(total_sigma, c.spell_quantiles);
}

}  // namespace ddpsim
