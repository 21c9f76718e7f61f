// calibrate --pool-run-levels: earlier models' run levels read with their provenance, refused
// where a run would count twice, and pooled each about its own model's mean.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "calib/pooled_levels.hpp"
#include "common/error.hpp"

using namespace ddpsim;

namespace {

// A folder of this process's own: test runs side by side do not share it.
std::filesystem::path folder() {
  const auto dir = std::filesystem::temp_directory_path() / ("ddpsim-pooled-levels-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// A model file holding only what pooling reads: levels, its machine, its training traces (each
// named by its hash, with `metadata`).
std::string write_model(const std::string& name, const nlohmann::json& levels, const std::vector<std::string>& hashes,
                        const nlohmann::json& metadata = nlohmann::json::object()) {
  nlohmann::json traces = nlohmann::json::array();
  for (const std::string& h : hashes)
    traces.push_back({{"file", h + ".csv"},
                      {"fnv1a64", h},
                      {"role", "training"},
                      {"metadata", metadata.value(h, nlohmann::json::object())}});
  traces.push_back({{"file", "profile.csv"}, {"fnv1a64", "ffff"}});  // a profile is no run
  const nlohmann::json doc = {{"name", name},
                              {"gpu", "CPU: test"},
                              {"run_level", {{"spread", 0.1}, {"levels", levels}, {"source", "test"}}},
                              {"calibration", {{"traces", traces}}}};
  const std::string path = (folder() / (name + ".json")).string();
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

TEST_CASE("runs trained in turn are pooled about their own process's mean, as calibrate took them") {
  // Two processes each training the same two policies in turn, the second 2× the first: about
  // one mean the spread would be that 2×; about each process's, only the runs' 10% apart.
  const nlohmann::json first = {{"interleaved", "static,sorted"}, {"seed", "0"}, {"policy", "static"}};
  nlohmann::json meta = {{"p1", first}, {"p2", first}, {"p3", first}, {"p4", first}};
  meta["p2"]["policy"] = meta["p4"]["policy"] = "sorted";
  meta["p3"]["seed"] = meta["p4"]["seed"] = "2";
  const nlohmann::json levels = {{"p1.csv", 1.0}, {"p2.csv", 1.1}, {"p3.csv", 2.0}, {"p4.csv", 2.2}};
  const std::string turns = write_model("turns", levels, {"p1", "p2", "p3", "p4"}, meta);
  const LevelSquares s = pooled_squares(read_pooled_run_levels({turns}, {}));
  const double half = std::log(1.1) / 2;
  CHECK(s.squares == doctest::Approx(4 * half * half));
  CHECK(s.df == 2);
  // Not trained in turn (no `interleaved` line): the processes' drift is the runs' too.
  for (auto& [key, m] : meta.items()) m.erase("interleaved");
  const LevelSquares apart =
      pooled_squares(read_pooled_run_levels({write_model("apart", levels, {"p1", "p2", "p3", "p4"}, meta)}, {}));
  CHECK(apart.df == 3);
  CHECK(apart.squares > 10 * s.squares);
}

TEST_CASE("a model that cannot be pooled is refused by name") {
  const std::string one = write_model("one", {{"x", 1.0}}, {"o1"});
  CHECK(message({one}).find(one + ": run_level holds 1 level(s), and a spread needs two") == 0);
  const std::string zero = write_model("zero", {{"x", 1.0}, {"y", 0.0}}, {"z1", "z2"});
  CHECK(message({zero}).find(zero + ": run_level: levels: y is 0.0: expected a level in (0, 100]") == 0);
  const std::string bare = (folder() / "bare.json").string();
  std::ofstream(bare) << R"({"name": "bare", "forward_ms": {"a": 1}})";
  CHECK(message({bare}).find(bare + ": no run_level: --pool-run-levels takes models") == 0);
}

TEST_CASE("a run is counted once") {
  const std::string a = write_model("a", {{"x", 1.0}, {"y", 1.1}}, {"a1", "a2"});
  const std::string again = write_model("again", {{"x", 1.0}, {"y", 1.1}}, {"q1", "a2"});
  CHECK(message({a}, {{"mine.csv", "a1"}})
            .find(a + ": its training run a1.csv has the same bytes as this "
                      "calibration's --training mine.csv") == 0);
  CHECK(message({a, again}).find(again + ": its training run a2.csv has the same bytes as a training run of " + a) ==
        0);
  CHECK(message({a, a}).find(a + ": given twice to --pool-run-levels") == 0);
  CHECK_THROWS_AS(read_pooled_run_levels({a, a}, {}), UsageError);
  CHECK(message({a}, {{"profile.csv", "ffff"}}).empty());  // a profile's hash is no training run
}
