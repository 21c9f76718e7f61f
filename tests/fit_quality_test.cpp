// The fit-quality gate: a profile the forms cannot follow makes calibrate warn, naming the phase,
// the figure and a remedy; the model keeps the warning, and every prediction with it repeats it.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>

#include "calib/calibrate.hpp"
#include "common/rng.hpp"
#include "profile_row.hpp"
#include "report/outputs.hpp"
#include "test_data.hpp"

using namespace ddpsim;
using ddpsim::test::profile_row;
using ddpsim::test::TempDir;

namespace {

// One rank's profile of 8×8 shapes, 5 repetitions each with σ 0.02 of their own; each shape's
// level is the quadratic surface times exp(lift·z), the same for all its repetitions.
std::string profile(const TempDir& dir, double lift, const std::string& name) {
  Rng rng(7);
  PolicyRun run{"profile", "", 1, {}, {}};
  for (int b : {1, 2, 4, 8, 12, 16, 24, 32})
    for (int L : {8, 16, 32, 48, 64, 96, 128, 192}) {
      const double level = (2 + 0.002 * b * L + 1e-5 * b * L * L) * std::exp(lift * rng.normal());
      for (int r = 0; r < 5; ++r)
        run.rows.push_back(profile_row(static_cast<int>(run.rows.size()), b, L, level * std::exp(0.02 * rng.normal())));
    }
  const std::string path = dir / name;
  std::ofstream(path) << trace_csv({run}, {{"world_size", "1"}, {"profile", "one rank"}});
  return path;
}

}  // namespace

TEST_CASE("a profile whose shapes scatter far off any surface makes calibrate warn, and the model keeps it") {
  TempDir dir;
  const std::string path = profile(dir, 0.6, "scattered.csv");
  const Calibration c = calibrate({read_trace(path)});
  REQUIRE(c.fit_warnings.size() == 2);
  CHECK(c.fit_warnings[0].find("forward: held-out MAPE") != std::string::npos);
  CHECK(c.fit_warnings[1].find("backward: held-out MAPE") != std::string::npos);
  CHECK(fit_warning_text(c).find("--profile-reps") != std::string::npos);
  const auto json = calibrated_model(c, {read_trace(path)}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  const PerfModel m = parse_perf_model(nlohmann::json::parse(json.dump()), "fitted");
  CHECK(m.fit_heldout_mape > kPoorHeldoutMape);
  CHECK(m.fit_warning == fit_warning_text(c));
}

TEST_CASE("a profile the forms follow gives no warning, and records its held-out error") {
  TempDir dir;
  const std::string path = profile(dir, 0.0, "smooth.csv");
  const Calibration c = calibrate({read_trace(path)});
  CHECK(c.fit_warnings.empty());
  const auto json = calibrated_model(c, {read_trace(path)}, load_perf_model("rtx3090-distilbert"), "fit", "sim");
  CHECK_FALSE(json["fit_quality"].contains("warning"));
  CHECK(json["fit_quality"]["heldout_mape"].get<double>() < 0.05);
}
