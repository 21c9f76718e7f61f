// calibrate --pool-run-levels: earlier models' run levels read with their provenance, refused
// where a run would count twice, and pooled each about its own model's mean.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "calib/pooled_levels.hpp"
#include "common/error.hpp"

using namespace ddpsim;

namespace {

// A model file holding only what pooling reads: levels, its machine, its training traces' hashes.
std::string write_model(const std::string& name, const nlohmann::json& levels, const std::vector<std::string>& hashes) {
  const auto dir = std::filesystem::temp_directory_path() / "ddpsim-pooled-levels-test";
  std::filesystem::create_directories(dir);
  nlohmann::json traces = nlohmann::json::array();
  for (const std::string& h : hashes)
    traces.push_back({{"file", "runs/" + h + ".csv"}, {"fnv1a64", h}, {"role", "training"}});
  traces.push_back({{"file", "profile.csv"}, {"fnv1a64", "ffff"}});  // a profile is no run
  const nlohmann::json doc = {{"name", name},
                              {"gpu", "CPU: test"},
                              {"run_level", {{"spread", 0.1}, {"levels", levels}, {"source", "test"}}},
                              {"calibration", {{"traces", traces}}}};
  const std::string path = (dir / (name + ".json")).string();
  std::ofstream(path) << doc.dump();
  return path;
}

std::string message(const std::vector<std::string>& paths,
                    const std::vector<std::pair<std::string, std::string>>& own = {}) {
  try {
    read_pooled_run_levels(paths, own);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("each model's levels pool about their own mean") {
  const std::string a = write_model("a", {{"x", 1.0}, {"y", 1.21}}, {"a1", "a2"});
  const std::string b = write_model("b", {{"x", 2.0}, {"y", 2.0}, {"z", 2.0}}, {"b1", "b2", "b3"});
  const auto pooled = read_pooled_run_levels({a, b}, {{"own.csv", "c1"}});
  REQUIRE(pooled.size() == 2);
  CHECK(pooled[0].gpu == "CPU: test");
  CHECK(pooled[1].levels.size() == 3);
  const LevelSquares s = pooled_squares(pooled);
  // a: logs 0 and ln 1.21 about their mean; b's ×2 all alike adds nothing but two degrees of freedom.
  const double half = std::log(1.21) / 2;
  CHECK(s.squares == doctest::Approx(2 * half * half));
  CHECK(s.df == 3);
}

TEST_CASE("a model that cannot be pooled is refused by name") {
  const std::string one = write_model("one", {{"x", 1.0}}, {"o1"});
  CHECK(message({one}).find(one + ": run_level holds 1 level, and a spread needs two") == 0);
  const std::string zero = write_model("zero", {{"x", 1.0}, {"y", 0.0}}, {"z1", "z2"});
  CHECK(message({zero}).find(zero + ": run_level: levels: y is 0.0: expected a level > 0") == 0);
  const auto dir = std::filesystem::temp_directory_path() / "ddpsim-pooled-levels-test";
  const std::string bare = (dir / "bare.json").string();
  std::ofstream(bare) << R"({"name": "bare", "forward_ms": {"a": 1}})";
  CHECK(message({bare}).find(bare + ": no run_level: --pool-run-levels takes models") == 0);
}

TEST_CASE("a run is counted once") {
  const std::string a = write_model("a", {{"x", 1.0}, {"y", 1.1}}, {"a1", "a2"});
  const std::string again = write_model("again", {{"x", 1.0}, {"y", 1.1}}, {"q1", "a2"});
  CHECK(message({a}, {{"mine.csv", "a1"}}).find(a + ": its training run runs/a1.csv is this calibration's --training "
                                                    "mine.csv (the same bytes)") == 0);
  CHECK(message({a, again}).find(again + ": its training run runs/a2.csv is " + a) == 0);
  CHECK(message({a, a}).find(a + ": given twice to --pool-run-levels") == 0);
  CHECK_THROWS_AS(read_pooled_run_levels({a, a}, {}), UsageError);
  CHECK(message({a}, {{"profile.csv", "ffff"}}).empty());  // a profile's hash is no training run
}
