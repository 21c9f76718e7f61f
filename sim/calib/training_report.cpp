// calibrate --training's report: what the training runs added to the model, and what the
// run-level term and the optimizer control say about the machine the runs trained on.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "calib/training_fit.hpp"
#include "calib/validate.hpp"

namespace ddpsim {

namespace {

// What --pool-run-levels added to the run-level line: the earlier models, their degrees of
// freedom, and the spread these runs gave alone.
template <class Percent>
std::string pooled_report(const TrainingFit& t, const Percent& percent) {
  if (t.pooled.empty()) return "";
  std::size_t levels = 0;
  std::string models;
  for (const PooledRunLevels& p : t.pooled) {
    levels += p.levels.size();
    models += (models.empty() ? "" : ", ") + p.model + " " + std::to_string(p.levels.size());
  }
  return "; pooled with " + std::to_string(levels) + " levels of " + std::to_string(t.pooled.size()) +
         " earlier model(s) (" + models + "), each about its session's mean within its model, " +
         std::to_string(static_cast<long>(t.own_df + t.pooled_df)) + " degrees of freedom in all (" +
         std::to_string(static_cast<long>(t.own_df)) + " here, " + std::to_string(static_cast<long>(t.pooled_df)) +
         " pooled); " +
         (t.own_spread >= 0 ? "these runs alone gave " + percent(t.own_spread)
                            : std::string("these runs alone give no spread"));
}

// What the process level was taken over: "over 4 processes' mean levels, pooled with ...".
std::string process_level_basis(const TrainingFit& t) {
  std::string out =
      "over " + std::to_string(t.processes) + (t.processes == 1 ? " process's" : " processes'") + " mean levels";
  if (t.process_pooled_df > 0)
    out += ", pooled with " + std::to_string(static_cast<long>(t.process_pooled_df)) +
           " degrees of freedom of earlier models' processes, " + std::to_string(static_cast<long>(t.process_df)) +
           " in all";
  if (t.process_df < kMinProcessDf) out += ", held to the project's 15% or more below three degrees of freedom";
  return out;
}

// Each run's level, a process's runs together and the processes apart ("static ×1.017, kk ×0.990
// | static ×1.004, kk ×1.037"), in the order given: each run by its policy, by its trace where
// that alone would not tell it apart (a process of one run, two runs of one policy in a process).
std::string levels_by_process(const TrainingFit& t) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const RunLevel*>> by_process;
  for (const RunLevel& run : t.run_levels) {
    auto& own = by_process[run.session];
    if (own.empty()) order.push_back(run.session);
    own.push_back(&run);
  }
  std::string out;
  char line[512];
  for (const std::string& process : order) {
    std::map<std::string, int> uses;
    for (const RunLevel* run : by_process[process]) ++uses[run->label];
    out += out.empty() ? "" : " | ";
    for (std::size_t i = 0; i < by_process[process].size(); ++i) {
      const RunLevel& run = *by_process[process][i];
      const bool by_trace = by_process[process].size() == 1 || uses[run.label] > 1;
      std::snprintf(line, sizeof line, "%s%s ×%.3f", i ? ", " : "", (by_trace ? run.name : run.label).c_str(),
                    run.level);
      out += line;
    }
  }
  return out;
}

// The report's run-level line.
std::string run_level_report(const TrainingFit& t) {
  const std::string each = levels_by_process(t);
  char line[64];
  if (t.run_level_spread <= 0)
    return "            run level: the runs' levels agreed" +
           std::string(t.sessions > 1 ? " within each session" : "") + " (levels " + each + "): no term\n";
  const auto percent = [&](double spread) {
    std::snprintf(line, sizeof line, "%.1f%%", 100 * spread);
    return spread >= kMaxRunLevelSpread ? std::string("100% or more (the term's cap)") : std::string(line);
  };
  const bool sessions = t.sessions > 1 && t.run_levels.size() >= 2;
  std::string out = "            run level: two " + std::string(sessions ? "runs of one session" : "runs' levels") +
                    " may differ by " + percent(t.run_level_spread) + " (95%; " +
                    (sessions ? "each against its session's mean, " + std::to_string(t.sessions) + " sessions; " : "") +
                    "levels " + each + pooled_report(t, percent) + "): a term of every gain's prediction interval\n";
  if (t.own_df + t.pooled_df < kMinProcessDf)  // the process level's threshold, for the same reason
    out += "            only " + std::to_string(static_cast<long>(t.own_df + t.pooled_df)) +
           " degree(s) of freedom: Student's t widens the spread (12.7 over one, 4.3 over two, against the normal's "
           "1.96); more pre-run processes or --pool-run-levels narrow it\n";
  if (t.process_spread > 0)
    out += "            process level: one process's level may land " + percent(t.process_spread) +
           " from the model's (95%; " + process_level_basis(t) + "): a term of every step time's prediction interval\n";
  if (t.sessions_pooled)
    out +=
        "            no process trained two of the runs: their levels were pooled, the drift between processes "
        "with them\n";
  if (!t.runs_in_turn)
    out +=
        "            the runs were not all trained in turn (no common `interleaved` metadata line): their levels "
        "hold the drift between their minutes too\n";
  return out;
}

// The optimizer control's line, and a warning where the runs' models ran at levels of their own.
std::string optimizer_control_report(const TrainingFit& t) {
  std::string each;
  char line[256];
  for (const auto& session : t.optimizer_by_session) {
    each += each.empty() ? "" : "; ";
    for (std::size_t i = 0; i < session.size(); ++i) {
      std::snprintf(line, sizeof line, "%s%s %.1f", i ? ", " : "", session[i].first.c_str(), session[i].second);
      each += line;
    }
    each += " ms";
  }
  std::snprintf(line, sizeof line, "%.1f%%", 100 * t.optimizer_apart);
  std::string out = "            optimizer, the same work in every run: its medians " +
                    std::string(t.optimizer_by_session.size() > 1 ? "within a session " : "") + "at most " + line +
                    " apart (" + each + ")\n";
  if (t.optimizer_apart > kOwnLevelApart)
    out +=
        "            the machine ran each run's model at a level of its own, not the policy's: a gain between "
        "them carries it, and the run-level term holds it\n";
  return out;
}

// Where the runs met both sides of the knee: each side's spread as measured (about the levels
// where there are some), so that a reader sees whether the runs' spread shrinks across the knee
// as the profile's does, which is what a factor drawn across it assumes.
std::string regimes_measured_report(const TrainingFit& t) {
  if (t.below.p50 <= 0 || t.above.p50 <= 0) return "";
  char line[512];
  std::snprintf(line, sizeof line,
                "            measured on both sides%s: below the knee median ×%.4f, σ %.4f (%ld rank-steps); from it "
                "median ×%.4f, σ %.4f (%ld): σ ratio %.3g against the profile's %.3g\n",
                t.step_levels.empty() && t.samples_levels.empty() ? "" : ", about the levels", t.below.p50,
                t.below.sigma, t.below.rank_steps, t.above.p50, t.above.sigma, t.above.rank_steps,
                t.below.sigma > 0 ? t.above.sigma / t.below.sigma : 0.0, t.steps_scale);
  return line;
}

// A level table as the report prints it: "40 ×0.891, 88 ×1.210".
std::string table_text(const std::vector<std::pair<double, double>>& levels) {
  std::string each;
  char line[64];
  for (const auto& [tokens, factor] : levels) {
    std::snprintf(line, sizeof line, "%s%.0f ×%.3f", each.empty() ? "" : ", ", tokens, factor);
    each += line;
  }
  return each;
}

// The levels by size or by tokens, or why there are none.
std::string step_levels_report(const TrainingFit& t) {
  if (!t.samples_levels.empty()) {
    std::string each;
    for (const SampleLevels& s : t.samples_levels)
      each += (each.empty() ? "" : "; ") + std::to_string(s.samples) + " samples: " + table_text(s.levels);
    return "            levels by batch size and padded tokens (each size's runs apart, bins of at least " +
           std::to_string(t.level_bin_steps) + " steady rank-steps, each run's own level taken out): " + each +
           "; a simulated rank-step takes its neighbouring sizes' levels at its tokens (interpolated in log "
           "samples, held beyond the sizes measured)\n";
  }
  if (t.step_levels.empty() && !t.levels_asked)
    return "            one level for every shape (--training-levels one)\n";
  if (t.step_levels.empty())
    return "            one level for every shape: the steady rank-steps fill fewer than two bins of at least " +
           std::to_string(t.level_bin_steps) + " at different token counts\n";
  const std::string each = table_text(t.step_levels);
  char line[128];
  std::snprintf(line, sizeof line, "%zu bins of at least %zu steady rank-steps", t.step_levels.size(),
                t.level_bin_steps);
  return "            levels by padded tokens a rank-step (the medians of " + std::string(line) +
         ", each run's own level taken out): " + each +
         "; a simulated rank-step takes the level at its tokens (held beyond the ends), and a drawn step's "
         "factor about it\n";
}

// Which processes' slow leading steps the fit left out, so that a reader can check them.
std::string warmup_report(const TrainingFit& t) {
  std::string each;
  char line[128];
  for (const LeadingSteps& w : t.warmups) {
    if (w.left_out == 0) continue;
    const int first = w.first_kept - w.left_out;
    std::string paths;
    for (const std::string& p : w.paths) paths += (paths.empty() ? "" : ", ") + p;
    std::snprintf(line, sizeof line, " (the slowest ×%.2f the process's settled median)", w.slowest);
    each += (each.empty() ? "" : "; ") + steps_text(first, w.first_kept) + " of " + paths + line;
  }
  if (each.empty()) return "";
  if (t.warmup_asked != AUTO_WARMUP)
    return "            warm-up: left out " + std::to_string(t.warmup_asked) +
           " step(s) after step 0 of every process, as --training-warmup asked\n";
  return "            warm-up: left out " + each +
         ": a process's leading steps far slower than its second half (above its P99 and 1.5× its median), "
         "which drawn as noise would strike any simulated step\n";
}

}  // namespace

