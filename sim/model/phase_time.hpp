// A phase's compute time t(b, L) for b samples padded to L tokens, in one of two forms:
// the analytic a + β·b·L + γ·b·L², or a measured grid — a table over profiled batch sizes and
// lengths, interpolated bilinearly (exact at the table's points, between its neighbours in
// between), held at its edge below its smallest batch or length, and extended beyond its largest
// by the analytic form's growth from the nearest edge point. Real devices are not quadratic polynomials (GPUs stay flat
// until they saturate, CPUs have cache cliffs); the grid follows them where they were measured. Both forms are
// non-decreasing in b and in L, which the min-max solver needs.
#pragma once

#include <string>
#include <vector>

namespace ddpsim {

// t(b, L) = a + β·b·L + γ·b·L², in ms: per micro-batch, per token, per attention pair. Packed
// sequences (no padding) cost the same per token and per pair: a + β·Σ s + γ·Σ s².
struct PhaseTime {
  double a_ms = 0, beta_ms = 0, gamma_ms = 0;
  double at(int b, int L) const { return a_ms + beta_ms * b * L + gamma_ms * double(b) * L * L; }
  double packed(double tokens, double pairs) const { return a_ms + beta_ms * tokens + gamma_ms * pairs; }
};

// ms[i][j] is the time at batch size b[i] and length L[j]; both axes strictly increasing and
// the table non-decreasing along each (check() says where it is not).
struct MeasuredGrid {
  std::vector<int> b, L;
  std::vector<std::vector<double>> ms;

  bool empty() const { return b.empty(); }
  // Bilinear inside [b0, bn] × [L0, Lm]; NaN outside (the caller extends it).
  double inside(int batch, int length) const;
  // "" when the table is well formed, else what is wrong.
  std::string check() const;
};

struct PhaseModel {
  PhaseTime analytic;
  MeasuredGrid grid;      // may be present while the analytic form is in use
  bool use_grid = false;  // requires a grid

  const char* form() const { return use_grid ? "grid" : "analytic"; }
  double at(int b, int L) const;
};

}  // namespace ddpsim
