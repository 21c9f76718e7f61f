#include "calib/calibrate.hpp"

#include "calib/noise_fit.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "common/split.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

using Shape = std::pair<double, double>;  // (b, L), or a packed step's (Σ s, Σ s²)

FitQuality quality(const std::vector<double>& measured, const std::vector<double>& predicted) {
  FitQuality q;
  q.points = static_cast<long>(measured.size());
  const double m = mean(measured);
  double ss_res = 0, ss_tot = 0, ape = 0;
  for (std::size_t i = 0; i < measured.size(); ++i) {
    ss_res += (measured[i] - predicted[i]) * (measured[i] - predicted[i]);
    ss_tot += (measured[i] - m) * (measured[i] - m);
    ape += measured[i] != 0 ? std::abs(predicted[i] - measured[i]) / std::abs(measured[i]) : 0;
  }
  q.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  q.mape = measured.empty() ? 0 : ape / double(measured.size());
  return q;
}

// The DDP buckets a profile names ("# ddp_buckets=B1,B2,..."), as how many of each size a step
// reduces.
std::map<double, int> ddp_buckets(const Trace& t) {
  std::map<double, int> sizes;
  const auto it = t.metadata.find("ddp_buckets");
  if (it == t.metadata.end()) return sizes;
  for (const std::string& item : split_commas(it->second)) {
    if (item.empty() || item.size() > 15 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::stod(item) < 1)
      throw InputError(t.path + ": metadata ddp_buckets=" + printable(it->second) +
                       ": expected bucket sizes in bytes (positive integers) separated by commas");
    ++sizes[std::stod(item)];
  }
  return sizes;
}

// The allreduce rows of every trace that has them, fitted as t = c0 + c1·S (those timed beside
// a backward pass are interference rows). The engine takes one α–β per link, and measured times
// are not a line (on a CPU, 1.3 MB took 0.9 ms, 1 MiB 3.6 ms, 43 MB 47 ms): a line through every
// size put a step's last bucket, the one left exposed after backward, 10% short. So where the
// profile timed at least two of its DDP bucket sizes, the line is fitted at those, by absolute
// error weighted by each size's count, because a step's bucket times add up (by relative error
// the 1.3 MB bucket pulled the 43 MB one 28% short).
void fit_allreduce(const std::vector<Trace>& traces, Calibration& c) {
  std::vector<double> bytes, ms;
  std::map<double, int> buckets;  // size -> count in a step
  std::string files;              // the traces that have them
  int G = 0;
  for (const Trace& t : traces) {
    int ranks = 0;
    for (const auto& run : t.runs)
      for (const RankStep& r : run.rows)
        if (!std::isnan(r.allreduce_ms) && !std::isnan(r.allreduce_bytes) && std::isnan(r.bwd_ms)) {
          if (!ranks) {
            const auto it = t.metadata.find("world_size");
            ranks = it == t.metadata.end() ? 0 : std::atoi(it->second.c_str());
            if (ranks < 2)
              throw InputError(t.path + ": allreduce rows need a \"# world_size=N\" metadata line with N ≥ 2");
            if (G && ranks != G)
              throw InputError(t.path + ": allreduce rows of " + std::to_string(ranks) + " ranks mixed with " +
                               std::to_string(G) + ": calibrate one world size at a time");
            G = ranks;
            files += (files.empty() ? "" : ", ") + t.path;
            for (const auto& [size, count] : ddp_buckets(t)) buckets[size] = std::max(buckets[size], count);
          }
          bytes.push_back(r.allreduce_bytes);
          ms.push_back(r.allreduce_ms);
        }
  }
  if (bytes.empty()) return;
  if (std::set<double>(bytes.begin(), bytes.end()).size() < 2)
    throw InputError(files +
                     ": allreduce rows of a single size: the α–β fit needs at least two sizes (--profile-bytes)");
  // One median per size; elsewhere than at the buckets, relative error as for compute (the sizes
  // span three orders of magnitude).
  std::map<double, std::vector<double>> by_size;
  for (std::size_t i = 0; i < bytes.size(); ++i) by_size[bytes[i]].push_back(ms[i]);
  c.allreduce_at_buckets =
      std::count_if(by_size.begin(), by_size.end(), [&](const auto& entry) { return buckets.count(entry.first); }) >= 2;
  c.allreduce_buckets_named = static_cast<int>(buckets.size());
  c.allreduce_fitted_bytes.clear();
  std::vector<std::vector<double>> rows;
  std::vector<double> y;
  for (const auto& [size, times] : by_size) {
    if (c.allreduce_at_buckets && !buckets.count(size)) continue;
    const double median = percentile(times, 50);
    const double w = c.allreduce_at_buckets ? std::sqrt(buckets[size]) : median > 0 ? 1 / median : 1;
    rows.push_back({w, w * size});
    y.push_back(w * median);
    c.allreduce_fitted_bytes.push_back(size);
  }
  const auto coef = nnls(rows, y);
  // A time that does not grow with size (latency-bound sizes, or noise) resolves no bandwidth:
  // the fit keeps its latency and says so, rather than advising a bandwidth of 0.
  const double link_GBps = coef[1] > 0 ? 2.0 * (G - 1) / G / (coef[1] * 1e-3) / 1e9 : 0;
  c.allreduce_link_GBps = link_GBps >= 1e-6 && link_GBps <= 1e6 ? link_GBps : std::nan("");
  c.allreduce_sizes = std::to_string(by_size.size()) + " sizes from " +
                      std::to_string(static_cast<long long>(by_size.begin()->first)) + " to " +
                      std::to_string(static_cast<long long>(by_size.rbegin()->first)) + " bytes";
  std::vector<double> predicted, fitted_measured, fitted_predicted;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const double p = coef[0] + coef[1] * bytes[i];
    predicted.push_back(p);
    if (!c.allreduce_at_buckets || buckets.count(bytes[i])) {
      fitted_measured.push_back(ms[i]);
      fitted_predicted.push_back(p);
    }
  }
  c.has_allreduce = true;
  c.allreduce_ranks = G;
  c.allreduce_step_latency_us = coef[0] * 1e3 / (2.0 * (G - 1));
  c.allreduce = quality(fitted_measured, fitted_predicted);
  c.allreduce_all_sizes = quality(ms, predicted);
}

