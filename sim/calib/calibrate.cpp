#include "calib/calibrate.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "common/error.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

// min ‖Xc − y‖ subject to c ≥ 0, for a handful of columns: the optimum is the unconstrained
// least-squares solution on some subset of the columns, so try every subset (8 for 3
// columns) and keep the best feasible one. Columns are scaled to unit norm first.
Eigen::VectorXd nnls(const Eigen::MatrixXd& X, const Eigen::VectorXd& y) {
  const auto n = X.cols();
  Eigen::VectorXd scale = X.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < n; ++j)
    if (scale(j) == 0) scale(j) = 1;
  const Eigen::MatrixXd Xs = X * scale.cwiseInverse().asDiagonal();
  Eigen::VectorXd best = Eigen::VectorXd::Zero(n);
  double best_error = y.squaredNorm();
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < n; ++j)
      if (mask & (1u << j)) cols.push_back(j);
    Eigen::MatrixXd sub(X.rows(), static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = Xs.col(cols[k]);
    const Eigen::VectorXd c = sub.colPivHouseholderQr().solve(y);
    if ((c.array() < 0).any()) continue;
    const double error = (sub * c - y).squaredNorm();
    if (error < best_error) {
      best_error = error;
      best.setZero();
      for (std::size_t k = 0; k < cols.size(); ++k) best(cols[k]) = c(static_cast<Eigen::Index>(k));
    }
  }
  return best.cwiseQuotient(scale);
}

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

// y = a + β·b·L + γ·b·L² over (b, L) rows, in the form of a phase time (memory has it too).
PhaseTime fit_quadratic(const std::vector<std::pair<int, int>>& bl, const std::vector<double>& y) {
  Eigen::MatrixXd X(static_cast<Eigen::Index>(y.size()), 3);
  Eigen::VectorXd Y(static_cast<Eigen::Index>(y.size()));
  for (std::size_t i = 0; i < y.size(); ++i) {
    const auto [b, L] = bl[i];
    X.row(static_cast<Eigen::Index>(i)) << 1.0, double(b) * L, double(b) * L * L;
    Y(static_cast<Eigen::Index>(i)) = y[i];
  }
  const Eigen::VectorXd c = nnls(X, Y);
  return {c(0), c(1), c(2)};
}

// The allreduce rows of every trace that has them, fitted as t = c0 + c1·S.
void fit_allreduce(const std::vector<Trace>& traces, Calibration& c) {
  std::vector<double> bytes, ms;
  int G = 0;
  for (const Trace& t : traces) {
    int ranks = 0;
    for (const auto& run : t.runs)
      for (const RankStep& r : run.rows)
        if (!std::isnan(r.allreduce_ms) && !std::isnan(r.allreduce_bytes)) {
          if (!ranks) {
            const auto it = t.metadata.find("world_size");
            ranks = it == t.metadata.end() ? 0 : std::atoi(it->second.c_str());
            if (ranks < 2)
              throw InputError(t.path + ": allreduce rows need a \"# world_size=N\" metadata line with N ≥ 2");
            if (G && ranks != G)
              throw InputError(t.path + ": allreduce rows of " + std::to_string(ranks) + " ranks mixed with " +
                               std::to_string(G) + ": calibrate one world size at a time");
            G = ranks;
          }
          bytes.push_back(r.allreduce_bytes);
          ms.push_back(r.allreduce_ms);
        }
  }
  if (bytes.empty()) return;
  if (std::set<double>(bytes.begin(), bytes.end()).size() < 2)
    throw InputError("allreduce rows of a single size: the α–β fit needs at least two sizes (--profile-bytes)");
  Eigen::MatrixXd X(static_cast<Eigen::Index>(bytes.size()), 2);
  Eigen::VectorXd Y(static_cast<Eigen::Index>(bytes.size()));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    X.row(static_cast<Eigen::Index>(i)) << 1.0, bytes[i];
    Y(static_cast<Eigen::Index>(i)) = ms[i];
  }
  const Eigen::VectorXd coef = nnls(X, Y);
  std::vector<double> predicted;
  for (double b : bytes) predicted.push_back(coef(0) + coef(1) * b);
  c.has_allreduce = true;
  c.allreduce_ranks = G;
  c.allreduce_step_latency_us = coef(0) * 1e3 / (2.0 * (G - 1));
  c.allreduce_link_GBps = coef(1) > 0 ? 2.0 * (G - 1) / G / (coef(1) * 1e-3) / 1e9 : 0;
  c.allreduce = quality(ms, predicted);
}

}  // namespace

