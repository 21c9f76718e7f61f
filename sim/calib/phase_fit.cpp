#include "calib/phase_fit.hpp"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

// nnls on a matrix. One QR of the unit-scaled columns, X = Q·R with Q orthogonal, serves every
// subset S of them: ‖X_S·c − y‖² = ‖R_S·c − (Qᵀy)_head‖² + ‖(Qᵀy)_tail‖² (head: the first n
// entries), so each subset is a least-squares problem of n rows rather than one row per shape.
Eigen::VectorXd nnls(Eigen::MatrixXd X, Eigen::VectorXd Y) {
  const Eigen::Index n = X.cols();
  if (X.rows() < n) {  // rows of zeros change no fit and leave R square
    const Eigen::Index m = X.rows();
    X.conservativeResize(n, Eigen::NoChange), Y.conservativeResize(n);
    X.bottomRows(n - m).setZero(), Y.tail(n - m).setZero();
  }
  Eigen::VectorXd scale = X.colwise().norm().transpose();
  for (Eigen::Index j = 0; j < n; ++j)
    if (scale(j) == 0) scale(j) = 1;
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(X * scale.cwiseInverse().asDiagonal());
  const Eigen::MatrixXd R = qr.matrixQR().topRows(n).triangularView<Eigen::Upper>();
  const Eigen::VectorXd qy = qr.householderQ().adjoint() * Y;
  const Eigen::VectorXd z = qy.head(n);
  const double outside = qy.tail(qy.size() - n).squaredNorm();  // what no subset of the columns reaches
  Eigen::VectorXd best = Eigen::VectorXd::Zero(n);
  double best_error = z.squaredNorm() + outside;  // c = 0, scored as every subset is
  for (unsigned mask = 1; mask < (1u << n); ++mask) {
    std::vector<Eigen::Index> cols;
    for (Eigen::Index j = 0; j < n; ++j)
      if (mask & (1u << j)) cols.push_back(j);
    Eigen::MatrixXd sub(n, static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = R.col(cols[k]);
    const Eigen::VectorXd c = sub.colPivHouseholderQr().solve(z);
    if ((c.array() < 0).any()) continue;
    const double error = (sub * c - z).squaredNorm() + outside;
    if (error < best_error) {
      best_error = error;
      best.setZero();
      for (std::size_t k = 0; k < cols.size(); ++k) best(cols[k]) = c(static_cast<Eigen::Index>(k));
    }
  }
  return best.cwiseQuotient(scale);
}

}  // namespace

std::vector<double> nnls(const std::vector<std::vector<double>>& rows, const std::vector<double>& y) {
  const auto m = static_cast<Eigen::Index>(rows.size()), n = static_cast<Eigen::Index>(rows.front().size());
  Eigen::MatrixXd X(m, n);
  Eigen::VectorXd Y(m);
  for (Eigen::Index i = 0; i < m; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) X(i, j) = rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)];
    Y(i) = y[static_cast<std::size_t>(i)];
  }
  const Eigen::VectorXd c = nnls(std::move(X), std::move(Y));
  return {c.data(), c.data() + n};
}

std::vector<ShapePoint> shape_medians(const std::vector<std::pair<int, int>>& bl, const std::vector<double>& ms) {
  std::map<std::pair<int, int>, std::vector<double>> by_shape;
  for (std::size_t i = 0; i < bl.size(); ++i) by_shape[bl[i]].push_back(ms[i]);
  std::vector<ShapePoint> points;
  for (const auto& [shape, values] : by_shape)
    points.push_back({shape.first, shape.second, percentile(values, 50), static_cast<int>(values.size())});
  return points;
}