// Interference rows, both ways: per shape, the median backward beside allreduces over the
// median alone (comm_slowdown); per size, the median allreduce beside a backward pass over the
// median alone (allreduce_slowdown). Each factor is the geometric mean of its ratios, at least 1.
void fit_interference(const std::vector<Trace>& traces, Calibration& c) {
  using Times = std::pair<std::vector<double>, std::vector<double>>;  // alone, beside the other
  std::map<std::pair<int, int>, Times> shapes;
  std::map<double, Times> sizes;
  for (const Trace& t : traces)
    for (const auto& run : t.runs)
      for (const RankStep& r : run.rows) {
        if (!std::isnan(r.concurrent_allreduce_bytes) && !std::isnan(r.bwd_ms)) {
          auto& [alone, beside] = shapes[{r.batch_size, r.max_len}];
          (r.concurrent_allreduce_bytes > 0 ? beside : alone).push_back(r.bwd_ms);
        }
        if (!std::isnan(r.allreduce_bytes) && !std::isnan(r.allreduce_ms)) {
          auto& [alone, beside] = sizes[r.allreduce_bytes];
          (std::isnan(r.bwd_ms) ? alone : beside).push_back(r.allreduce_ms);
        }
      }
  auto factor = [](const std::vector<Calibration::Interference>& pairs) {
    std::vector<double> log_ratios;
    for (const auto& p : pairs) log_ratios.push_back(std::log(p.beside_ms / p.alone_ms));
    return log_ratios.empty() ? 1.0 : std::max(1.0, std::exp(mean(log_ratios)));
  };
  auto medians = [](const Times& times, Calibration::Interference& s) {
    if (times.first.empty() || times.second.empty()) return false;
    s.alone_ms = percentile(times.first, 50);
    s.beside_ms = percentile(times.second, 50);
    return s.alone_ms > 0 && s.beside_ms > 0;
  };
  for (const auto& [shape, times] : shapes) {
    Calibration::Interference s{shape.first, shape.second, 0, 0, 0};
    if (medians(times, s)) c.compute_beside_comm.push_back(s);
  }
  for (const auto& [bytes, times] : sizes) {
    Calibration::Interference s{0, 0, bytes, 0, 0};
    if (medians(times, s)) c.comm_beside_compute.push_back(s);
  }
  c.comm_slowdown = factor(c.compute_beside_comm);
  c.allreduce_slowdown = factor(c.comm_beside_compute);
}

