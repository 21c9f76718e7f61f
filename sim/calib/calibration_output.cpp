// A calibration written out: the model JSON (with its sources and fit quality) and the
// report calibrate prints.
#include "calib/calibrate.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "common/split.hpp"
#include "common/stats.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

nlohmann::ordered_json calibrated_model(const Calibration& c, const std::vector<Trace>& traces, const PerfModel& base,
                                        const std::string& name, const std::string& gpu) {
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  const std::string files = trace_names(traces);
  for (const Trace& t : traces) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : t.metadata) meta[k] = v;
    sources.push_back({{"file", t.path}, {"fnv1a64", t.hash}, {"rows", t.rows}, {"metadata", meta}});
  }
  auto phase = [](const PhaseModel& p) {
    nlohmann::ordered_json j = {
        {"a", p.analytic.a_ms}, {"beta", p.analytic.beta_ms}, {"gamma", p.analytic.gamma_ms}, {"form", p.form()}};
    if (!p.grid.empty()) j["grid"] = {{"b", p.grid.b}, {"L", p.grid.L}, {"ms", p.grid.ms}};
    if (p.has_roofline)
      j["roofline"] = {{"floor", p.roofline.floor_ms},
                       {"a", p.roofline.compute.a_ms},
                       {"beta", p.roofline.compute.beta_ms},
                       {"gamma", p.roofline.compute.gamma_ms}};
    return j;
  };
  auto fit = [](const FitQuality& q) {
    return nlohmann::ordered_json{{"points", q.points}, {"r2", q.r2}, {"mape", q.mape}};
  };
  auto phase_fit = [&](const PhaseFit& p) {
    auto j = fit(p.quality);
    j["shapes"] = p.shapes;
    j["form"] = p.model.form();
    j["heldout_mape"] = {{"analytic", p.heldout.analytic},
                         {"grid", p.heldout.grid},
                         {"roofline", p.heldout.roofline},
                         {"folds", p.heldout.folds}};
    return j;
  };
  nlohmann::ordered_json m;
  m["name"] = name;
  m["gpu"] = gpu;
  m["source"] = "calibrated by ddpsim calibrate from " + files + " (" + std::to_string(c.distinct_points) +
                (c.packed ? " distinct (Σs, Σs²) points of packed sequences" : " distinct (b, L) points") +
                "); parameter layout" + (c.has_memory ? "" : ", memory model") + " and memory capacity from " +
                base.name;
  m["forward_ms"] = phase(c.forward.model);
  m["backward_ms"] = phase(c.backward.model);
  m["optimizer_ms"] = c.optimizer_ms;
  m["comm_slowdown"] = c.comm_slowdown;
  m["allreduce_slowdown"] = c.allreduce_slowdown;
  m["fit_quality"] = {{"heldout_mape", std::max(c.forward.heldout_in_use(), c.backward.heldout_in_use())}};
  if (!c.fit_warnings.empty()) m["fit_quality"]["warning"] = fit_warning_text(c);
  if (c.session.fitted())
    m["session"] = {{"below_pp", c.session.below_pp}, {"above_pp", c.session.above_pp}, {"source", c.session.source}};
  auto& supported = m["fit_quality"]["supported_forms"] = nlohmann::ordered_json::array();
  for (PhaseForm form : supported_forms(c)) supported.push_back(form_name(form));
  m["noise"] = {{"sigma", c.noise_sigma}, {"shared_sigma", c.noise_shared_sigma}};
  if (!c.spell_quantiles.empty()) m["noise"]["spells"] = c.spell_quantiles;
  if (c.regimes.knee_tokens > 0) {
    auto& above = m["noise"]["above"];
    above = {{"tokens", c.regimes.knee_tokens},
             {"sigma", c.noise_above_sigma},
             {"shared_sigma", c.noise_above_shared_sigma}};
    if (!c.spell_quantiles_above.empty()) above["spells"] = c.spell_quantiles_above;
  }
  m["memory_mib"] = {{"m0", c.has_memory ? c.mem_m0 : base.mem_m0_mib},
                     {"mu", c.has_memory ? c.mem_mu : base.mem_mu_mib},
                     {"nu", c.has_memory ? c.mem_nu : base.mem_nu_mib},
                     {"capacity", base.mem_capacity_mib}};
  m["gradient_bytes_per_param"] = base.bytes_per_param;
  if (!base.precision.empty()) m["precision"] = base.precision;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& l : base.layers)
    layers.push_back({{"name", l.name}, {"params", l.params}, {"bwd_fraction", l.bwd_fraction}});
  m["layers"] = layers;
  // The network the allreduce rows measured, so that a replay with this model simulates it
  // without the user copying figures into --set (a pcie platform with no root-complex limit:
  // each rank's link alone, as the ring fit describes).
  if (c.has_allreduce && !std::isnan(c.allreduce_link_GBps)) {
    char fitted[160];
    std::snprintf(fitted, sizeof fitted,
                  "fitted by ddpsim calibrate: a ring allreduce over %d ranks, %.4g GB/s per link and %.3g us per "
                  "ring step, from ",
                  c.allreduce_ranks, c.allreduce_link_GBps, c.allreduce_step_latency_us);
    const std::string source = fitted + files;
    m["platform"] = {{"topology", "pcie"},
                     {"link_GBps", c.allreduce_link_GBps},
                     {"latency_us", c.allreduce_step_latency_us / 2},
                     {"host_GBps", 0},
                     {"source", source}};
  }
  nlohmann::ordered_json report = {
      {"forward", phase_fit(c.forward)},
      {"backward", phase_fit(c.backward)},
      {"mean_scale", c.mean_scale},
      {"noise_p95_over_p50", {{"observed", c.observed_p95_over_p50}, {"fitted", c.fitted_p95_over_p50}}}};
  if (c.regimes.folds > 0)
    report["noise_regimes"] = {{"knee_tokens", c.regimes.knee_tokens},
                               {"sigma_below", c.regimes.sigma_below},
                               {"sigma_above", c.regimes.sigma_above},
                               {"groups_below", c.regimes.groups_below},
                               {"groups_above", c.regimes.groups_above},
                               {"knees_tried", c.regimes.knees_tried},
                               {"folds", c.regimes.folds},
                               {"heldout_loglik_one_sigma", c.regimes.heldout_one},
                               {"heldout_loglik_two_regimes", c.regimes.heldout_two},
                               {"best_knee_tokens", c.regimes.best_knee},
                               {"p_value", c.regimes.p_value},
                               {"spells_above", c.regimes.knee_tokens == 0 ? "none"
                                                : c.spells_above_scaled    ? "scaled from below"
                                                                           : "measured"}};
  if (c.has_memory) report["memory"] = fit(c.memory);
  if (c.has_allreduce) {
    auto a = fit(c.allreduce);
    a["ranks"] = c.allreduce_ranks;
    a["ring_step_latency_us"] = c.allreduce_step_latency_us;
    a["link_GBps"] = nlohmann::ordered_json();  // null: not resolved
    if (!std::isnan(c.allreduce_link_GBps)) a["link_GBps"] = c.allreduce_link_GBps;
    a["fitted_at"] = c.allreduce_at_buckets ? "ddp_buckets" : "all sizes";
    a["fitted_bytes"] = c.allreduce_fitted_bytes;
    a["all_sizes"] = fit(c.allreduce_all_sizes);
    report["allreduce"] = a;
  }
  if (!c.compute_beside_comm.empty() || !c.comm_beside_compute.empty()) {
    nlohmann::ordered_json shapes = nlohmann::ordered_json::array(), sizes = nlohmann::ordered_json::array();
    for (const auto& s : c.compute_beside_comm)
      shapes.push_back({{"b", s.b}, {"L", s.L}, {"alone_ms", s.alone_ms}, {"beside_ms", s.beside_ms}});
    for (const auto& s : c.comm_beside_compute)
      sizes.push_back({{"bytes", s.bytes}, {"alone_ms", s.alone_ms}, {"beside_ms", s.beside_ms}});
    report["interference"] = {{"comm_slowdown", c.comm_slowdown},
                              {"backward_beside_allreduce", shapes},
                              {"allreduce_slowdown", c.allreduce_slowdown},
                              {"allreduce_beside_backward", sizes}};
  }
  m["calibration"] = {{"traces", sources}, {"fit", report}};
  return m;
}

