#include "model/phase_time.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ddpsim {

namespace {

// Index i with axis[i] ≤ x ≤ axis[i + 1] (the last interval for x at the end), and the weight
// of axis[i + 1]; a one-point axis gives (0, 0).
std::pair<std::size_t, double> locate(const std::vector<int>& axis, int x) {
  if (axis.size() == 1) return {0, 0.0};
  auto upper = std::upper_bound(axis.begin(), axis.end(), x);
  std::size_t i = static_cast<std::size_t>(upper - axis.begin());
  i = std::clamp<std::size_t>(i, 1, axis.size() - 1) - 1;
  return {i, double(x - axis[i]) / double(axis[i + 1] - axis[i])};
}

}  // namespace

double MeasuredGrid::inside(int batch, int length) const {
  if (empty() || batch < b.front() || batch > b.back() || length < L.front() || length > L.back())
    return std::numeric_limits<double>::quiet_NaN();
  const auto [i, u] = locate(b, batch);
  const auto [j, v] = locate(L, length);
  const std::size_t i1 = std::min(i + 1, b.size() - 1), j1 = std::min(j + 1, L.size() - 1);
  return (1 - u) * ((1 - v) * ms[i][j] + v * ms[i][j1]) + u * ((1 - v) * ms[i1][j] + v * ms[i1][j1]);
}

std::string MeasuredGrid::check() const {
  auto increasing = [](const std::vector<int>& axis) {
    for (std::size_t i = 0; i < axis.size(); ++i)
      if (axis[i] < 1 || (i > 0 && axis[i] <= axis[i - 1])) return false;
    return !axis.empty();
  };
  if (!increasing(b)) return "b must be a non-empty list of strictly increasing batch sizes ≥ 1";
  if (!increasing(L)) return "L must be a non-empty list of strictly increasing lengths ≥ 1";
  if (ms.size() != b.size()) return "ms must have one row per batch size in b";
  for (std::size_t i = 0; i < ms.size(); ++i) {
    if (ms[i].size() != L.size()) return "ms row " + std::to_string(i) + " must have one value per length in L";
    for (std::size_t j = 0; j < L.size(); ++j) {
      const double t = ms[i][j];
      const std::string at = " at b=" + std::to_string(b[i]) + ", L=" + std::to_string(L[j]);
      if (!(t >= 0 && t <= 1e7)) return "ms" + at + " must be a finite number from 0 to 1e7";
      if ((i > 0 && t < ms[i - 1][j]) || (j > 0 && t < ms[i][j - 1]))
        return "ms" + at + " is below a smaller batch's or length's time: the table must be non-decreasing";
    }
  }
  return "";
}

const char* form_name(PhaseForm form) {
  switch (form) {
    case PhaseForm::grid:
      return "grid";
    case PhaseForm::roofline:
      return "roofline";
    case PhaseForm::analytic:
      break;
  }
  return "analytic";
}

PhaseForm phase_form(const std::string& name) {
  return name == "grid" ? PhaseForm::grid : name == "roofline" ? PhaseForm::roofline : PhaseForm::analytic;
}

PhaseModel PhaseModel::scaled(double k) const {
  PhaseModel s = *this;
  for (PhaseTime* t : {&s.analytic, &s.roofline.compute}) t->a_ms *= k, t->beta_ms *= k, t->gamma_ms *= k;
  s.roofline.floor_ms *= k;
  for (auto& row : s.grid.ms)
    for (double& ms : row) ms *= k;
  return s;
}

double PhaseModel::at(int b, int L) const {
  if (use == PhaseForm::analytic) return analytic.at(b, L);
  if (use == PhaseForm::roofline) return roofline.at(b, L);
  // Below the table the time stays at its edge; beyond it, it grows as the roofline (or the
  // analytic form) does from the nearest edge point. Both keep t continuous and non-decreasing
  // in b and in L.
  const int lb = std::max(b, grid.b.front()), lL = std::max(L, grid.L.front());
  const int eb = std::min(lb, grid.b.back()), eL = std::min(lL, grid.L.back());
  const double edge = grid.inside(eb, eL);
  if (eb == lb && eL == lL) return edge;
  const auto growth = [&](int x, int y) { return has_roofline ? roofline.at(x, y) : analytic.at(x, y); };
  const double edge_form = growth(eb, eL);
  return edge_form > 0 ? edge * growth(lb, lL) / edge_form : edge;
}

double PhaseModel::packed(double tokens, double pairs) const {
  return use == PhaseForm::roofline ? roofline.packed(tokens, pairs) : analytic.packed(tokens, pairs);
}

}  // namespace ddpsim