// A phase's poor figure (PhaseFit's thresholds), else "".
std::string fit_warning(const char* phase, const PhaseFit& p) {
  char figure[200];
  if (p.heldout_in_use() > kPoorHeldoutMape)
    std::snprintf(figure, sizeof figure, "held-out MAPE %.1f%% of the %s form (poor above %.0f%%)",
                  100 * p.heldout_in_use(), p.model.form(), 100 * kPoorHeldoutMape);
  else if (p.quality.r2 < kPoorR2 && p.median_spread > kShapeSpread)
    std::snprintf(figure, sizeof figure,
                  "R² %.2f over the rows where the shapes' medians spread by %.0f%% (poor below %.2f)", p.quality.r2,
                  100 * p.median_spread, kPoorR2);
  else
    return "";
  return std::string(phase) + ": " + figure;
}

}  // namespace

std::string fit_warning_text(const Calibration& c) {
  if (c.fit_warnings.empty()) return "";
  std::string figures;
  for (const std::string& w : c.fit_warnings) figures += (figures.empty() ? "" : "; ") + w;
  return "fits poorly (" + figures +
         "): its predictions miss shapes it was not fitted to by about that much. Remedies: more repetitions "
         "(ddptrain --profile-reps), a quieter machine, a grid that reaches the shapes trained (--profile-batches, "
         "--profile-lengths), or a profile taken alongside training (--profile-alongside)";
}