namespace {

// How the noise's regimes were chosen: a knee of padded tokens against one σ, by held-out
// likelihood of the repetitions.
std::string regimes_line(const Calibration& c) {
  const NoiseRegimes& r = c.regimes;
  if (r.folds == 0) return "";
  char line[400];
  if (r.knee_tokens > 0)
    std::snprintf(line, sizeof line,
                  "            two regimes: σ %.4f over %d repeated shapes below %lld padded tokens, %.4f over %d from "
                  "it; held-out log-likelihood %.3f a repetition against %.3f with one σ (%d knees tried, %d folds)\n",
                  r.sigma_below, r.groups_below, r.knee_tokens, r.sigma_above, r.groups_above, r.heldout_two,
                  r.heldout_one, r.knees_tried, r.folds);
  else if (r.best_knee > 0)
    std::snprintf(line, sizeof line,
                  "            one σ for every shape: a knee at %lld padded tokens predicts held-out repetitions "
                  "better (%.3f a repetition against %.3f) but its two σ's could differ by chance (p %.2g after %d "
                  "knees; a knee needs p < %.2g)\n",
                  r.best_knee, r.heldout_two, r.heldout_one, r.p_value, r.knees_tried, kRegimeAlpha);
  else
    std::snprintf(line, sizeof line,
                  "            one σ for every shape: no knee of padded tokens predicts held-out repetitions better "
                  "(%.3f a repetition with one σ; %d knees tried, %d folds)\n",
                  r.heldout_one, r.knees_tried, r.folds);
  return line;
}

}  // namespace