Calibration calibrate(const std::vector<Trace>& traces) {
  Calibration c;
  std::vector<std::pair<int, int>> bl;
  std::vector<double> fwd, bwd, opt, mem_rows_y;
  std::vector<std::pair<int, int>> mem_bl;
  std::set<std::pair<int, int>> distinct;
  std::string names;
  for (const Trace& t : traces) {
    names += (names.empty() ? "" : ", ") + t.path;
    for (const auto& run : t.runs)
      for (const RankStep& r : run.rows) {
        if (std::isnan(r.fwd_ms) || std::isnan(r.bwd_ms) || r.batch_size < 1) continue;
        bl.emplace_back(r.batch_size, r.max_len);
        fwd.push_back(r.fwd_ms);
        bwd.push_back(r.bwd_ms);
        distinct.insert({r.batch_size, r.max_len});
        if (!std::isnan(r.opt_ms)) opt.push_back(r.opt_ms);
        if (!std::isnan(r.peak_mem_mib))
          mem_bl.emplace_back(r.batch_size, r.max_len), mem_rows_y.push_back(r.peak_mem_mib);
      }
  }
  c.distinct_points = static_cast<int>(distinct.size());
  fit_allreduce(traces, c);
  std::set<int> lengths, tokens;
  for (const auto& [b, L] : distinct) lengths.insert(L), tokens.insert(b * L);
  if (distinct.size() < 3 || lengths.size() < 2 || tokens.size() < 2)
    throw InputError(names + ": " + std::to_string(distinct.size()) + " distinct (batch size, length) point(s) with " +
                     std::to_string(lengths.size()) +
                     " distinct length(s): fitting a + β·b·L + γ·b·L² needs at least 3 "
                     "points with 2 or more lengths and padded-token counts; add steps with other batch sizes and "
                     "lengths (a dynamic policy's trace, or a ddptrain --profile sweep)");
  const PhaseTime f = fit_quadratic(bl, fwd), b = fit_quadratic(bl, bwd);
  c.forward.time = f;
  c.backward.time = b;
  std::vector<double> pf, pb, ratio;
  for (std::size_t i = 0; i < bl.size(); ++i) {
    pf.push_back(f.at(bl[i].first, bl[i].second));
    pb.push_back(b.at(bl[i].first, bl[i].second));
    c.residuals.push_back({"forward", bl[i].first, bl[i].second, fwd[i], pf.back()});
    c.residuals.push_back({"backward", bl[i].first, bl[i].second, bwd[i], pb.back()});
    if (pf.back() + pb.back() > 0) ratio.push_back((fwd[i] + bwd[i]) / (pf.back() + pb.back()));
  }
  c.forward.quality = quality(fwd, pf);
  c.backward.quality = quality(bwd, pb);
  c.optimizer_ms = mean(opt);
  std::vector<double> logs;
  for (double r : ratio)
    if (r > 0) logs.push_back(std::log(r));
  c.noise_sigma = population_std(logs);
  c.observed_p95_over_p50 = percentile(ratio, 95) / percentile(ratio, 50);
  c.fitted_p95_over_p50 = std::exp(1.6448536269514722 * c.noise_sigma);
  if (mem_rows_y.size() >= 3) {
    const PhaseTime m = fit_quadratic(mem_bl, mem_rows_y);
    c.has_memory = true;
    c.mem_m0 = m.a_ms, c.mem_mu = m.beta_ms, c.mem_nu = m.gamma_ms;
    std::vector<double> pm;
    for (const auto& [bb, L] : mem_bl) pm.push_back(m.at(bb, L));
    c.memory = quality(mem_rows_y, pm);
  }
  return c;
}