std::string training_report(const TrainingFit& t) {
  char line[768];
  // The source names every trace, as long as the user's list: outside the fixed buffer.
  std::string out = "  training  " + t.source;
  std::snprintf(line, sizeof line,
                ": each rank-step's compute over the surface%s, median ×%.4f, mean ×%.4f, P95 ×%.4f, "
                "P99 ×%.4f; %.1f%% of rank-steps above 1.5× the median. The model draws these steps whole (a "
                "step's ranks together), in place of the profile's noise\n",
                t.step_levels.empty() && t.samples_levels.empty() ? "" : " and the level at its shape", t.factor_p50,
                t.factor_mean, t.factor_p95, t.factor_p99, t.spike_pct);
  out += line;
  out += warmup_report(t);
  out += step_levels_report(t);
  if (!t.lone_sizes.empty()) {
    std::string sizes;
    for (int b : t.lone_sizes) sizes += (sizes.empty() ? "" : ", ") + std::to_string(b);
    out += "            warning: one run alone trained " + sizes +
           " samples a rank-step, so no level of that size is told from its run's: the runs' levels (and the "
           "run-level term) hold the sizes' differences; train two runs at each size\n";
  }
  if (t.samples_min > 0) {
    const std::string held = t.samples_min == t.samples_max
                                 ? std::to_string(t.samples_min)
                                 : std::to_string(t.samples_min) + " to " + std::to_string(t.samples_max);
    out += "            samples a (micro-)batch: " + held +
           "; a config of another size is told that the runs' level there is not measured\n";
  }
  if (t.tokens_min > 0)
    out += "            tokens a rank-step: " + std::to_string(t.tokens_min) + " to " + std::to_string(t.tokens_max) +
           "; a prediction whose rank-steps go beyond carries an \"untrained tokens\" term\n";
  if (t.first_uses >= kMinFirstUses)
    std::snprintf(line, sizeof line,
                  "            first use of a shape in a process: +%.4g ms (median over %ld first uses after step 0)\n",
                  t.first_use_ms, t.first_uses);
  else
    std::snprintf(line, sizeof line,
                  "            first use of a shape: not fitted, %ld first use(s) after step 0 (at least %ld needed)\n",
                  t.first_uses, kMinFirstUses);
  out += line;
  if (t.optimizer_ms >= 0) {
    std::snprintf(line, sizeof line,
                  "            optimizer %.4g ms from the training runs (in place of the profile's)\n", t.optimizer_ms);
    out += line;
  }
  if (t.run_levels.size() >= 2 || !t.pooled.empty()) out += run_level_report(t);
  if (t.optimizer_apart >= 0) out += optimizer_control_report(t);
  if (t.knee_tokens > 0) {
    const bool above = t.above_share > 0.5;
    std::snprintf(
        line, sizeof line,
        "            regimes: %.0f%% of the run's rank-steps from the profile's knee (%lld padded tokens), so "
        "the steps stand for the %s regime; drawn for a rank-step %s the knee, a factor's log is scaled "
        "by %.4g (the profile's σ %s)\n",
        100 * t.above_share, t.knee_tokens, above ? "compute-bound" : "launch-bound", above ? "below" : "from",
        above ? 1 / t.steps_scale : t.steps_scale, above ? "below over σ above" : "above over σ below");
    out += line;
    out += regimes_measured_report(t);
  }
  return out;
}

}  // namespace ddpsim