std::string fit_report(const Calibration& c) {
  char line[640];
  std::string out;
  auto phase = [&](const char* name, const PhaseFit& p) {
    const PhaseTime &a = p.model.analytic, &r = p.model.roofline.compute;
    const char *tokens = c.packed ? "Σs" : "b·L", *pairs = c.packed ? "Σs²" : "b·L²";
    std::snprintf(line, sizeof line,
                  "  %-9s analytic t = %.4g + %.4g·%s + %.4g·%s ms; roofline t = max(%.4g, %.4g + %.4g·%s + %.4g·%s) "
                  "ms",
                  name, a.a_ms, a.beta_ms, tokens, a.gamma_ms, pairs, p.model.roofline.floor_ms, r.a_ms, r.beta_ms,
                  tokens, r.gamma_ms, pairs);
    out += line;
    if (c.packed)
      std::snprintf(line, sizeof line,
                    " (no grid form for packed sequences)\n"
                    "            held-out MAPE (%d folds over %d points): analytic %.2f%%, roofline %.2f%% → %s form;"
                    " over all rows R² %.4f, MAPE %.2f%% (%ld rows)\n",
                    p.heldout.folds, p.shapes, 100 * p.heldout.analytic, 100 * p.heldout.roofline, p.model.form(),
                    p.quality.r2, 100 * p.quality.mape, p.quality.points);
    else
      std::snprintf(
          line, sizeof line,
          "; grid %zu×%zu (b × L)\n"
          "            held-out MAPE (%d folds over %d shapes): analytic %.2f%%, roofline %.2f%%, grid %.2f%% → "
          "%s form; over all rows R² %.4f, MAPE %.2f%% (%ld rows)\n",
          p.model.grid.b.size(), p.model.grid.L.size(), p.heldout.folds, p.shapes, 100 * p.heldout.analytic,
          100 * p.heldout.roofline, 100 * p.heldout.grid, p.model.form(), p.quality.r2, 100 * p.quality.mape,
          p.quality.points);
    out += line;
  };
  std::snprintf(line, sizeof line,
                "fit over %d distinct %s points (one median each, relative error, bisquare-weighted)\n",
                c.distinct_points, c.packed ? "(Σs, Σs²)" : "(b, L)");
  out += line;
  if (c.half_timed_rows > 0) {
    std::snprintf(line, sizeof line, "  left out %ld row(s) with only one of fwd_ms and bwd_ms\n", c.half_timed_rows);
    out += line;
  }
  phase("forward", c.forward);
  phase("backward", c.backward);
  std::snprintf(line, sizeof line, "  optimizer %.4g ms (mean)\n", c.optimizer_ms);
  out += line;
  const double total = std::hypot(c.noise_sigma, c.noise_shared_sigma);
  char sigma[120];
  if (c.regimes.knee_tokens > 0)
    std::snprintf(sigma, sizeof sigma, "σ %.4f below %lld padded tokens a rank-step and %.4f from it", total,
                  c.regimes.knee_tokens, std::hypot(c.noise_above_sigma, c.noise_above_shared_sigma));
  else
    std::snprintf(sigma, sizeof sigma, "σ %.4f", total);
  std::snprintf(line, sizeof line,
                "  noise     log-normal %s, from %s; both phases ×%.4f, so the model gives a shape's mean"
                " time; P95/P50 of measured/predicted compute: observed %.4f, the model's %.4f\n",
                sigma, c.noise_from_repetitions ? "the repetitions of each shape on each rank" : "the residuals",
                c.mean_scale, c.observed_p95_over_p50, c.fitted_p95_over_p50);
  out += line;
  out += regimes_line(c);
  if (c.session.fitted()) {
    char line[200];
    std::snprintf(line, sizeof line,
                  "  session   a gain moves ±%.2f pp between these profiles' sessions%s: ", c.session.below_pp,
                  c.regimes.knee_tokens > 0 ? format(" (±%.2f pp from the knee)", c.session.above_pp).c_str() : "");
    out += line + c.session.source + "\n";
  }
  if (!c.spell_quantiles.empty()) {
    const auto& q = c.spell_quantiles;
    std::snprintf(line, sizeof line,
                  "            slow spells as measured: how far each of %d repeated shapes sat from the surface%s "
                  "(P50→P95 ×%.4f, →max ×%.4f; their mean ×%.4f)\n",
                  c.spell_groups,
                  c.regimes.knee_tokens > 0 && c.spell_groups == c.regimes.groups_below ? " below the knee" : "",
                  q[95] / q[50], q[100] / q[50], quantile_table_mean(q));
    out += line;
  }
  if (!c.spell_quantiles_above.empty()) {
    const auto& q = c.spell_quantiles_above;
    if (c.spells_above_scaled)
      std::snprintf(line, sizeof line,
                    "            from the knee: the spells below in proportion to the σ's (%d repeated shapes there, "
                    "too few for a table of their own; P50→P95 ×%.4f, →max ×%.4f)\n",
                    c.spell_groups_above, q[95] / q[50], q[100] / q[50]);
    else
      std::snprintf(line, sizeof line,
                    "            from the knee: as measured over %d repeated shapes (P50→P95 ×%.4f, →max ×%.4f; their "
                    "mean ×%.4f)\n",
                    c.spell_groups_above, q[95] / q[50], q[100] / q[50], quantile_table_mean(q));
    out += line;
  }
  if (c.noise_ranks > 0) {
    std::snprintf(line, sizeof line,
                  "            split over the %d ranks that timed each step at once: σ %.4f each rank's own, "
                  "σ %.4f shared by a step's ranks\n",
                  c.noise_ranks, c.noise_sigma, c.noise_shared_sigma);
    out += line;
  }
  if (c.has_memory) {
    std::snprintf(line, sizeof line, "  memory    m = %.5g + %.4g·%s + %.4g·%s MiB   R² %.4f   MAPE %.2f%%\n", c.mem_m0,
                  c.mem_mu, c.packed ? "Σs" : "b·L", c.mem_nu, c.packed ? "Σs²" : "b·L²", c.memory.r2,
                  100 * c.memory.mape);
    out += line;
  } else {
    out += "  memory    no peak_mem_mib in the traces: the base model's memory model is kept\n";
  }
  if (c.has_allreduce && std::isnan(c.allreduce_link_GBps)) {
    std::snprintf(line, sizeof line,
                  "  allreduce %d ranks, as a ring: %.3g us per step; no link bandwidth: the time does not grow "
                  "with the bytes reduced (%s): profile larger sizes (ddptrain --profile-bytes)\n",
                  c.allreduce_ranks, c.allreduce_step_latency_us, c.allreduce_sizes.c_str());
    out += line;
  } else if (c.has_allreduce) {
    std::string where = c.allreduce_at_buckets           ? "fitted at the trace's DDP bucket sizes ("
                        : c.allreduce_buckets_named >= 2 ? "fitted at every size, fewer than two of the trace's "
                                                           "DDP bucket sizes being timed (--profile-bytes auto times "
                                                           "them) ("
                                                         : "fitted at every size (";
    const auto& sizes = c.allreduce_fitted_bytes;
    if (sizes.size() > 4)
      where += std::to_string(sizes.size()) + " from " + std::to_string(static_cast<long long>(sizes.front())) +
               " to " + std::to_string(static_cast<long long>(sizes.back()));
    else
      for (std::size_t i = 0; i < sizes.size(); ++i)
        where += (i ? ", " : "") + std::to_string(static_cast<long long>(sizes[i]));
    where += " bytes)";
    std::snprintf(
        line, sizeof line,
        "  allreduce %d ranks, as a ring: %.3g us per step, %.4g GB/s per link; %s: MAPE %.2f%%, over all %s "
        "MAPE %.2f%%\n"
        "            written into the model as its platform (pcie, link_GBps %.4g, latency_us %.3g, host_GBps 0):"
        " replay, validate and run use it where a config sets no platform of its own\n",
        c.allreduce_ranks, c.allreduce_step_latency_us, c.allreduce_link_GBps, where.c_str(), 100 * c.allreduce.mape,
        c.allreduce_sizes.c_str(), 100 * c.allreduce_all_sizes.mape, c.allreduce_link_GBps,
        c.allreduce_step_latency_us / 2);
    out += line;
  }
  if (!c.compute_beside_comm.empty()) {
    std::snprintf(line, sizeof line, "  interference: backward runs ×%.4f slower beside an allreduce (comm_slowdown)",
                  c.comm_slowdown);
    out += line;
    for (const auto& s : c.compute_beside_comm) {
      std::snprintf(line, sizeof line, "; b=%d L=%d %.4g → %.4g ms", s.b, s.L, s.alone_ms, s.beside_ms);
      out += line;
    }
    out += "\n";
  }
  if (!c.comm_beside_compute.empty()) {
    std::snprintf(line, sizeof line,
                  "  interference: an allreduce runs ×%.4f slower beside backward (allreduce_slowdown)",
                  c.allreduce_slowdown);
    out += line;
    for (const auto& s : c.comm_beside_compute) {
      std::snprintf(line, sizeof line, "; %.0f bytes %.4g → %.4g ms", s.bytes, s.alone_ms, s.beside_ms);
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace ddpsim