Calibration calibrate(const std::vector<Trace>& traces, const CalibrationOptions& options) {
  if (options.form != "auto" && options.form != "analytic" && options.form != "grid" && options.form != "roofline")
    throw UsageError("--form is auto, analytic, grid or roofline, got \"" + options.form + "\"");
  Calibration c;
  std::vector<std::pair<int, int>> bl, mem_bl;
  std::vector<std::pair<double, double>> work, mem_work;  // (Σ s, Σ s²) of packed rows
  std::vector<double> fwd, bwd, opt, mem;
  std::vector<long> step_ids;  // rows of one step of one run share an id: they were timed together
  std::vector<int> rank_of;
  long step_id = -1, micro_rows = 0;
  std::string names, padded_trace, packed_trace;
  for (const Trace& t : traces) {
    names += (names.empty() ? "" : ", ") + t.path;
    for (const auto& run : t.runs)
      for (std::size_t i = 0; i < run.rows.size(); ++i) {
        const RankStep& r = run.rows[i];
        if (i == 0 || r.step != run.rows[i - 1].step) ++step_id;
        c.half_timed_rows += std::isnan(r.fwd_ms) != std::isnan(r.bwd_ms);
        // A step of several micro-batches times several shapes at once: no point of the fit.
        micro_rows += !r.micro.empty();
        if (std::isnan(r.fwd_ms) || std::isnan(r.bwd_ms) || r.batch_size < 1 || !r.micro.empty()) continue;
        (run.packed ? packed_trace : padded_trace) = t.path;
        bl.emplace_back(r.batch_size, r.max_len);
        work.emplace_back(double(r.real_tokens), double(r.sq_tokens));
        step_ids.push_back(step_id);
        rank_of.push_back(r.rank);
        fwd.push_back(r.fwd_ms);
        bwd.push_back(r.bwd_ms);
        if (!std::isnan(r.opt_ms)) opt.push_back(r.opt_ms);
        if (!std::isnan(r.peak_mem_mib)) {
          mem_bl.emplace_back(r.batch_size, r.max_len);
          mem_work.emplace_back(double(r.real_tokens), double(r.sq_tokens));
          mem.push_back(r.peak_mem_mib);
        }
      }
  }
  // Times of 0 everywhere are a broken timer, not a free device: fitting them gives a model of zeros.
  for (const auto& [phase, ms] : {std::pair{"fwd_ms", &fwd}, std::pair{"bwd_ms", &bwd}})
    if (!ms->empty() && std::none_of(ms->begin(), ms->end(), [](double v) { return v > 0; }))
      throw InputError(names + ": every " + phase + " is 0 (" + std::to_string(ms->size()) +
                       " rows): nothing to fit; were the times measured?");
  if (!padded_trace.empty() && !packed_trace.empty())
    throw InputError(packed_trace + " measured packed sequences and " + padded_trace +
                     " padded ones: calibrate one attention mode at a time");
  c.packed = !packed_trace.empty();
  fit_allreduce(traces, c);
  fit_interference(traces, c);
  auto medians = [&](const std::vector<double>& ms) {
    return c.packed ? packed_medians(work, ms) : shape_medians(bl, ms);
  };
  const std::vector<ShapePoint> fwd_points = medians(fwd), bwd_points = medians(bwd);
  c.distinct_points = static_cast<int>(fwd_points.size());
  std::set<double> tokens, shapes;  // what β and γ multiply must vary independently
  const std::string micro_note = micro_rows ? " (" + std::to_string(micro_rows) +
                                                  " row(s) left out: each timed its micro-batches together, column "
                                                  "micro_batches, which is no single shape)"
                                            : "";
  for (const ShapePoint& p : fwd_points) tokens.insert(p.tokens()), shapes.insert(p.pairs() / p.tokens());
  if (c.packed && (fwd_points.size() < 3 || tokens.size() < 2 || shapes.size() < 2))
    throw InputError(names + ": " + std::to_string(fwd_points.size()) + " distinct (Σ s, Σ s²) point(s)" + micro_note +
                     ": fitting a + β·Σs + γ·Σs² needs at least 3 with 2 or more "
                     "token counts and Σ s² / Σ s ratios; add steps of other sizes and length mixes");
  if (!c.packed && (fwd_points.size() < 3 || shapes.size() < 2 || tokens.size() < 2))
    throw InputError(names + ": " + std::to_string(fwd_points.size()) +
                     " distinct (batch size, length) point(s) with " + std::to_string(shapes.size()) +
                     " distinct length(s) and " + std::to_string(tokens.size()) + " distinct padded-token count(s)" +
                     micro_note +
                     ": fitting a + β·b·L + γ·b·L² needs at least 3 "
                     "points with 2 or more lengths and padded-token counts; add steps with other batch sizes and "
                     "lengths (a dynamic policy's trace, or a ddptrain --profile sweep)");
  auto fit = [&](const std::vector<ShapePoint>& points) {
    PhaseFit p;
    p.shapes = static_cast<int>(points.size());
    p.heldout = heldout_error(points, options.folds, options.seed);
    p.model = fit_phase(points, p.heldout, options.form);
    std::vector<double> medians;
    for (const ShapePoint& point : points) medians.push_back(point.ms);
    p.median_spread = mean(medians) > 0 ? population_std(medians) / mean(medians) : 0;
    return p;
  };
  c.forward = fit(fwd_points);
  c.backward = fit(bwd_points);

  // A phase's prediction for row i: at its (b, L), or at its (Σ s, Σ s²) when packed.
  auto predict = [&](const PhaseModel& m, std::size_t i) {
    return c.packed ? m.packed(work[i].first, work[i].second) : m.at(bl[i].first, bl[i].second);
  };
  // Each row's log of measured over the surface, grouped by shape and rank (calib/noise_fit.hpp).
  using Group = std::pair<Shape, int>;
  std::vector<double> ratio, logs;
  std::vector<std::pair<long, Group>> row_group;
  std::map<Group, std::vector<double>> log_ratios;
  for (std::size_t i = 0; i < bl.size(); ++i) {
    const double predicted = predict(c.forward.model, i) + predict(c.backward.model, i);
    if (predicted <= 0 || fwd[i] + bwd[i] <= 0) continue;
    ratio.push_back((fwd[i] + bwd[i]) / predicted);
    logs.push_back(std::log(ratio.back()));
    row_group.emplace_back(step_ids[i], Group(c.packed ? work[i] : Shape(bl[i].first, bl[i].second), rank_of[i]));
    log_ratios[row_group.back().second].push_back(logs.back());
  }
  NoiseSample sample;
  std::map<Group, int> group_index;
  std::map<Shape, int> shape_index;  // numbered in the order of the shapes
  for (auto& [group, values] : log_ratios) {
    const Shape& shape = group.first;
    const long long tokens = c.packed ? std::llround(shape.first) : std::llround(shape.first * shape.second);
    const int id = shape_index.emplace(shape, static_cast<int>(shape_index.size())).first->second;
    group_index[group] = static_cast<int>(sample.groups.size());
    sample.groups.push_back({tokens, id, std::move(values)});
  }
  for (std::size_t k = 0; k < logs.size(); ++k)
    sample.rows.push_back({row_group[k].first, group_index[row_group[k].second], logs[k]});
  fit_noise(sample, options, c);
  c.session = fit_session(traces, c.regimes.knee_tokens);
  for (PhaseModel* m : {&c.forward.model, &c.backward.model}) {
    for (PhaseTime* t : {&m->analytic, &m->roofline.compute})
      t->a_ms *= c.mean_scale, t->beta_ms *= c.mean_scale, t->gamma_ms *= c.mean_scale;
    m->roofline.floor_ms *= c.mean_scale;
    for (auto& row : m->grid.ms)
      for (double& t : row) t *= c.mean_scale;
  }
  c.observed_p95_over_p50 = ratio.empty() ? 1.0 : percentile(ratio, 95) / percentile(ratio, 50);

  std::vector<double> pf, pb;
  for (std::size_t i = 0; i < bl.size(); ++i) {
    const auto [b, L] = bl[i];
    pf.push_back(predict(c.forward.model, i));
    pb.push_back(predict(c.backward.model, i));
    c.residuals.push_back({"forward", b, L, fwd[i], pf.back()});
    c.residuals.push_back({"backward", b, L, bwd[i], pb.back()});
  }
  c.forward.quality = quality(fwd, pf);
  c.backward.quality = quality(bwd, pb);
  for (const auto& [name, phase] : {std::pair{"forward", &c.forward}, std::pair{"backward", &c.backward}})
    if (std::string w = fit_warning(name, *phase); !w.empty()) c.fit_warnings.push_back(std::move(w));
  c.optimizer_ms = mean(opt);
  if (mem.size() >= 3) {
    const PhaseTime m = fit_analytic(c.packed ? packed_medians(mem_work, mem) : shape_medians(mem_bl, mem));
    c.has_memory = true;
    c.mem_m0 = m.a_ms, c.mem_mu = m.beta_ms, c.mem_nu = m.gamma_ms;
    std::vector<double> pm;
    for (std::size_t i = 0; i < mem.size(); ++i)
      pm.push_back(c.packed ? m.packed(mem_work[i].first, mem_work[i].second)
                            : m.at(mem_bl[i].first, mem_bl[i].second));
    c.memory = quality(mem, pm);
  }
  return c;
}

std::vector<PhaseForm> supported_forms(const Calibration& c) {
  const auto heldout = [](const PhaseFit& p, PhaseForm form) {
    return form == PhaseForm::grid       ? p.heldout.grid
           : form == PhaseForm::roofline ? p.heldout.roofline
                                         : p.heldout.analytic;
  };
  std::vector<PhaseForm> forms;
  for (PhaseForm form : {PhaseForm::analytic, PhaseForm::roofline, PhaseForm::grid}) {
    bool near = true;
    for (const PhaseFit* p : {&c.forward, &c.backward}) {
      const double in_use = p->heldout_in_use();
      near = near && p->model.has(form) && p->heldout.folds > 0 &&
             heldout(*p, form) <= std::max(kFormSupportRatio * in_use, in_use + kFormSupportMargin);
    }
    if (near) forms.push_back(form);
  }
  return forms;
}

}  // namespace ddpsim
