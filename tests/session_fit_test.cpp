// The session term from several profiles: each trace a session, their per-shape medians compared
// by regime and scaled by the campaigns' relation; one trace, or too few shared shapes, fits none.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "calib/calibrate.hpp"
#include "common/rng.hpp"
#include "eval/uncertainty.hpp"
#include "profile_row.hpp"
#include "report/outputs.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::profile_row;
using ddpsim::test::TempDir;

namespace {

// A one-rank profile of 8×8 shapes, 3 repetitions each; each shape sits exp(shift·z) off the
// surface, z drawn per shape from `seed`.
Trace session_profile(const TempDir& dir, const std::string& name, double shift, std::uint64_t seed) {
  Rng rng(seed);
  PolicyRun run{"profile", "", 1, {}, {}};
  for (int b : {1, 2, 4, 8, 12, 16, 24, 32})
    for (int L : {8, 16, 32, 48, 64, 96, 128, 192}) {
      const double level = (2 + 0.002 * b * L) * std::exp(shift * rng.normal());
      for (int r = 0; r < 3; ++r) run.rows.push_back(profile_row(static_cast<int>(run.rows.size()), b, L, level));
    }
  const std::string path = dir / name;
  std::ofstream(path) << trace_csv({run}, {{"world_size", "1"}, {"profile", "one rank"}});
  return read_trace(path);
}

}  // namespace

TEST_CASE("two sessions' profiles give the session term their shapes' disagreement implies") {
  TempDir dir;
  const Trace a = session_profile(dir, "a.csv", 0.0, 1), b = session_profile(dir, "b.csv", 0.1, 2);
  const SessionFit s = fit_session({a, b}, 0);
  REQUIRE(s.fitted());
  CHECK(s.shapes_below == 64);
  // |z| of a normal has mean 0.798: the shapes differ by about 8%.
  CHECK(s.spread_below == doctest::Approx(0.0798).epsilon(0.25));
  CHECK(s.below_pp == doctest::Approx(kCampaignSessionBelowPp * s.spread_below / kCampaignShapeSpreadBelow));
  CHECK(s.source.find("2 profiles") != std::string::npos);

  // The model carries it, and a prediction with it names its source.
  const Calibration c = calibrate({a, b});
  const auto json = calibrated_model(c, {a, b}, load_perf_model("rtx3090-distilbert"), "two", "sim");
  const PerfModel m = parse_perf_model(nlohmann::json::parse(json.dump()), "two sessions");
  CHECK(m.session_below_pp == doctest::Approx(c.session.below_pp));
  CHECK(session_spread(m).source.find("fitted by ddpsim calibrate") != std::string::npos);
}

TEST_CASE("one profile, or profiles of other shapes, fit no session term") {
  TempDir dir;
  const Trace a = session_profile(dir, "a.csv", 0.05, 1);
  CHECK_FALSE(fit_session({a}, 0).fitted());
  const Calibration c = calibrate({a});
  const auto json = calibrated_model(c, {a}, load_perf_model("rtx3090-distilbert"), "one", "sim");
  CHECK_FALSE(json.contains("session"));
  // Regimes: the shapes below a knee of 10,000 tokens compare, none from it.
  const Trace b = session_profile(dir, "b.csv", 0.05, 3);
  const SessionFit split = fit_session({a, b}, 10000);
  CHECK(split.shapes_above == 0);
  CHECK(split.above_pp == kCampaignSessionAbovePp);  // the campaigns' figure, said so
  CHECK(split.source.find("the other regime takes the campaigns' figure") != std::string::npos);
}
