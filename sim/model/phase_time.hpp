// A phase's compute time t(b, L) for b samples padded to L tokens, in one of three forms:
// the analytic a + β·b·L + γ·b·L², the roofline max(f, a + β·b·L + γ·b·L²), or a measured grid — a table over profiled
// batch sizes and lengths, interpolated bilinearly (exact at the table's points, between its neighbours in between),
// held at its edge below its smallest batch or length, and extended beyond its largest by the roofline's (or the
// analytic form's) growth from the nearest edge point. Real devices are not quadratic polynomials (GPUs stay flat until
// they saturate, CPUs have cache cliffs); the grid follows them where they were measured. Both forms are non-decreasing
// in b and in L, which the min-max solver needs.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace ddpsim {

// Sliding-window attention (Mistral, Qwen2/3): in a share of the layers each token attends to
// at most `tokens` keys, so a sequence of L > tokens costs L² − (L − tokens)² of its L² pairs
// there. The default attends fully.
struct AttentionWindow {
  long long tokens = 0;  // 0: no window
  double share = 0;      // of the attention FLOPs and stored scores: windowed layers / layers
  bool any() const { return tokens > 0 && share > 0; }
  double pairs(int L) const {
    const double over = any() && L > tokens ? double(L - tokens) : 0.0;
    return double(L) * L - share * over * over;
  }
};

// t(b, L) = a + β·b·L + γ·b·L², in ms: per micro-batch, per token, per attention pair. Packed
// sequences (no padding) cost the same per token and per pair: a + β·Σ s + γ·Σ s².
struct PhaseTime {
  PhaseTime() = default;
  PhaseTime(double a, double beta, double gamma) : a_ms(a), beta_ms(beta), gamma_ms(gamma) {}
  double a_ms = 0, beta_ms = 0, gamma_ms = 0;
  AttentionWindow window;  // L² becomes window.pairs(L)
  double at(int b, int L) const { return a_ms + beta_ms * b * L + gamma_ms * double(b) * window.pairs(L); }
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

// t = max(f, a + β·b·L + γ·b·L²): an accelerator's launch floor f (the host's work to launch a
// pass, which hides the kernels of small shapes) under its compute, which grows with the
// tokens once it passes the floor. Fitted to an H100's profiles it extrapolates from launch-bound
// shapes to compute-bound ones where the analytic form's a + β·b·L cannot (one line through
// both regimes).
struct Roofline {
  double floor_ms = 0;
  PhaseTime compute;
  double at(int b, int L) const { return std::max(floor_ms, compute.at(b, L)); }
  double packed(double tokens, double pairs) const { return std::max(floor_ms, compute.packed(tokens, pairs)); }
};

enum class PhaseForm { analytic, grid, roofline };
const char* form_name(PhaseForm form);
PhaseForm phase_form(const std::string& name);  // "grid", "roofline", else analytic

struct PhaseModel {
  PhaseTime analytic;
  MeasuredGrid grid;  // may be present while another form is in use
  Roofline roofline;  // present where has_roofline
  bool has_roofline = false;
  PhaseForm use = PhaseForm::analytic;  // grid requires a grid, roofline a roofline

  bool use_grid() const { return use == PhaseForm::grid; }
  const char* form() const { return form_name(use); }
  bool has(PhaseForm f) const {
    return f == PhaseForm::analytic || (f == PhaseForm::grid ? !grid.empty() : has_roofline);
  }
  // Every form's times multiplied by k: a device k times slower at everything.
  PhaseModel scaled(double k) const;
  // Beyond a grid in use, times grow as the roofline does where the model has one, else as the
  // analytic form does, from the grid's nearest edge point.
  double at(int b, int L) const;
  // Packed sequences (no grid form): the roofline where it is in use, else the analytic form.
  double packed(double tokens, double pairs) const;
};

}  // namespace ddpsim
