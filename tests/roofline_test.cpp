// The roofline form max(f, a + β·b·L + γ·b·L²): recovered from a noisy synthetic device, chosen
// over the others where held-out shapes say so, read and written by models, and the growth a
// grid follows beyond its edge.
#include <doctest/doctest.h>

#include <cmath>

#include "calib/phase_fit.hpp"
#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/rng.hpp"
#include "model/perf_model.hpp"

using namespace ddpsim;

namespace {

// A device on a 6 ms launch floor until its compute passes it: 5 ms plus 2.5 µs a token and
// 20 ns a token pair (so both terms matter by L = 512).
const Roofline TRUTH{6.0, {1.0, 0.0025, 2e-5}};

std::vector<ShapePoint> noisy_points(double sigma, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<ShapePoint> points;
  for (int b : {1, 2, 4, 8, 16, 32, 64, 128})
    for (int L : {16, 32, 64, 128, 256, 512})
      points.push_back({b, L, TRUTH.at(b, L) * std::exp(sigma * rng.normal()), 5});
  return points;
}

}  // namespace

TEST_CASE("a synthetic roofline with 5% noise fits back within 5%") {
  const Roofline r = fit_roofline(noisy_points(0.05, 3));
  CHECK(r.floor_ms == doctest::Approx(TRUTH.floor_ms).epsilon(0.05));
  CHECK(r.compute.beta_ms == doctest::Approx(TRUTH.compute.beta_ms).epsilon(0.05));
  CHECK(r.compute.gamma_ms == doctest::Approx(TRUTH.compute.gamma_ms).epsilon(0.05));
  // The intercept hides under the floor wherever the compute is small: its predictions, not the
  // coefficient, are what a profile can tell.
  for (int b : {1, 8, 64, 128})
    for (int L : {16, 128, 512}) CHECK(r.at(b, L) == doctest::Approx(TRUTH.at(b, L)).epsilon(0.05));
}

TEST_CASE("held out, the roofline beats the analytic form on a floored device and is chosen") {
  const auto points = noisy_points(0.03, 5);
  const HeldOut h = heldout_error(points, 5, 1);
  CHECK(h.roofline < 0.5 * h.analytic);
  const PhaseModel m = fit_phase(points, h, "auto");
  CHECK(m.use != PhaseForm::analytic);
  CHECK(fit_phase(points, h, "roofline").use == PhaseForm::roofline);
}

TEST_CASE("a device without a floor keeps the analytic form's predictions") {
  Rng rng(8);
  std::vector<ShapePoint> points;
  const PhaseTime quadratic{2.0, 0.002, 1e-5};
  for (int b : {1, 2, 4, 8, 16, 32, 64})
    for (int L : {8, 16, 32, 64, 128, 256})
      points.push_back({b, L, quadratic.at(b, L) * std::exp(0.02 * rng.normal()), 5});
  const Roofline r = fit_roofline(points);
  for (const ShapePoint& p : points) CHECK(r.at(p.b, p.L) == doctest::Approx(quadratic.at(p.b, p.L)).epsilon(0.06));
}

TEST_CASE("a model's roofline is read, used as its form, and sets a grid's growth beyond its edge") {
  nlohmann::json doc = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  doc["forward_ms"] = {{"a", 1.0},
                       {"beta", 0.01},
                       {"gamma", 0.0},
                       {"form", "roofline"},
                       {"roofline", {{"floor", 6.0}, {"a", 1.0}, {"beta", 0.0025}, {"gamma", 2e-5}}}};
  const PerfModel m = parse_perf_model(doc, "m.json");
  CHECK(m.fwd_ms(1, 16) == doctest::Approx(6.0));
  CHECK(m.fwd_ms(64, 512) == doctest::Approx(TRUTH.at(64, 512)));
  // A grid in use grows beyond its edge as the roofline does: flat while the roofline is on its
  // floor, then with its compute.
  doc["forward_ms"]["form"] = "grid";
  doc["forward_ms"]["grid"] = {{"b", {1, 2}}, {"L", {16, 32}}, {"ms", {{6.0, 6.0}, {6.0, 6.2}}}};
  const PerfModel g = parse_perf_model(doc, "m.json");
  CHECK(g.fwd_ms(2, 64) == doctest::Approx(6.2));  // roofline(2, 64) is still its floor
  CHECK(g.fwd_ms(2, 512) == doctest::Approx(6.2 * TRUTH.at(2, 512) / TRUTH.at(2, 32)));
  doc["forward_ms"]["form"] = "roofline";
  doc["forward_ms"].erase("roofline");
  CHECK_THROWS_WITH_AS(parse_perf_model(doc, "m.json"), doctest::Contains("form \"roofline\" needs a \"roofline\""),
                       InputError);
  doc["forward_ms"]["roofline"] = {{"floor", 6.0}, {"a", 1.0}, {"beta", 0.0025}};
  CHECK_THROWS_WITH_AS(parse_perf_model(doc, "m.json"), doctest::Contains("roofline: missing \"gamma\""), InputError);
}