std::vector<ShapePoint> packed_medians(const std::vector<std::pair<double, double>>& tokens_pairs,
                                       const std::vector<double>& ms) {
  std::map<std::pair<double, double>, std::vector<double>> by_work;
  for (std::size_t i = 0; i < tokens_pairs.size(); ++i) by_work[tokens_pairs[i]].push_back(ms[i]);
  std::vector<ShapePoint> points;
  for (const auto& [work, values] : by_work) {
    ShapePoint p{0, 0, percentile(values, 50), static_cast<int>(values.size())};
    p.packed = true;
    p.packed_tokens = work.first;
    p.packed_pairs = work.second;
    points.push_back(p);
  }
  return points;
}

PhaseTime fit_analytic(const std::vector<ShapePoint>& points, bool relative, bool quadratic) {
  auto fit = [&](const std::vector<double>& weights) {
    const auto m = static_cast<Eigen::Index>(points.size());
    Eigen::MatrixXd X(m, 3);
    Eigen::VectorXd y(m);
    for (Eigen::Index i = 0; i < m; ++i) {
      const ShapePoint& p = points[static_cast<std::size_t>(i)];
      // Weight 1/ms turns squared error into squared relative error.
      const double w = weights[static_cast<std::size_t>(i)] * (relative && p.ms > 0 ? 1.0 / p.ms : 1.0);
      X.row(i) << w, w * p.tokens(), quadratic ? w * p.pairs() : 0.0;
      y(i) = w * p.ms;
    }
    const Eigen::VectorXd c = nnls(std::move(X), std::move(y));
    return PhaseTime{c[0], c[1], quadratic ? c[2] : 0.0};
  };
  std::vector<double> weights(points.size(), 1.0);
  PhaseTime t = fit(weights);
  if (!relative) return t;
  // Tukey's bisquare by reweighting: a shape that sits far off its neighbours' surface (measured
  // through a slow spell, or a cache cliff of its own) stops pulling every other shape with it.
  constexpr double TUKEY_C = 4.685;  // 95% efficiency under normal errors
  std::vector<double> residual(points.size()), spread(points.size());
  for (int iteration = 0; iteration < 50; ++iteration) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      const ShapePoint& p = points[i];
      residual[i] = p.ms > 0 ? t.packed(p.tokens(), p.pairs()) / p.ms - 1 : 0.0;
    }
    spread = residual;
    const double centre = percentile_in_place(spread, 50);
    for (std::size_t i = 0; i < points.size(); ++i) spread[i] = std::abs(residual[i] - centre);
    const double scale = 1.4826 * percentile_in_place(spread, 50);  // the MAD, as a normal σ
    if (scale <= 1e-12) break;                                      // an exact fit: nothing to reweigh
    int kept = 0;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const double u = residual[i] / (TUKEY_C * scale);
      weights[i] = std::abs(u) < 1 ? (1 - u * u) * (1 - u * u) : 0.0;
      kept += weights[i] > 0;
    }
    if (kept < 3) break;
    const PhaseTime next = fit(weights);
    const bool settled = std::abs(next.a_ms - t.a_ms) <= 1e-9 * (1 + std::abs(t.a_ms)) &&
                         std::abs(next.beta_ms - t.beta_ms) <= 1e-9 * (1 + std::abs(t.beta_ms)) &&
                         std::abs(next.gamma_ms - t.gamma_ms) <= 1e-9 * (1 + std::abs(t.gamma_ms));
    t = next;
    if (settled) break;
  }
  return t;
}

