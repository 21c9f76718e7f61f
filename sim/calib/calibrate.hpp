// Fits a performance model to profiled traces: per phase every form of t(b, L) (analytic,
// roofline and measured grid, calib/phase_fit.hpp) with their held-out errors, the one in use; the compute
// noise as the log-normal σ of the measured / predicted ratio; the peak-memory model m(b, L);
// where a trace holds allreduce timings (ddptrain --profile over several ranks), the ring's
// α–β; and where it holds interference rows, how much slower backward runs beside an allreduce
// and an allreduce beside backward.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/noise_fit.hpp"
#include "calib/phase_fit.hpp"
#include "calib/session_fit.hpp"
#include "calib/trace_reader.hpp"
#include "model/perf_model.hpp"

namespace ddpsim {

struct FitQuality {
  long points = 0;  // rows used
  double r2 = 0, mape = 0;
};

struct PhaseFit {
  PhaseModel model;    // every form; model.use says which is in use
  FitQuality quality;  // of the form in use, over every row
  HeldOut heldout;
  int shapes = 0;
  double median_spread = 0;  // coefficient of variation of the shapes' medians: how much there was to fit
  double heldout_in_use() const {
    return model.use == PhaseForm::grid       ? heldout.grid
           : model.use == PhaseForm::roofline ? heldout.roofline
                                              : heldout.analytic;
  }
};

// A phase's fit is poor where the form in use misses held-out shapes by more than
// kPoorHeldoutMape, or explains less than kPoorR2 of the rows' variance where the shapes'
// medians spread by more than kShapeSpread (a launch floor that does not move with the shape
// has an R² near 0 and nothing wrong with it). Held-out error ~12% is what the noisiest
// committed profile, an H100's launch-bound bf16 one, gives its forms.
inline constexpr double kPoorHeldoutMape = 0.15, kPoorR2 = 0.5, kShapeSpread = 0.25;

// A form the fit supports beside the one in use: fitted in both phases, and missing held-out
// shapes by at most kFormSupportRatio times the error of the form in use (or kFormSupportMargin
// more, where that error is small): a prediction's form term is its spread over them.
inline constexpr double kFormSupportRatio = 1.5, kFormSupportMargin = 0.01;

struct CalibrationOptions {
  std::string form = "auto";  // auto | analytic | grid | roofline
  int folds = 5;
  std::uint64_t seed = 0;  // deals the points into folds
};

// Fewer repeated shapes than this give too coarse a distribution of slow spells to draw from.
inline constexpr std::size_t kMinSpellGroups = 20;

struct Calibration;
std::vector<PhaseForm> supported_forms(const Calibration& c);

struct Calibration {
  PhaseFit forward, backward;
  long half_timed_rows = 0;  // rows with fwd_ms or bwd_ms but not both: left out, and said so
  // Each phase whose fit is poor, with its figure and the threshold; empty when both are sound.
  std::vector<std::string> fit_warnings;
  double optimizer_ms = 0;
  double noise_sigma = 0;               // each rank's own: all of the noise, unless ranks timed steps together
  bool noise_from_repetitions = false;  // else from the residuals of the forms in use
  // Where several ranks timed each step's shape at once (a profile of ranks together): the σ of
  // the noise a step's ranks share, and how many ranks timed a step; shared² + own² = total².
  double noise_shared_sigma = 0;
  int noise_ranks = 0;
  // Slow spells as measured (PerfModel::spell_quantiles: 101 factors of median one): how far
  // each shape's repetitions on one rank sit from the surface, over spell_groups such groups;
  // empty with fewer than kMinSpellGroups.
  std::vector<double> spell_quantiles;
  int spell_groups = 0;
  // Two compute regimes where held-out repetitions say so (calib/noise_fit.hpp): the fields
  // above then hold below regimes.knee_tokens, these from it (PerfModel::noise_above).
  NoiseRegimes regimes;
  // How far the traces, taken as sessions of their own, disagree shape by shape (not fitted
  // from one trace): the model's session term.
  SessionFit session;
  double noise_above_sigma = 0, noise_above_shared_sigma = 0;
  std::vector<double> spell_quantiles_above;
  // Too few repeated groups above the knee for a table of their own: the spells below, their
  // logs scaled by the regimes' σ ratio.
  bool spells_above_scaled = false;
  int spell_groups_above = 0;
  // Both phases were scaled by this so that the model gives a quiet machine's mean time: the
  // median shape's level (without spells) times the mean of the log-normal noise.
  double mean_scale = 1;
  double observed_p95_over_p50 = 0, fitted_p95_over_p50 = 0;  // of measured / predicted compute
  bool has_memory = false;
  double mem_m0 = 0, mem_mu = 0, mem_nu = 0;
  FitQuality memory;
  // t(S) = c0 + c1·S over allreduce rows; read as a ring of G ranks: 2(G−1) steps of latency
  // α each, 2(G−1)/G·S bytes through a link of bandwidth bw.
  bool has_allreduce = false;
  int allreduce_ranks = 0;
  double allreduce_step_latency_us = 0, allreduce_link_GBps = 0;  // NaN: not resolved by the sizes
  std::string allreduce_sizes;                                    // "N sizes from A to B bytes"
  // The sizes the line was fitted at: the DDP bucket sizes a profile names and timed (what a
  // step reduces), else every size; its quality there, and over every size.
  std::vector<double> allreduce_fitted_bytes;
  bool allreduce_at_buckets = false;
  int allreduce_buckets_named = 0;  // distinct sizes in the traces' ddp_buckets
  FitQuality allreduce, allreduce_all_sizes;
  // Medians of one activity alone and beside the other: backward beside back-to-back
  // allreduces, per profiled shape (b, L); an allreduce beside backward, per size.
  struct Interference {
    int b = 0, L = 0;
    double bytes = 0;
    double alone_ms = 0, beside_ms = 0;
  };
  std::vector<Interference> compute_beside_comm, comm_beside_compute;
  // Geometric means of beside / alone over those, at least 1.
  double comm_slowdown = 1, allreduce_slowdown = 1;
  int distinct_points = 0;  // distinct (b, L), or (Σ s, Σ s²) when packed
  bool packed = false;      // fitted a + β·Σs + γ·Σs² on packed sequences (no grid form)
  // (phase, b, L, measured, predicted) for residual plots.
  struct Residual {
    std::string phase;
    int b, L;
    double measured, predicted;
  };
  std::vector<Residual> residuals;
};

// Throws InputError when the traces hold too few distinct (b, L) points, saying what to add.
Calibration calibrate(const std::vector<Trace>& traces, const CalibrationOptions& options = {});

// "fits poorly (the phases' figures): ... Remedies: ...", the warning calibrate prints and the
// model keeps; "" for a sound fit.
std::string fit_warning_text(const Calibration& c);

// The model file: the fit, a base model's layout and memory capacity, and where it came from.
nlohmann::ordered_json calibrated_model(const Calibration& c, const std::vector<Trace>& traces, const PerfModel& base,
                                        const std::string& name, const std::string& gpu);

// The human-readable fit report.
std::string fit_report(const Calibration& c);

}  // namespace ddpsim