nlohmann::ordered_json calibrated_model(const Calibration& c, const std::vector<Trace>& traces, const PerfModel& base,
                                        const std::string& name, const std::string& gpu) {
  nlohmann::ordered_json sources = nlohmann::ordered_json::array();
  std::string files;
  for (const Trace& t : traces) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : t.metadata) meta[k] = v;
    sources.push_back({{"file", t.path}, {"fnv1a64", t.hash}, {"rows", t.rows}, {"metadata", meta}});
    files += (files.empty() ? "" : ", ") + std::filesystem::path(t.path).filename().string();
  }
  auto phase = [](const PhaseTime& p) {
    return nlohmann::ordered_json{{"a", p.a_ms}, {"beta", p.beta_ms}, {"gamma", p.gamma_ms}};
  };
  auto fit = [](const FitQuality& q) {
    return nlohmann::ordered_json{{"points", q.points}, {"r2", q.r2}, {"mape", q.mape}};
  };
  nlohmann::ordered_json m;
  m["name"] = name;
  m["gpu"] = gpu;
  m["source"] = "calibrated by ddpsim calibrate from " + files + " (" + std::to_string(c.distinct_points) +
                " distinct (b, L) points); parameter layout" + (c.has_memory ? "" : ", memory model") +
                " and memory capacity from " + base.name;
  m["forward_ms"] = phase(c.forward.time);
  m["backward_ms"] = phase(c.backward.time);
  m["optimizer_ms"] = c.optimizer_ms;
  m["noise"] = {{"sigma", c.noise_sigma}};
  m["memory_mib"] = {{"m0", c.has_memory ? c.mem_m0 : base.mem_m0_mib},
                     {"mu", c.has_memory ? c.mem_mu : base.mem_mu_mib},
                     {"nu", c.has_memory ? c.mem_nu : base.mem_nu_mib},
                     {"capacity", base.mem_capacity_mib}};
  m["gradient_bytes_per_param"] = base.bytes_per_param;
  nlohmann::ordered_json layers = nlohmann::ordered_json::array();
  for (const auto& l : base.layers)
    layers.push_back({{"name", l.name}, {"params", l.params}, {"bwd_fraction", l.bwd_fraction}});
  m["layers"] = layers;
  nlohmann::ordered_json report = {
      {"forward", fit(c.forward.quality)},
      {"backward", fit(c.backward.quality)},
      {"noise_p95_over_p50", {{"observed", c.observed_p95_over_p50}, {"fitted", c.fitted_p95_over_p50}}}};
  if (c.has_memory) report["memory"] = fit(c.memory);
  if (c.has_allreduce) {
    auto a = fit(c.allreduce);
    a["ranks"] = c.allreduce_ranks;
    a["ring_step_latency_us"] = c.allreduce_step_latency_us;
    a["link_GBps"] = c.allreduce_link_GBps;
    report["allreduce"] = a;
  }
  m["calibration"] = {{"traces", sources}, {"fit", report}};
  return m;
}

std::string fit_report(const Calibration& c) {
  char line[512];
  std::string out;
  auto phase = [&](const char* name, const PhaseFit& p) {
    std::snprintf(line, sizeof line, "  %-9s t = %.4g + %.4g·b·L + %.4g·b·L² ms   R² %.4f   MAPE %.2f%%   (%ld rows)\n",
                  name, p.time.a_ms, p.time.beta_ms, p.time.gamma_ms, p.quality.r2, 100 * p.quality.mape,
                  p.quality.points);
    out += line;
  };
  std::snprintf(line, sizeof line, "fit over %d distinct (b, L) points\n", c.distinct_points);
  out += line;
  phase("forward", c.forward);
  phase("backward", c.backward);
  std::snprintf(line, sizeof line, "  optimizer %.4g ms (mean)\n", c.optimizer_ms);
  out += line;
  std::snprintf(line, sizeof line,
                "  noise     log-normal σ %.4f; P95/P50 of measured/predicted compute: observed %.4f, fitted %.4f\n",
                c.noise_sigma, c.observed_p95_over_p50, c.fitted_p95_over_p50);
  out += line;
  if (c.has_memory) {
    std::snprintf(line, sizeof line, "  memory    m = %.5g + %.4g·b·L + %.4g·b·L² MiB   R² %.4f   MAPE %.2f%%\n",
                  c.mem_m0, c.mem_mu, c.mem_nu, c.memory.r2, 100 * c.memory.mape);
    out += line;
  } else {
    out += "  memory    no peak_mem_mib in the traces: the base model's memory model is kept\n";
  }
  if (c.has_allreduce) {
    std::snprintf(
        line, sizeof line,
        "  allreduce %d ranks, as a ring: %.3g us per step, %.4g GB/s per link   R² %.4f   MAPE %.2f%%\n"
        "            for a pcie or nvlink platform: --set platform.link_GBps=%.4g --set platform.latency_us=%.3g"
        " --set platform.host_GBps=0\n",
        c.allreduce_ranks, c.allreduce_step_latency_us, c.allreduce_link_GBps, c.allreduce.r2, 100 * c.allreduce.mape,
        c.allreduce_link_GBps, c.allreduce_step_latency_us / 2);
    out += line;
  }
  return out;
}

}  // namespace ddpsim