MeasuredGrid fit_grid(const std::vector<ShapePoint>& points, const PhaseTime& analytic) {
  MeasuredGrid g;
  for (const ShapePoint& p : points) g.b.push_back(p.b), g.L.push_back(p.L);
  for (auto* axis : {&g.b, &g.L}) {
    std::sort(axis->begin(), axis->end());
    axis->erase(std::unique(axis->begin(), axis->end()), axis->end());
  }
  const std::size_t nb = g.b.size(), nL = g.L.size();
  auto index = [](const std::vector<int>& axis, int x) {
    return static_cast<std::size_t>(std::lower_bound(axis.begin(), axis.end(), x) - axis.begin());
  };
  // log(measured / analytic) where measured; NaN in a hole.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::vector<double>> log_ratio(nb, std::vector<double>(nL, nan));
  auto analytic_at = [&](std::size_t i, std::size_t j) { return std::max(analytic.at(g.b[i], g.L[j]), 1e-9); };
  std::vector<double> all;
  for (const ShapePoint& p : points) {
    const double r = std::log(std::max(p.ms, 1e-9) / analytic_at(index(g.b, p.b), index(g.L, p.L)));
    log_ratio[index(g.b, p.b)][index(g.L, p.L)] = r;
    all.push_back(r);
  }
  const double overall = mean(all);
  std::vector<std::vector<double>> log_ms(nb, std::vector<double>(nL));
  for (std::size_t i = 0; i < nb; ++i)
    for (std::size_t j = 0; j < nL; ++j) {
      double r = log_ratio[i][j];
      if (std::isnan(r)) {  // a hole: the nearest measured neighbour on each side along b and L
        std::vector<double> near;
        auto nearest = [&](int di, int dj) {
          for (auto a = static_cast<long>(i) + di, c = static_cast<long>(j) + dj;
               a >= 0 && c >= 0 && a < static_cast<long>(nb) && c < static_cast<long>(nL); a += di, c += dj)
            if (!std::isnan(log_ratio[static_cast<std::size_t>(a)][static_cast<std::size_t>(c)]))
              return near.push_back(log_ratio[static_cast<std::size_t>(a)][static_cast<std::size_t>(c)]);
        };
        nearest(-1, 0), nearest(1, 0), nearest(0, -1), nearest(0, 1);
        r = near.empty() ? overall : mean(near);
      }
      log_ms[i][j] = std::log(analytic_at(i, j)) + r;
    }
  // L∞ isotonic regression over the product order: the midpoint of the running maximum from
  // below and the running minimum from above.
  auto upper = log_ms, lower = log_ms;
  for (std::size_t i = 0; i < nb; ++i)
    for (std::size_t j = 0; j < nL; ++j) {
      if (i > 0) upper[i][j] = std::max(upper[i][j], upper[i - 1][j]);
      if (j > 0) upper[i][j] = std::max(upper[i][j], upper[i][j - 1]);
    }
  for (std::size_t i = nb; i-- > 0;)
    for (std::size_t j = nL; j-- > 0;) {
      if (i + 1 < nb) lower[i][j] = std::min(lower[i][j], lower[i + 1][j]);
      if (j + 1 < nL) lower[i][j] = std::min(lower[i][j], lower[i][j + 1]);
    }
  g.ms.assign(nb, std::vector<double>(nL));
  for (std::size_t i = 0; i < nb; ++i)
    for (std::size_t j = 0; j < nL; ++j) g.ms[i][j] = std::exp(0.5 * (upper[i][j] + lower[i][j]));
  // exp and rounding can leave a neighbour a last bit above: restore the order exactly.
  for (std::size_t i = 0; i < nb; ++i)
    for (std::size_t j = 0; j < nL; ++j) {
      if (i > 0) g.ms[i][j] = std::max(g.ms[i][j], g.ms[i - 1][j]);
      if (j > 0) g.ms[i][j] = std::max(g.ms[i][j], g.ms[i][j - 1]);
    }
  return g;
}

