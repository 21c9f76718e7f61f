#include "calib/training_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/stats.hpp"
#include "eval/simulate.hpp"
#include "eval/step_interval.hpp"

namespace ddpsim {

namespace {

// One training run's rank-steps: compute over the surface, the surface's sum, optimizer times.
struct RunTimes {
  std::string name, label;          // the trace (with the policy where it holds several), the policy
  std::string session;              // runs of one process share it (session_of)
  std::vector<double> ratios, opt;  // ratios: steady rank-steps only, each with its surface and tokens
  std::vector<double> surface;
  std::vector<long long> tokens;
  std::vector<int> samples;  // level_samples
};

// The 95% half-width of two runs' level ratio, from their logs' squared deviations over `df`.
double level_spread(double squares, double df) {
  // Levels 2× apart already leave no gain told from noise; past that the term says nothing more.
  return std::min(kMaxRunLevelSpread, std::expm1(t95(df) * std::sqrt(2.0) * std::sqrt(squares / df)));
}

// How far one process's level lands from the model's, which a step time carries whole (a gain
// between runs of one process does not): Student's t × the standard deviation of the processes'
// mean log levels, × √(1 + 1/P) for the error of the model's own mean over its P processes. Earlier
// models' processes (fit.pooled) add their deviations, each about their own model's mean, and
// their degrees of freedom: four processes' spread is a figure of three, and two sessions of
// four on one VM gave 21.2% and 3.2% (the thirty-fifth and thirty-seventh registrations). Below
// three degrees of freedom in all it is never less than the project's (eval/step_interval.hpp).
void process_levels(TrainingFit& fit) {
  std::vector<double> logs;
  std::vector<std::string> sessions;
  for (const RunLevel& run : fit.run_levels) logs.push_back(std::log(run.level)), sessions.push_back(run.session);
  fit.processes = static_cast<int>(std::set<std::string>(sessions.begin(), sessions.end()).size());
  const double squares = session_mean_squares(logs, sessions).squares;
  const LevelSquares earlier = pooled_process_squares(fit.pooled);
  fit.process_pooled_df = earlier.df;
  fit.process_df = std::max(0, fit.processes - 1) + earlier.df;
  if (fit.process_df < 1 || fit.processes < 1) return;
  const double P = double(fit.processes);
  const double spread =
      std::expm1(t95(fit.process_df) * std::sqrt((squares + earlier.squares) / fit.process_df * (1 + 1 / P)));
  fit.process_spread = std::min(kMaxRunLevelSpread,
                                fit.process_df < kMinProcessDf ? std::max(spread, kStepProcessLevelPct / 100) : spread);
}

// Each run's level: its own shapes at its median factor and its mean optimizer, over the same
// shapes at the pooled runs' (`typical` factor, fit.optimizer_ms). The spread is the 95%
// half-width of the ratio of two runs' levels, 1.96·√2 times the sample standard deviation of
// the levels' logs: a pre-run's few runs are a few draws, and their range alone understated the
// next run's (the fourth registered CPU prediction). Runs trained in turn in one process (a
// session) share its minutes, and so a level of the session's own that a gain between two of
// them never sees: each log is taken from its session's mean, over N − S degrees of freedom (N
// runs in S sessions). Runs not trained in turn share no minutes: one session. Earlier models'
// levels (fit.pooled) add their deviations and degrees of freedom.
void run_levels(const std::vector<RunTimes>& runs, double typical, TrainingFit& fit) {
  std::vector<double> logs;
  std::vector<std::string> sessions;
  for (const RunTimes& run : runs) {
    if (run.ratios.empty()) continue;
    const double n = double(run.ratios.size()), opt = fit.optimizer_ms >= 0 ? fit.optimizer_ms : 0;
    const double own_opt = run.opt.empty() ? opt : mean(run.opt);
    // Against the levels at its own tokens: a run of smaller shapes is no slower run for that.
    std::vector<double> about;
    double surface_ms = 0;
    for (std::size_t i = 0; i < run.ratios.size(); ++i) {
      const double at = fit_level(fit, run.samples[i], run.tokens[i]);
      about.push_back(run.ratios[i] / at);
      surface_ms += run.surface[i] * at;
    }
    const double level = (percentile(about, 50) * surface_ms + own_opt * n) / (typical * surface_ms + opt * n);
    if (!(level > 0 && std::isfinite(level))) continue;  // times of 0: no level to compare
    fit.run_levels.push_back({run.name, run.label, run.session, level});
    logs.push_back(std::log(level));
    sessions.push_back(fit.runs_in_turn ? run.session : "");
  }
  double squares = 0, df = 0;
  if (logs.size() >= 2) {
    const SessionSquares own = within_session_squares(logs, sessions);
    fit.sessions_pooled = own.pooled;
    fit.sessions = own.sessions;
    squares = own.squares;
    // Each size's table took out part of its runs' mean level: a degree of freedom a size.
    df = own.df - double(std::max<std::size_t>(fit.samples_levels.size(), 1) - 1);
    if (df >= 1) fit.own_spread = level_spread(squares, df);
    df = std::max(df, 0.0);
  }
  fit.own_df = df;
  const LevelSquares earlier = pooled_squares(fit.pooled);
  fit.pooled_df = earlier.df;
  if (df + earlier.df >= 1) fit.run_level_spread = level_spread(squares + earlier.squares, df + earlier.df);
  process_levels(fit);
}

// Within a session only: a level the whole process shares cancels out of a gain between its
// runs, and runs not trained in turn differ by their minutes' drift too. After run_levels, which
// finds whether the runs form sessions.
void optimizer_control(const std::vector<RunTimes>& runs, TrainingFit& fit) {
  if (!fit.runs_in_turn || fit.sessions_pooled) return;
  std::map<std::string, std::vector<const RunTimes*>> sessions;
  std::vector<std::string> order;  // sessions as the runs were given
  for (const RunTimes& run : runs) {
    if (run.opt.empty()) continue;
    auto& own = sessions[run.session];
    if (own.empty()) order.push_back(run.session);
    own.push_back(&run);
  }
  for (const std::string& key : order) {
    const auto& own = sessions[key];
    if (own.size() < 2) continue;
    std::map<std::string, int> uses;  // two processes started alike form one session: name by trace
    for (const RunTimes* run : own) ++uses[run->label];
    auto& named = fit.optimizer_by_session.emplace_back();
    std::vector<double> medians;
    for (const RunTimes* run : own) {
      medians.push_back(percentile(run->opt, 50));
      named.emplace_back(uses[run->label] > 1 ? run->name : run->label, medians.back());
    }
    fit.optimizer_apart = std::max(fit.optimizer_apart, levels_apart(medians));
  }
}

// One step of one run: each rank's compute measured and on the surface, and whether it met a shape first.
struct Step {
  std::vector<double> measured, predicted;
  std::vector<long long> tokens;  // regime_tokens
  std::vector<bool> first;
  std::vector<std::pair<int, int>> samples;  // the fewest and most samples of its (micro-)batches
  std::vector<int> level_b;                  // level_samples
};

// Every timed rank-step after its process's warm-up (step 0 and any slow leading steps), in the
// order they ran.
struct TimedSteps {
  std::vector<Step> steps;
  std::vector<RunTimes> runs;
  std::vector<double> opt;
  long timed = 0, above = 0;  // rank-steps timed, and those from the profile's knee
  std::vector<SteadyStep> steady;
  std::string files;
};

// A trace's `interleaved` metadata line (ddptrain --policy A,B,...: a step of each in turn), or "".
std::string turns_of(const Trace& t) {
  const auto turns = t.metadata.find("interleaved");
  return turns == t.metadata.end() ? "" : turns->second;
}

// Runs of one process: the trace's path where it holds several, else every metadata line but
// the policy (ddptrain writes each policy's trace with the same lines).
std::string session_of(const Trace& t) {
  return session_key(t.path, t.metadata, t.runs.size() > 1);
}

TimedSteps read_steps(const std::vector<Trace>& training, const Calibration& c, TrainingFit& fit) {
  TimedSteps all;
  for (const Trace& t : training) {
    all.files += (all.files.empty() ? "" : ", ") + t.path;
    const std::size_t first_run = all.runs.size();
    for (const PolicyRun& run : t.runs)
      all.runs.push_back(
          {t.runs.size() > 1 ? t.path + " (" + run.label + ")" : t.path, run.label, session_of(t), {}, {}, {}, {}, {}});
    // Trained in turn: every trace says so, naming the same policies.
    fit.runs_in_turn = fit.runs_in_turn && !turns_of(t).empty() && turns_of(t) == turns_of(training.front());
    const int first_kept = first_kept_step(fit.warmups, t.path);
    std::map<std::pair<int, int>, std::size_t> step_of;  // (run, step) -> index in steps
    for (const RanRankStep& x : in_run_order(t)) {
      const RankStep& r = *x.row;
      const bool first = x.first;
      if (r.step < first_kept || std::isnan(r.fwd_ms) || std::isnan(r.bwd_ms)) continue;
      const double predicted = surface_ms(c, r);
      if (!(predicted > 0)) continue;
      ++all.timed;
      const long long tokens = regime_tokens(r, c.packed);
      const bool above = c.regimes.knee_tokens > 0 && tokens >= c.regimes.knee_tokens;
      all.above += above;
      const auto [at, fresh] = step_of.emplace(std::pair(x.run, r.step), all.steps.size());
      if (fresh) all.steps.emplace_back();
      Step& s = all.steps[at->second];
      s.measured.push_back(r.fwd_ms + r.bwd_ms);
      s.predicted.push_back(predicted);
      s.tokens.push_back(tokens);
      s.first.push_back(first);
      const int b = level_samples(r, c.packed);
      s.level_b.push_back(b);
      auto held = r.micro.empty() ? std::pair(r.batch_size, r.batch_size)
                                  : std::pair(r.micro.front().batch_size, r.micro.front().batch_size);
      for (const MicroBatchShape& mb : r.micro)
        held = {std::min(held.first, mb.batch_size), std::max(held.second, mb.batch_size)};
      s.samples.push_back(held);
      RunTimes& own = all.runs[first_run + static_cast<std::size_t>(x.run)];
      if (!first) {  // as `typical` in fit_first_use: a shape's first use is no level
        own.ratios.push_back((r.fwd_ms + r.bwd_ms) / predicted);
        own.surface.push_back(predicted);
        own.tokens.push_back(tokens);
        own.samples.push_back(b);
        all.steady.push_back({tokens, b, own.ratios.back(), first_run + static_cast<std::size_t>(x.run), above});
      }
      if (!std::isnan(r.opt_ms)) all.opt.push_back(r.opt_ms), own.opt.push_back(r.opt_ms);
    }
  }
  return all;
}

// The first-use cost: the median extra of the rank-steps that met a shape first over the
// steady ones' typical factor; returns that factor.
double fit_first_use(const std::vector<Step>& steps, std::size_t width, TrainingFit& fit) {
  std::vector<double> extras_measured, extras_predicted, steady;
  for (const Step& s : steps)
    for (std::size_t g = 0; g < width; ++g) {
      const double expected = s.predicted[g] * fit_level(fit, s.level_b[g], s.tokens[g]);
      if (s.first[g])
        extras_measured.push_back(s.measured[g]), extras_predicted.push_back(expected);
      else
        steady.push_back(s.measured[g] / expected);
    }
  const double typical = steady.empty() ? 1.0 : percentile(steady, 50);
  fit.first_uses = static_cast<long>(extras_measured.size());
  if (fit.first_uses >= kMinFirstUses) {
    std::vector<double> extra;
    for (std::size_t i = 0; i < extras_measured.size(); ++i)
      extra.push_back(extras_measured[i] - typical * extras_predicted[i]);
    fit.first_use_ms = std::max(0.0, percentile(extra, 50));
  }
  return typical;
}

// Each step's per-rank factors over the surface (first uses' cost taken out), and their spread.
void fit_step_factors(const std::vector<Step>& steps, std::size_t width, TrainingFit& fit) {
  std::vector<double> all;
  for (const Step& s : steps) {
    std::vector<double> factors;
    for (std::size_t g = 0; g < width; ++g) {
      const double own = s.measured[g] - (s.first[g] ? fit.first_use_ms : 0.0);
      // Four decimals: the model file stays readable, the draws unchanged in effect.
      const double f = std::max(own / (s.predicted[g] * fit_level(fit, s.level_b[g], s.tokens[g])), 1e-3);
      factors.push_back(std::round(f * 1e4) / 1e4);
      all.push_back(factors.back());
    }
    fit.step_factors.push_back(std::move(factors));
  }
  fit.rank_steps = static_cast<long>(all.size());
  fit.factor_mean = mean(all);
  fit.factor_p50 = percentile(all, 50);
  fit.factor_p95 = percentile(all, 95);
  fit.factor_p99 = percentile(all, 99);
  fit.spike_pct = 100.0 *
                  double(std::count_if(all.begin(), all.end(), [&](double f) { return f > 1.5 * fit.factor_p50; })) /
                  double(all.size());
}

// The fewest and most samples a (micro-)batch held in the timed rank-steps the fit kept: the
// levels stand for those sizes only. The size tables come from the steady rank-steps, some of
// steps the whole-step filter dropped: the range holds their sizes too, as the model's loader asks.
void samples_range(const std::vector<Step>& steps, TrainingFit& fit) {
  const auto add = [&](int fewest, int most) {
    fit.samples_min = fit.samples_min == 0 ? fewest : std::min(fit.samples_min, fewest);
    fit.samples_max = std::max(fit.samples_max, most);
  };
  for (const Step& s : steps)
    for (const auto& [fewest, most] : s.samples)
      if (fewest > 0) add(fewest, most);
  for (const SampleLevels& table : fit.samples_levels) add(table.samples, table.samples);
}

// The tokens of the steady rank-steps the levels were fitted to: the levels stand for those only.
void tokens_range(const std::vector<SteadyStep>& steady, TrainingFit& fit) {
  if (fit.step_levels.empty() && fit.samples_levels.empty()) return;
  for (const SteadyStep& s : steady)
    if (s.tokens >= 1 && s.ratio > 0 && std::isfinite(s.ratio)) {
      fit.tokens_min = fit.tokens_min == 0 ? s.tokens : std::min(fit.tokens_min, s.tokens);
      fit.tokens_max = std::max(fit.tokens_max, s.tokens);
    }
}

}  // namespace

TrainingFit fit_training(const std::vector<Trace>& training, const Calibration& c, TrainingFitOptions options) {
  TrainingFit fit;
  const bool levels_by_tokens = options.levels_by_tokens;
  fit.pooled = std::move(options.pooled);
  fit.warmup_asked = options.warmup;
  fit.warmups = leading_steps(training, c, options.warmup);
  TimedSteps read = read_steps(training, c, fit);
  // Whole steps only, all of one world: a step's ranks are drawn together.
  std::size_t width = 0;
  for (const Step& s : read.steps) width = std::max(width, s.measured.size());
  std::erase_if(read.steps, [&](const Step& s) { return s.measured.size() != width; });
  if (read.steps.empty() && options.warmup > 0)
    throw InputError(read.files + ": no step after step 0 and the " + std::to_string(options.warmup) +
                     " --training-warmup leaves out with every rank's fwd_ms and bwd_ms timed: give a smaller one");
  if (read.steps.empty())
    throw InputError(read.files +
                     ": no step after step 0 with every rank's fwd_ms and bwd_ms timed: --training takes "
                     "traces of training runs (ddptrain --policy ... --out DIR writes DIR/steps.csv)");
  if (levels_by_tokens) fit.samples_levels = fit_samples_levels(read.steady, read.runs.size(), fit.level_bin_steps);
  if (levels_by_tokens && fit.samples_levels.empty())
    fit.step_levels = fit_step_levels(read.steady, read.runs.size(), fit.level_bin_steps);
  if (levels_by_tokens) fit.lone_sizes = lone_sizes(read.steady);
  tokens_range(read.steady, fit);
  fit.levels_asked = levels_by_tokens;
  const double typical = fit_first_use(read.steps, width, fit);
  fit_step_factors(read.steps, width, fit);
  if (!read.opt.empty()) fit.optimizer_ms = mean(read.opt);
  fit.knee_tokens = c.regimes.knee_tokens;
  fit.above_share = read.timed ? double(read.above) / double(read.timed) : 0;
  // A σ of 0 from the knee: as far apart as regimes go, a thousandth kept so that the scale is one.
  if (fit.knee_tokens > 0 && c.noise_sigma > 0)
    fit.steps_scale = std::max(c.noise_above_sigma, 1e-3 * c.noise_sigma) / c.noise_sigma;
  std::tie(fit.below, fit.above) =
      regime_spreads(read.steady, [&](const SteadyStep& s) { return fit_level(fit, s.samples, s.tokens); });
  run_levels(read.runs, typical, fit);
  optimizer_control(read.runs, fit);
  samples_range(read.steps, fit);
  char line[256];
  int left_out = 0;
  for (const LeadingSteps& w : fit.warmups) left_out += w.left_out;
  std::snprintf(line, sizeof line, "%zu steps × %zu ranks (from step 1%s) of ", fit.step_factors.size(), width,
                left_out == 0                     ? ""
                : fit.warmup_asked == AUTO_WARMUP ? ", each process's slow leading steps left out"
                                                  : ", each process's warm-up left out");
  fit.source = line + read.files;
  return fit;
}

}  // namespace ddpsim
