// calibrate --training's warm-up rule on runs written step by step: a process's slow start is
// left out, a run too short to tell is kept whole, first uses are no slow start, and every
// trace of a process shares its warm-up.
#include <doctest/doctest.h>

#include "calib/warmup.hpp"
#include "known_surface.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {

const PerfModel& model() {
  static const PerfModel m = load_perf_model(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  return m;
}

// One rank's run of `steps` steps of 8 × 64 tokens at the surface ×(1 + 2% by step), from step 0.
Trace run(const std::string& path, int steps, const std::string& seed = "0") {
  Trace t;
  t.path = path;
  t.metadata = {{"seed", seed}};
  PolicyRun& p = t.runs.emplace_back();
  p.label = "static", p.G = 1;
  for (int s = 0; s < steps; ++s) {
    RankStep& r = p.rows.emplace_back();
    r.step = s, r.batch_size = 8, r.max_len = 64;
    const double f = 1 + 0.02 * (s % 5);
    r.fwd_ms = f * model().forward.at(8, 64), r.bwd_ms = f * model().backward.at(8, 64);
  }
  return t;
}

void slow(Trace& t, int step, double f) {
  for (RankStep& r : t.runs[0].rows)
    if (r.step == step) r.fwd_ms *= f, r.bwd_ms *= f;
}

// A step meeting a shape of its own that costs `extra_ms` more than the surface says.
void first_use(Trace& t, int step, int max_len, double extra_ms) {
  for (RankStep& r : t.runs[0].rows)
    if (r.step == step)
      r.max_len = max_len, r.fwd_ms = model().forward.at(8, max_len) + extra_ms,
      r.bwd_ms = model().backward.at(8, max_len);
}

}  // namespace

TEST_CASE("a process's slow leading steps are left out, up to a quarter of its steps") {
  const Calibration c = known_surface(model());
  Trace t = run("a.csv", 40);
  slow(t, 0, 9), slow(t, 1, 3), slow(t, 2, 2.5), slow(t, 4, 3);
  const auto w = leading_steps({t}, c);
  REQUIRE(w.size() == 1);
  CHECK(w[0].left_out == 2);  // step 0 is never counted; step 3 is settled, so step 4 stays
  CHECK(w[0].first_kept == 3);
  CHECK(w[0].slowest == doctest::Approx(3.0).epsilon(0.05));
  CHECK(first_kept_step(w, "a.csv") == 3);
  CHECK(first_kept_step(w, "other.csv") == 1);

  Trace slow_half = run("b.csv", 40);
  for (int s = 1; s < 20; ++s) slow(slow_half, s, 3);
  CHECK(leading_steps({slow_half}, c)[0].left_out == 9);  // a quarter of 39

  Trace short_run = run("c.csv", kMinWarmupSteps);  // steps 1 to 11: too few to tell
  slow(short_run, 1, 3);
  CHECK(leading_steps({short_run}, c)[0].left_out == 0);
}

TEST_CASE("a step of first uses is no slow start: their median extra is taken out first") {
  const Calibration c = known_surface(model());
  Trace t = run("a.csv", 40);
  // Five first uses costing alike, each ~4× its surface: two leading, three before the second half.
  const double extra = 3 * (model().forward.at(8, 96) + model().backward.at(8, 96));
  for (const auto& [step, len] : std::vector<std::pair<int, int>>{{1, 96}, {2, 104}, {5, 88}, {8, 100}, {12, 92}})
    first_use(t, step, len, extra);
  CHECK(leading_steps({t}, c)[0].left_out == 0);
  slow(t, 1, 3);  // a first use in a slow step is still a slow step
  CHECK(leading_steps({t}, c)[0].left_out == 1);
}

TEST_CASE("the traces of one process share its warm-up; processes are apart") {
  const Calibration c = known_surface(model());
  Trace a = run("a/static.csv", 40, "1"), b = run("a/minmax.csv", 40, "1"), other = run("b/static.csv", 40, "2");
  b.runs[0].label = "minmax";
  slow(b, 1, 3), slow(b, 2, 3);  // the process's slow start, seen in its second policy's steps
  const auto w = leading_steps({a, b, other}, c);
  REQUIRE(w.size() == 2);
  CHECK(w[0].paths == std::vector<std::string>{"a/static.csv", "a/minmax.csv"});
  CHECK(first_kept_step(w, "a/static.csv") == 3);
  CHECK(first_kept_step(w, "a/minmax.csv") == 3);
  CHECK(first_kept_step(w, "b/static.csv") == 1);
}