namespace {

constexpr double kQuadraticGain = 0.8;  // γ must cut the compute shapes' loss by a fifth

// A fit's loss over the shapes: the mean of squared relative errors, each capped at 0.3².
double truncated_loss(const std::vector<ShapePoint>& points, const Roofline& r) {
  double sum = 0;
  for (const ShapePoint& p : points) {
    const double e = p.ms > 0 ? r.packed(p.tokens(), p.pairs()) / p.ms - 1 : 0.0;
    sum += std::min(e * e, 0.09);
  }
  return points.empty() ? 0.0 : sum / double(points.size());
}

// The floor's level over its shapes by relative least squares: Σ(1/m) / Σ(1/m²).
double floor_level(const std::vector<ShapePoint>& floor) {
  double inv = 0, inv2 = 0;
  for (const ShapePoint& p : floor)
    if (p.ms > 0) inv += 1 / p.ms, inv2 += 1 / (p.ms * p.ms);
  return inv2 > 0 ? inv / inv2 : 0.0;
}

// The compute part needs shapes whose tokens and token-pairs vary apart.
bool enough_for_compute(const std::vector<ShapePoint>& points) {
  if (points.size() < 3) return false;
  const auto length = [](const ShapePoint& p) { return p.pairs() / std::max(p.tokens(), 1e-9); };
  const ShapePoint& first = points.front();
  const auto varies = [&](auto value) {
    return std::any_of(points.begin(), points.end(), [&](const ShapePoint& p) { return value(p) != value(first); });
  };
  return varies([](const ShapePoint& p) { return p.tokens(); }) && varies(length);
}

double compute_loss(const std::vector<ShapePoint>& points, const PhaseTime& t) {
  return truncated_loss(points, Roofline{0, t});
}

// Above the floor, a + β·b·L, with γ·b·L² only where it fits the compute shapes clearly better:
// a profile whose compute-bound shapes are few and short cannot tell γ from β, and the γ it
// finds then grows without bound beyond them.
PhaseTime fit_compute(const std::vector<ShapePoint>& compute) {
  const PhaseTime linear = fit_analytic(compute, true, false), full = fit_analytic(compute);
  return compute_loss(compute, full) < kQuadraticGain * compute_loss(compute, linear) ? full : linear;
}

// A shape at the knee, where compute meets the floor to the last bits, goes to the floor: a
// tie left to rounding would make the split (and everything fitted from it) depend on it.
bool on_floor(const Roofline& r, const ShapePoint& p) {
  return r.compute.packed(p.tokens(), p.pairs()) < r.floor_ms * (1 + 1e-9);
}

// The roofline from a starting split of the shapes into floor and compute, reassigned until
// stable. Starting splits mostly meet in the same few partitions (in the calibration tests one
// fit in 3 to 16 is of a new one), so each compute part is fitted once, in the shapes' own
// order, which makes its fit a function of the set alone.
class SplitSearch {
 public:
  explicit SplitSearch(const std::vector<ShapePoint>& points) : points_(points) {}

  // `floor` marks the shapes that start on the floor; nothing where its compute part cannot be fitted.
  std::optional<Roofline> from(std::vector<bool> floor) {
    std::vector<ShapePoint> compute = part(floor, false);
    if (!enough_for_compute(compute)) return std::nullopt;
    Roofline r = fit(floor, compute);
    auto floor_count = std::count(floor.begin(), floor.end(), true);
    for (int iteration = 0; iteration < 20; ++iteration) {
      std::vector<bool> next(points_.size());
      for (std::size_t i = 0; i < points_.size(); ++i) next[i] = on_floor(r, points_[i]);
      const auto next_count = std::count(next.begin(), next.end(), true);
      compute = part(next, false);
      if (next_count == floor_count || !enough_for_compute(compute)) break;
      floor = std::move(next), floor_count = next_count;
      r = fit(floor, compute);
    }
    return r;
  }

 private:
  std::vector<ShapePoint> part(const std::vector<bool>& floor, bool on) const {
    std::vector<ShapePoint> out;
    for (std::size_t i = 0; i < points_.size(); ++i)
      if (floor[i] == on) out.push_back(points_[i]);
    return out;
  }

  Roofline fit(const std::vector<bool>& floor, const std::vector<ShapePoint>& compute) {
    auto [it, fresh] = compute_fits_.try_emplace(floor);
    if (fresh) it->second = fit_compute(compute);
    return {floor_level(part(floor, true)), it->second};
  }

  const std::vector<ShapePoint>& points_;
  std::map<std::vector<bool>, PhaseTime> compute_fits_;  // by the floor's mask
};

}  // namespace

