#include "calib/validate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <tuple>

#include "calib/pooled_levels.hpp"
#include "calib/warmup.hpp"
#include "common/error.hpp"
#include "common/stats.hpp"

namespace ddpsim {

SimulationRun replay(const Trace& trace, Config config) {
  const int G = trace.runs.front().G;
  for (const auto& run : trace.runs)
    if (run.G != G)
      throw InputError(trace.path + ": policies with different rank counts (" + std::to_string(run.G) + " and " +
                       std::to_string(G) + "): replay one world size at a time");
  if (config.training.world_size != G) {
    if (config.platform.topology == "xml" && static_cast<int>(config.platform.hosts.size()) != G)
      throw InputError(trace.path + ": the trace has " + std::to_string(G) + " ranks, the platform maps " +
                       std::to_string(config.platform.hosts.size()));
    if (config.platform.topology == "cluster" && G % config.platform.gpus_per_node != 0)
      throw InputError(trace.path + ": " + std::to_string(G) + " ranks are not whole nodes of " +
                       std::to_string(config.platform.gpus_per_node) + " GPUs");
    config.training.world_size = G;
  }
  if (config.parallel)
    throw InputError(config.origin +
                     ": parallel: replay and validate simulate the DDP steps a trace recorded; a "
                     "pipeline job runs with ddpsim run (leave the parallel section out here)");
  const bool packed = config.training.attention == "packed";
  if (packed != trace.runs.front().packed)
    throw InputError(trace.path + (packed ? ": the config packs sequences (training.attention \"packed\") but the "
                                            "trace has no sq_tokens column: it recorded padded micro-batches"
                                          : ": the trace recorded packed sequences (column sq_tokens), which "
                                            "training.attention \"padded\" cannot replay: leave attention out"));
  if (packed && (config.model->forward.use_grid() || config.model->backward.use_grid()))
    throw InputError(trace.path + ": packed sequences need the model's analytic or roofline form, and " +
                     config.model->origin + " uses a measured grid (calibrate it with --form analytic or roofline)");
  const bool micro_columns =
      std::find(trace.columns.begin(), trace.columns.end(), "micro_batches") != trace.columns.end();
  if (config.training.micro_batches > 1 && !micro_columns)
    throw InputError(trace.path +
                     ": the trace recorded one micro-batch per rank and step (no micro_batches "
                     "column), and replay keeps the recorded plan: training.micro_batches " +
                     std::to_string(config.training.micro_batches) +
                     " would be ignored (simulate the split with ddpsim run, or leave it out)");
  if (config.training.micro_batches > 1 && micro_columns)
    for (const auto& run : trace.runs)
      for (const auto& r : run.rows)
        if (static_cast<int>(std::max<std::size_t>(r.micro.size(), 1)) != config.training.micro_batches)
          throw InputError(trace.path + ": step " + std::to_string(r.step) + " of rank " + std::to_string(r.rank) +
                           " recorded " + std::to_string(std::max<std::size_t>(r.micro.size(), 1)) +
                           " micro-batches, and replay keeps the recorded plan: training.micro_batches " +
                           std::to_string(config.training.micro_batches) +
                           " would be ignored (simulate the split with ddpsim run, or leave it out)");
  std::vector<PolicyRun> runs = trace.runs;
  for (auto& run : runs) {
    run.decision_us.clear();
    for (auto& r : run.rows) {  // keep only what was planned: the simulator fills the rest
      r.fwd_ms = r.bwd_ms = r.comm_wait_ms = r.opt_ms = r.step_ms = r.peak_mem_mib = r.loss = NOT_MEASURED;
      r.step = static_cast<int>(&r - run.rows.data()) / run.G;
    }
  }
  return simulate_runs(config, std::move(runs));
}

std::string steps_text(int first, int end) {
  return end - first == 1 ? "step " + std::to_string(first)
                          : "steps " + std::to_string(first) + " to " + std::to_string(end - 1);
}

int settled_step(const std::vector<double>& max_step_ms) {
  constexpr std::size_t window = 10;
  const std::size_t n = max_step_ms.size();
  if (n < 2 * window) return 0;
  const std::vector<double> second_half(max_step_ms.begin() + static_cast<long>(n / 2), max_step_ms.end());
  const double steady = percentile(second_half, 50);
  std::size_t start = 0;
  while (start + window <= n / 2) {
    const std::vector<double> w(max_step_ms.begin() + static_cast<long>(start),
                                max_step_ms.begin() + static_cast<long>(start + window));
    if (std::abs(percentile(w, 50) - steady) <= 0.05 * steady) break;
    ++start;
  }
  if (start + window > n / 2) return static_cast<int>(n / 2);  // never settled: half the run
  // A window's median passes over a lone slow first step (the process's start, a first CUDA
  // use): one far slower than the settled half is warm-up too.
  const double far = far_slower(second_half);
  while (start < n / 2 && max_step_ms[start] > far) ++start;
  return static_cast<int>(start);
}

namespace {

// The run's rows of `count` steps from its `first` on (both counted from the run's first row).
PolicyRun from_step(const PolicyRun& run, int first, int count = std::numeric_limits<int>::max()) {
  PolicyRun tail = run;
  const auto G = static_cast<std::size_t>(run.G);
  const auto skip = std::min(tail.rows.size(), static_cast<std::size_t>(first) * G);
  tail.rows.erase(tail.rows.begin(), tail.rows.begin() + static_cast<long>(skip));
  if (tail.rows.size() / G > static_cast<std::size_t>(count)) tail.rows.resize(static_cast<std::size_t>(count) * G);
  if (tail.decision_us.size() > static_cast<std::size_t>(first))
    tail.decision_us.erase(tail.decision_us.begin(), tail.decision_us.begin() + first);
  else
    tail.decision_us.clear();
  if (tail.decision_us.size() > static_cast<std::size_t>(count))
    tail.decision_us.resize(static_cast<std::size_t>(count));
  return tail;
}

// The step numbers a run holds, [first, end): a resumed run's trace starts late.
std::pair<int, int> step_numbers(const PolicyRun& run) {
  const int first = run.rows.front().step;
  return {first, first + static_cast<int>(run.rows.size() / static_cast<std::size_t>(run.G))};
}

// Each phase's mean per rank-step where the trace measured it; `rest` is what a step's wall time
// holds beyond its phases (measured by ddptrain: the policy's decision and the batch's assembly;
// replayed: a rank's wait for the others to start the step).
std::vector<PhaseFigures> phase_figures(const PolicyRun& measured, const PolicyRun& predicted) {
  struct Phase {
    const char* name;
    double (*ms)(const RankStep&);
    bool relative;  // the rest, often near 0 ms, has its error in ms
  };
  static constexpr Phase phases[] = {
      {"forward", [](const RankStep& r) { return r.fwd_ms; }, true},
      {"backward", [](const RankStep& r) { return r.bwd_ms; }, true},
      {"comm wait", [](const RankStep& r) { return r.comm_wait_ms; }, true},
      {"optimizer", [](const RankStep& r) { return r.opt_ms; }, true},
      {"rest", [](const RankStep& r) { return r.step_ms - r.fwd_ms - r.bwd_ms - r.comm_wait_ms - r.opt_ms; }, false}};
  std::vector<PhaseFigures> out;
  for (const Phase& phase : phases) {
    double measured_sum = 0, predicted_sum = 0;
    long n = 0;
    for (std::size_t i = 0; i < measured.rows.size(); ++i) {
      const double m = phase.ms(measured.rows[i]), p = phase.ms(predicted.rows[i]);
      if (std::isnan(m) || std::isnan(p)) continue;
      measured_sum += m, predicted_sum += p, ++n;
    }
    if (n > 0 && (!phase.relative || measured_sum > 0))
      out.push_back({phase.name, measured_sum / n, predicted_sum / n, phase.relative});
  }
  return out;
}

PolicyValidation compare(const PolicyRun& measured_run, const PolicyRun& predicted_run, const std::string& path,
                         int first, int count = std::numeric_limits<int>::max()) {
  for (const auto& r : measured_run.rows)
    if (std::isnan(r.step_ms))
      throw InputError(path + ": policy " + measured_run.label + ", step " + std::to_string(r.step) + ", rank " +
                       std::to_string(r.rank) + ": step_ms is empty; validation needs measured step times");
  const PolicyRun measured = from_step(measured_run, first, count), predicted = from_step(predicted_run, first, count);
  if (measured.rows.empty())
    throw InputError(path + ": policy " + measured_run.label + ": no step left after a warm-up of " +
                     std::to_string(first) + " steps");
  PolicyValidation v;
  v.policy = measured.label;
  v.first_step = first;
  v.measured_steps_ms = max_step_ms(measured);
  v.predicted_steps_ms = max_step_ms(predicted);
  v.step_samples = samples_per_step(measured);
  v.steps = static_cast<int>(v.measured_steps_ms.size());
  const TokenSummary m = summarize(measured), p = summarize(predicted);
  v.measured_mean_ms = m.mean_max_step_ms, v.predicted_mean_ms = p.mean_max_step_ms;
  v.measured_p95_ms = m.p95_max_step_ms, v.predicted_p95_ms = p.p95_max_step_ms;
  v.measured_samples_per_s = m.mean_samples_per_s, v.predicted_samples_per_s = p.mean_samples_per_s;
  v.mean_error_pct = 100 * (v.predicted_mean_ms - v.measured_mean_ms) / v.measured_mean_ms;
  v.p95_error_pct = 100 * (v.predicted_p95_ms - v.measured_p95_ms) / v.measured_p95_ms;
  std::vector<double> ape, abs_error;
  for (std::size_t i = 0; i < v.measured_steps_ms.size(); ++i) {
    abs_error.push_back(std::abs(v.predicted_steps_ms[i] - v.measured_steps_ms[i]));
    ape.push_back(100 * abs_error.back() / v.measured_steps_ms[i]);
  }
  v.step_mape_pct = mean(ape);
  v.step_p95_abs_error_ms = percentile(abs_error, 95);
  v.measured_mean_ci = mean_interval(v.measured_steps_ms);
  v.measured_p95_ci = p95_interval(v.measured_steps_ms);
  v.phases = phase_figures(measured, predicted);
  std::vector<double> opt;
  for (const auto& r : measured.rows)
    if (!std::isnan(r.opt_ms)) opt.push_back(r.opt_ms);
  if (!opt.empty()) v.measured_optimizer_median_ms = percentile(opt, 50);
  return v;
}

// Steady-state and all-steps figures of one measured run against its replay.
std::pair<PolicyValidation, PolicyValidation> compare_both(const PolicyRun& measured, const PolicyRun& predicted,
                                                           const std::string& path, int warmup) {
  const int first = warmup == AUTO_WARMUP ? settled_step(max_step_ms(measured)) : warmup;
  return {compare(measured, predicted, path, first), compare(measured, predicted, path, 0)};
}

// Traces of one process that trained its policies in turn (ddptrain, zero1_pytorch.py --interleaved):
// the same session, with `interleaved`.
bool trained_in_turn(const Trace& a, const Trace& b) {
  return a.metadata.count("interleaved") &&
         session_key(a.path, a.metadata, false) == session_key(b.path, b.metadata, false);
}

// The replays a validation sets against the measured runs: under the config, and with its
// compute noise off (what the plan alone predicts); the latter empty where no noise is drawn.
struct Replays {
  SimulationRun measured, baseline, quiet_measured, quiet_baseline;
  struct Variant {
    std::string term;
    SimulationRun measured, baseline;
  };
  std::vector<Variant> variants;  // the model's (eval/uncertainty.hpp, model_variants)
};

// The mean of a replay's per-step max step time over `count` steps from its `first`.
double replayed_mean_ms(const PolicyRun& replayed, int first, int count) {
  return summarize(from_step(replayed, first, count)).mean_max_step_ms;
}

// Each policy's gain over the baseline, measured and predicted over the same step numbers: those
// both traces hold after both warm-ups (a policy settled at step 100 against a baseline from step
// 0, or a resumed run against a whole one, would otherwise set minutes of a drifting machine
// against others; in runs trained in turn, step k of each ran together).
// A predicted gain's prediction interval over `count` steps from each run's `first` step: the
// steps' interval widened by the variants' gains over the same steps and the model's fixed terms.
// `scale` turns the policy's step time into the baseline's samples (1 unless the gain is per sample).
GainPrediction gain_prediction(const PerfModel& model, const Replays& r, std::size_t p, int run_first, int base_first,
                               int count, double predicted, const Interval& steps, bool paired, double scale) {
  const auto gain = [&](const SimulationRun& run, const SimulationRun& base) {
    return 100 * (1 - scale * replayed_mean_ms(run.runs[p], run_first, count) /
                          replayed_mean_ms(base.runs[0], base_first, count));
  };
  std::vector<VariantGain> variants;
  for (const Replays::Variant& v : r.variants) variants.push_back({v.term, gain(v.measured, v.baseline)});
  std::vector<UncertaintyTerm> terms = variant_terms(predicted, variants);
  if (!r.quiet_measured.runs.empty())
    for (UncertaintyTerm& t : noise_term(predicted, gain(r.quiet_measured, r.quiet_baseline))) terms.push_back(t);
  const TokenSummary policy = summarize(from_step(r.measured.runs[p], run_first, count)),
                     base = summarize(from_step(r.baseline.runs[0], base_first, count));
  for (UncertaintyTerm& t : fixed_terms(model, predicted, policy, base, !paired)) terms.push_back(std::move(t));
  GainPrediction g = predict_gain(predicted, steps.low, steps.high, std::move(terms));
  g.regime = gain_regime(model, policy, base);
  g.per_sample = scale != 1.0;
  return g;
}

// The replayed mean's prediction interval over the steps `v` covers, for run `p` of the measured
// trace's replays (or the baseline's): its steps' interval, the variants and the quiet replay.
void add_step_prediction(PolicyValidation& v, const PerfModel& model, const Replays& r, std::size_t p, bool baseline) {
  const auto at = [&](const SimulationRun& run) { return replayed_mean_ms(run.runs[p], v.first_step, v.steps); };
  std::vector<VariantStep> variants;
  for (const Replays::Variant& x : r.variants) variants.push_back({x.term, at(baseline ? x.baseline : x.measured)});
  const SimulationRun& quiet = baseline ? r.quiet_baseline : r.quiet_measured;
  const Interval steps = mean_interval(v.predicted_steps_ms);
  v.predicted_mean_pi = mean_step_prediction(model, v.predicted_mean_ms, variants, quiet.runs.empty() ? NAN : at(quiet),
                                             v.predicted_mean_ms, steps.low, steps.high);
}

void add_step_predictions(Validation& v, const PerfModel& model, const Replays& r) {
  for (ValidationSet* set : {&v.steady, &v.all}) {
    for (std::size_t p = 0; p < set->policies.size(); ++p) add_step_prediction(set->policies[p], model, r, p, false);
    if (v.has_baseline) add_step_prediction(set->baseline, model, r, 0, true);
  }
}

void add_gains(ValidationSet& set, const Trace& measured, const Trace& baseline, const Replays& r, bool paired,
               const PerfModel& model) {
  set.paired = paired;
  const auto [base_first, base_end] = step_numbers(baseline.runs[0]);
  for (std::size_t p = 0; p < set.policies.size(); ++p) {
    const auto [run_first, run_end] = step_numbers(measured.runs[p]);
    const int first = std::max(run_first + set.policies[p].first_step, base_first + set.baseline.first_step);
    const int end = std::min(run_end, base_end);
    if (first >= end)
      throw InputError(baseline.path + " and " + measured.path + " (policy " + set.policies[p].policy + ") share " +
                       steps_text(std::max(run_first, base_first), end) +
                       ", but none after the warm-ups (the policy's steady state starts at step " +
                       std::to_string(run_first + set.policies[p].first_step) + ", the baseline's at step " +
                       std::to_string(base_first + set.baseline.first_step) +
                       "): a gain compares the same steps; give a shorter --warmup");
    const auto same = [&](const PolicyValidation& own, const PolicyRun& run, const PolicyRun& replayed,
                          const std::string& path, int own_first) {
      return own_first + own.first_step == first && own.steps == end - first
                 ? own
                 : compare(run, replayed, path, first - own_first, end - first);
    };
    const PolicyValidation policy =
        same(set.policies[p], measured.runs[p], r.measured.runs[p], measured.path, run_first);
    const PolicyValidation base_line =
        same(set.baseline, baseline.runs[0], r.baseline.runs[0], baseline.path, base_first);
    set.gain_from_step.push_back(first);
    set.gain_end_step.push_back(end);
    set.gain_end_cut.push_back(end < std::max(run_end, base_end));
    set.gain_restricted.push_back(set.gain_end_cut.back() || first > std::min(run_first + set.policies[p].first_step,
                                                                              base_first + set.baseline.first_step));
    const double samples = mean(policy.step_samples), base_samples = mean(base_line.step_samples);
    const bool per_sample = changes_samples_per_step(samples, base_samples);
    const double scale = per_sample ? base_samples / samples : 1.0;
    set.gain_per_sample.push_back(per_sample);
    set.measured_gain_pct.push_back(100 * (1 - scale * policy.measured_mean_ms / base_line.measured_mean_ms));
    set.predicted_gain_pct.push_back(100 * (1 - scale * policy.predicted_mean_ms / base_line.predicted_mean_ms));
    set.predicted_quiet_gain_pct.push_back(
        r.quiet_measured.runs.empty()
            ? std::nan("")
            : 100 * (1 - scale * replayed_mean_ms(r.quiet_measured.runs[p], first - run_first, end - first) /
                             replayed_mean_ms(r.quiet_baseline.runs[0], first - base_first, end - first)));
    const auto interval = [&](const std::vector<double>& own, const std::vector<double>& base) {
      return per_sample ? gain_interval_per_sample(own, policy.step_samples, base, base_line.step_samples, paired)
                        : gain_interval(own, base, paired);
    };
    set.measured_gain_ci.push_back(interval(policy.measured_steps_ms, base_line.measured_steps_ms));
    set.predicted_gain_ci.push_back(interval(policy.predicted_steps_ms, base_line.predicted_steps_ms));
    set.predicted_gain_pi.push_back(gain_prediction(model, r, p, first - run_first, first - base_first, end - first,
                                                    set.predicted_gain_pct.back(), set.predicted_gain_ci.back(), paired,
                                                    scale));
  }
}

// Both traces are checked before either is simulated: an error is cheaper, and clearer, then.
void check_baseline(const Trace& measured, const Trace& baseline) {
  if (baseline.runs.size() != 1)
    throw InputError(baseline.path + ": a baseline trace holds one policy, this one " +
                     std::to_string(baseline.runs.size()));
  for (const auto& run : measured.runs)
    if (run.G != baseline.runs[0].G)
      throw InputError(baseline.path + ": " + std::to_string(baseline.runs[0].G) + " ranks, " + measured.path + " " +
                       std::to_string(run.G) + ": a gain compares runs of one world size");
  const auto b = baseline.metadata.find("global_batch"), m = measured.metadata.find("global_batch");
  if (b != baseline.metadata.end() && m != measured.metadata.end() && b->second != m->second)
    throw InputError(baseline.path + ": global_batch=" + b->second + ", " + measured.path +
                     " global_batch=" + m->second +
                     ": a gain compares runs of one global batch (step times of other batches differ "
                     "for that alone; to score batch sizes against each other, register them with compare "
                     "--against and score with validate --registered --column)");
  if (measured.runs.front().packed != baseline.runs[0].packed) {
    const auto mode = [](const Trace& t) { return t.runs.front().packed ? " packed sequences" : " padded batches"; };
    throw InputError(baseline.path + mode(baseline) + ", " + measured.path + mode(measured) +
                     ": a gain compares runs of one attention (to score padded against packed, register them with "
                     "compare --against and score with validate --registered --column)");
  }
  const auto [base_first, base_end] = step_numbers(baseline.runs[0]);
  for (const auto& run : measured.runs)
    if (const auto [first, end] = step_numbers(run); std::max(first, base_first) >= std::min(end, base_end))
      throw InputError(baseline.path + " holds " + steps_text(base_first, base_end) + ", " + measured.path +
                       " (policy " + run.label + ") " + steps_text(first, end) +
                       ": they share no step, and a gain compares the runs over the same steps");
}

}  // namespace

Validation validate(const Trace& measured, const Config& config, const Trace* baseline, int warmup) {
  if (baseline) check_baseline(measured, *baseline);
  if (baseline && !can_simulate_again(config))
    throw UsageError(std::string("--baseline replays a second trace, and ") + kXmlOncePerProcess +
                     ": validate each trace alone (without --baseline) on this platform, or give the gain's "
                     "platform by its figures (--set platform.topology=pcie|nvlink|cluster ...)");
  Validation v;
  // Policies trained in turn share one process's warm-up (allocator, caches, thread pools): a
  // run whose median settles early can still carry that start's slow tail, so every run starts
  // where the last of them settles.
  if (warmup == AUTO_WARMUP && baseline && trained_in_turn(measured, *baseline)) {
    warmup = settled_step(max_step_ms(baseline->runs[0]));
    for (const auto& run : measured.runs) warmup = std::max(warmup, settled_step(max_step_ms(run)));
    v.shared_warmup = warmup;
  }
  Replays r;
  r.measured = replay(measured, config);
  for (std::size_t p = 0; p < measured.runs.size(); ++p) {
    auto [steady, all] = compare_both(measured.runs[p], r.measured.runs[p], measured.path, warmup);
    v.steady.policies.push_back(std::move(steady));
    v.all.policies.push_back(std::move(all));
  }
  if (baseline) r.baseline = replay(*baseline, config);
  if (draws_compute_noise(config) && can_simulate_again(config)) {
    r.quiet_measured = replay(measured, without_compute_noise(config));
    if (baseline) r.quiet_baseline = replay(*baseline, without_compute_noise(config));
  }
  for (const ConfigVariant& variant : model_variants(config))
    r.variants.push_back({variant.term, replay(measured, variant.config),
                          baseline ? replay(*baseline, variant.config) : SimulationRun{}});
  v.has_baseline = baseline != nullptr;
  if (!baseline) {
    add_step_predictions(v, *config.model, r);
    return v;
  }
  std::tie(v.steady.baseline, v.all.baseline) =
      compare_both(baseline->runs[0], r.baseline.runs[0], baseline->path, warmup);
  for (ValidationSet* set : {&v.steady, &v.all})
    add_gains(*set, measured, *baseline, r, trained_in_turn(measured, *baseline), *config.model);
  add_step_predictions(v, *config.model, r);
  return v;
}

}  // namespace ddpsim
