// Fitting a phase's time: relative-error weighting, the measured grid, and held-out errors.
#include <doctest/doctest.h>

#include <cmath>

#include "calib/phase_fit.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"

using namespace ddpsim;

namespace {

const PhaseTime TRUTH{2.0, 0.002, 1e-5};

// One median-like point per shape of a profile grid, each off by multiplicative noise σ.
std::vector<ShapePoint> noisy_points(double sigma, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<ShapePoint> points;
  for (int b : {1, 2, 4, 8, 16, 32, 64})
    for (int L : {8, 16, 32, 64, 128, 256})
      points.push_back({b, L, TRUTH.at(b, L) * std::exp(sigma * rng.normal()), 1});
  return points;
}

double mape_against_truth(const PhaseTime& fit, const std::vector<ShapePoint>& points) {
  std::vector<double> ape;
  for (const auto& p : points) ape.push_back(std::abs(fit.at(p.b, p.L) - TRUTH.at(p.b, p.L)) / TRUTH.at(p.b, p.L));
  return mean(ape);
}

}  // namespace

TEST_CASE("nnls: the best subset's least squares, with no coefficient below zero") {
  std::vector<std::vector<double>> rows;
  std::vector<double> rising, falling;
  for (int x = 0; x < 10; ++x)
    rows.push_back({1.0, double(x), 0.0}), rising.push_back(2 + 3 * x), falling.push_back(5 - 0.5 * x);
  auto c = nnls(rows, rising);  // an exact fit; the column of zeros gets nothing
  CHECK(c[0] == doctest::Approx(2));
  CHECK(c[1] == doctest::Approx(3));
  CHECK(c[2] == 0);
  // Falling: the free fit's slope is negative. The intercept alone (the mean, 2.75, squared
  // error 20.6) beats the slope alone (82.5/285, squared error 72.4).
  c = nnls(rows, falling);
  CHECK(c[0] == doctest::Approx(2.75));
  CHECK(c[1] == 0);
  CHECK(nnls(rows, std::vector<double>(10, -1.0)) == std::vector<double>{0, 0, 0});  // nothing feasible beats c = 0
  // Fewer rows than columns: a solution that fits the one row exactly.
  c = nnls({{1.0, 1.0, 0.0}}, {2.0});
  CHECK(c[0] + c[1] == doctest::Approx(2));
  CHECK(std::min(c[0], c[1]) >= 0);
}

TEST_CASE("under multiplicative noise, the relative-error fit beats plain least squares") {
  // Times span 2 ms to 200 ms: unweighted least squares fits the large shapes and lets the
  // intercept, which is most of a small shape's time, wander.
  for (std::uint64_t seed : {1, 2, 3}) {
    const auto points = noisy_points(0.10, seed);
    const PhaseTime relative = fit_analytic(points, /*relative=*/true), plain = fit_analytic(points, false);
    CAPTURE(seed);
    CHECK(mape_against_truth(relative, points) < mape_against_truth(plain, points));
    CHECK(mape_against_truth(relative, points) < 0.05);
    CHECK(relative.a_ms == doctest::Approx(TRUTH.a_ms).epsilon(0.10));
  }
}

TEST_CASE("shapes far off the surface do not pull the fit with them") {
  // One shape in eight measured 30% slow (a slow spell, a cliff of its own): a plain
  // relative-error fit moves the whole surface a few percent towards them; the bisquare
  // reweighting leaves them out and recovers the rest.
  for (std::uint64_t seed : {1, 2, 3}) {
    auto points = noisy_points(0.01, seed);
    for (std::size_t i = 0; i < points.size(); i += 8) points[i].ms *= 1.3;
    CAPTURE(seed);
    CHECK(mape_against_truth(fit_analytic(points), points) < 0.01);
  }
}

TEST_CASE("a noiseless quadratic device is recovered exactly by both forms") {
  const auto points = noisy_points(0.0, 1);
  const PhaseTime fit = fit_analytic(points);
  CHECK(fit.a_ms == doctest::Approx(TRUTH.a_ms).epsilon(1e-9));
  CHECK(fit.beta_ms == doctest::Approx(TRUTH.beta_ms).epsilon(1e-9));
  CHECK(fit.gamma_ms == doctest::Approx(TRUTH.gamma_ms).epsilon(1e-9));
  const HeldOut h = heldout_error(points, 5, 7);
  CHECK(h.analytic < 1e-9);
  CHECK(h.grid < 1e-9);  // a held-out shape is a hole, filled from the (exact) analytic form
}

TEST_CASE("the grid form is exact at its points and monotone between and beyond them") {
  // A device that is flat until it saturates, with a cliff: not a polynomial.
  auto device = [](int b, int L) {
    const double tokens = double(b) * L;
    return 5.0 + std::max(0.0, tokens - 256) * 0.01 + (L >= 128 ? 3.0 : 0.0);
  };
  std::vector<ShapePoint> points;
  for (int b : {1, 2, 4, 8, 16, 32})
    for (int L : {8, 16, 32, 64, 128}) points.push_back({b, L, device(b, L), 3});
  PhaseModel m;
  m.analytic = fit_analytic(points);
  m.grid = fit_grid(points, m.analytic);
  m.use = PhaseForm::grid;
  CHECK(m.grid.check().empty());
  for (const auto& p : points) CHECK(m.at(p.b, p.L) == doctest::Approx(p.ms).epsilon(1e-12));
  for (int b = 1; b <= 48; ++b)
    for (int L = 2; L <= 200; ++L) {
      CHECK(m.at(b, L) >= m.at(b - 1 > 0 ? b - 1 : 1, L));
      CHECK(m.at(b, L) >= m.at(b, L - 1));
    }
  // And on such a device the held-out error prefers the grid to the analytic form (and the
  // roofline, flat until it saturates, to both: auto takes the smallest).
  const HeldOut h = heldout_error(points, 5, 3);
  CHECK(h.grid < h.analytic);
  CHECK(h.roofline < h.grid);
  CHECK(fit_phase(points, h, "auto").use == PhaseForm::roofline);
  CHECK(fit_phase(points, h, "grid").use_grid());
  CHECK_FALSE(fit_phase(points, h, "analytic").use_grid());
}

TEST_CASE("a non-monotone table is made monotone by the least relative change, holes are filled") {
  // b=2, L=16 measured below its smaller neighbour: the L∞ isotonic fit meets them halfway (in log).
  std::vector<ShapePoint> points = {{1, 8, 1.0, 1}, {1, 16, 4.0, 1}, {2, 8, 2.0, 1}, {2, 16, 1.0, 1}, {4, 8, 3.0, 1}};
  const MeasuredGrid g = fit_grid(points, PhaseTime{0, 0.1, 0});
  CHECK(g.check().empty());
  CHECK(g.ms[1][1] == doctest::Approx(2.0).epsilon(1e-12));  // √(4 · 1), from max below 4 and min above 1
  CHECK(g.ms[0][1] == doctest::Approx(2.0).epsilon(1e-12));
  CHECK(g.ms[2][1] >= g.ms[1][1]);  // (4, 16) was never measured: filled, then kept in order
}
