// Fits a performance model to profiled traces: per phase t(b, L) = a + β·b·L + γ·b·L² by
// non-negative least squares (Eigen), the compute noise as the log-normal σ of the
// measured / predicted ratio, the peak-memory model m(b, L), and, where a trace holds
// allreduce timings (ddptrain --profile over several ranks), the ring's α–β.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/trace_reader.hpp"
#include "model/perf_model.hpp"

namespace ddpsim {

struct FitQuality {
  long points = 0;  // rows used
  double r2 = 0, mape = 0;
};

struct PhaseFit {
  PhaseTime time;
  FitQuality quality;
};

struct Calibration {
  PhaseFit forward, backward;
  double optimizer_ms = 0;
  double noise_sigma = 0;
  double observed_p95_over_p50 = 0, fitted_p95_over_p50 = 0;  // of measured / predicted compute
  bool has_memory = false;
  double mem_m0 = 0, mem_mu = 0, mem_nu = 0;
  FitQuality memory;
  // t(S) = c0 + c1·S over allreduce rows; read as a ring of G ranks: 2(G−1) steps of latency
  // α each, 2(G−1)/G·S bytes through a link of bandwidth bw.
  bool has_allreduce = false;
  int allreduce_ranks = 0;
  double allreduce_step_latency_us = 0, allreduce_link_GBps = 0;
  FitQuality allreduce;
  int distinct_points = 0;  // distinct (b, L)
  // (phase, b, L, measured, predicted) for residual plots.
  struct Residual {
    std::string phase;
    int b, L;
    double measured, predicted;
  };
  std::vector<Residual> residuals;
};

// Throws InputError when the traces hold too few distinct (b, L) points, saying what to add.
Calibration calibrate(const std::vector<Trace>& traces);

// The model file: the fit, a base model's layout and memory capacity, and where it came from.
nlohmann::ordered_json calibrated_model(const Calibration& c, const std::vector<Trace>& traces, const PerfModel& base,
                                        const std::string& name, const std::string& gpu);

// The human-readable fit report.
std::string fit_report(const Calibration& c);

}  // namespace ddpsim
