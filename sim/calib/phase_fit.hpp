// Fitting one phase's time t(b, L) to measurements, in both forms of model/phase_time.hpp,
// and judging each by its error on points it was not fitted to.
//
// Measurements are first reduced to one median per (b, L) shape: repetitions of a shape on a
// shared machine have a heavy right tail (another process, a page fault), and a median ignores
// it where a mean or a squared residual would follow it. Fits then minimise relative error,
// because that is what MAPE and the step-time error measure, and profiled times span three
// orders of magnitude: unweighted least squares would fit the largest shapes and leave the
// small ones — most real SST-2 steps — tens of percent off. A shape far off the others' surface
// (measured through a slow spell, or a cache cliff of its own) is then weighed down by Tukey's
// bisquare, so that it does not move every other shape's prediction towards it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/phase_time.hpp"

namespace ddpsim {

// One measured shape: b samples padded to L tokens, the median of its repetitions (ms); or,
// for packed sequences, Σ s tokens and Σ s² attention pairs (b and L then 0).
struct ShapePoint {
  int b = 0, L = 0;
  double ms = 0;
  int reps = 0;
  bool packed = false;
  double packed_tokens = 0, packed_pairs = 0;

  // What the analytic form's β and γ multiply.
  double tokens() const { return packed ? packed_tokens : double(b) * L; }
  double pairs() const { return packed ? packed_pairs : double(b) * L * L; }
};

// min ‖Xc − y‖ subject to c ≥ 0 for a handful of columns (X given row by row): the optimum is
// the unconstrained least-squares solution on some subset of the columns, so every subset is
// solved (from one QR of the unit-scaled columns) and the best feasible one kept.
std::vector<double> nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& y);

// One median per distinct (b, L) of the rows, sorted by (b, L).
std::vector<ShapePoint> shape_medians(const std::vector<std::pair<int, int>>& bl, const std::vector<double>& ms);
// One median per distinct (Σ s, Σ s²) of packed rows.
std::vector<ShapePoint> packed_medians(const std::vector<std::pair<double, double>>& tokens_pairs,
                                       const std::vector<double>& ms);

// a + β·b·L + γ·b·L² with every coefficient ≥ 0, minimising Σ w·((t(b, L) − ms) / ms)², the
// weights w those of Tukey's bisquare (c = 4.685 MADs of the relative residuals), iterated to
// a fixed point (`relative` false: Σ (t(b, L) − ms)², the plain least squares, for comparison).
// `quadratic` false: γ = 0, a + β·b·L alone.
PhaseTime fit_analytic(const std::vector<ShapePoint>& points, bool relative = true, bool quadratic = true);

// The measured grid over the points' distinct batch sizes × lengths. A cell without a point
// takes the analytic form's time scaled by the measured/analytic ratio of its measured
// neighbours along b and L (their geometric mean). The table is then made non-decreasing by
// the L∞-optimal isotonic fit in log space, the midpoint of the largest value at or below a cell
// and the smallest at or above it: a monotone table is kept exactly, and a non-monotone
// one moves each cell by the least relative amount that makes it monotone.
MeasuredGrid fit_grid(const std::vector<ShapePoint>& points, const PhaseTime& analytic);

// Held-out mean absolute percentage error (a fraction) of one form: the points are dealt into
// `folds` folds in a seeded random order, each fold predicted by the form fitted to the others.
struct HeldOut {
  double analytic = 0, grid = 0, roofline = 0;
  int folds = 0;
};
HeldOut heldout_error(const std::vector<ShapePoint>& points, int folds, std::uint64_t seed);

// max(f, a + β·b·L + γ·b·L²), every term ≥ 0: the k shapes of least time on the floor (f their
// relative least-squares level), the others fitted as fit_analytic does, k chosen by a
// truncated relative loss over all shapes (a shape 30% off counts as much however far off it
// is), then the shapes reassigned to whichever part predicts them until that settles. k = 0
// is the analytic form itself.
Roofline fit_roofline(const std::vector<ShapePoint>& points);

// Every form fitted to all points, and the one in use: `form` "auto" takes the smallest
// held-out error, "analytic", "grid" or "roofline" forces it. Packed points have no grid (its
// held-out error is NaN): the analytic form or the roofline.
PhaseModel fit_phase(const std::vector<ShapePoint>& points, const HeldOut& heldout, const std::string& form);

}  // namespace ddpsim