Roofline fit_roofline(const std::vector<ShapePoint>& points) {
  const std::size_t n = points.size();
  std::vector<std::size_t> by_time(n);
  std::iota(by_time.begin(), by_time.end(), 0);
  std::stable_sort(by_time.begin(), by_time.end(),
                   [&](std::size_t a, std::size_t b) { return points[a].ms < points[b].ms; });
  Roofline best{0, fit_analytic(points)};
  double best_loss = truncated_loss(points, best);
  // About 40 candidate splits (fewer than 80), evenly over the shapes that leave a compute part to fit.
  SplitSearch search(points);
  std::vector<bool> floor(n);
  for (std::size_t k = 1, step = std::max<std::size_t>(1, n / 40), filled = 0; k + 3 <= n; k += step) {
    for (; filled < k; ++filled) floor[by_time[filled]] = true;
    const std::optional<Roofline> r = search.from(floor);
    if (!r) continue;
    if (const double loss = truncated_loss(points, *r); loss < best_loss) best = *r, best_loss = loss;
  }
  return best;
}

HeldOut heldout_error(const std::vector<ShapePoint>& points, int folds, std::uint64_t seed) {
  HeldOut h;
  h.folds = std::min<int>(folds, static_cast<int>(points.size()));
  if (h.folds < 2) throw InputError("cross-validation needs at least 2 points and 2 folds");
  std::vector<std::size_t> order(points.size());
  std::iota(order.begin(), order.end(), 0);
  Rng(seed).shuffle(std::span(order));
  std::vector<double> ape_analytic, ape_grid, ape_roofline;
  for (int f = 0; f < h.folds; ++f) {
    std::vector<ShapePoint> train, test;
    for (std::size_t k = 0; k < order.size(); ++k)
      (static_cast<int>(k % static_cast<std::size_t>(h.folds)) == f ? test : train).push_back(points[order[k]]);
    if (train.empty()) continue;
    PhaseModel m;
    m.analytic = fit_analytic(train);
    m.roofline = fit_roofline(train);
    m.has_roofline = true;
    const auto error = [&](const ShapePoint& p, PhaseForm form) {
      m.use = form;
      return std::abs((p.packed ? m.packed(p.tokens(), p.pairs()) : m.at(p.b, p.L)) - p.ms) / p.ms;
    };
    if (!points.front().packed) m.grid = fit_grid(train, m.analytic);
    for (const ShapePoint& p : test) {
      if (p.ms <= 0) continue;
      ape_analytic.push_back(error(p, PhaseForm::analytic));
      ape_roofline.push_back(error(p, PhaseForm::roofline));
      if (!p.packed) ape_grid.push_back(error(p, PhaseForm::grid));
    }
  }
  h.analytic = mean(ape_analytic);
  h.roofline = mean(ape_roofline);
  h.grid = ape_grid.empty() ? std::numeric_limits<double>::quiet_NaN() : mean(ape_grid);
  return h;
}

PhaseModel fit_phase(const std::vector<ShapePoint>& points, const HeldOut& heldout, const std::string& form) {
  PhaseModel m;
  m.analytic = fit_analytic(points);
  m.roofline = fit_roofline(points);
  m.has_roofline = true;
  const bool packed = !points.empty() && points.front().packed;
  if (!packed) m.grid = fit_grid(points, m.analytic);
  if (form == "grid" && !packed) m.use = PhaseForm::grid;
  if (form == "roofline") m.use = PhaseForm::roofline;
  if (form != "auto") return m;
  // The smallest held-out error; a tie keeps the simpler form (analytic, then roofline).
  double best = heldout.analytic;
  if (m.roofline.floor_ms > 0 && heldout.roofline < best) m.use = PhaseForm::roofline, best = heldout.roofline;
  if (!packed && heldout.grid < best) m.use = PhaseForm::grid;
  return m;
}

}  // namespace ddpsim
