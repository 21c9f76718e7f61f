// Sweep grids: expansion order, zipped groups, labels, hashes and the results.csv format.
#include <doctest/doctest.h>

#include <fstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "sweep/cells.hpp"
#include "sweep/grid.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {
SweepSpec spec_of(const test::TempDir& dir, const std::string& text) {
  std::ofstream(dir / "s.json") << text;
  return read_sweep(dir / "s.json");
}
}  // namespace

TEST_CASE("axes multiply in the order written, the last fastest; zipped keys move together") {
  test::TempDir dir;
  const SweepSpec spec = spec_of(dir, R"({"set": {"training.steps": 5},
    "axes": {"training.world_size": [2, 4], "training.global_batch": [16, 32, 48]},
    "zip": [{"label.noise": ["low", "high"], "simulation.noise_sigma": [0.01, 0.2]}]})");
  CHECK(spec.keys() == std::vector<std::string>{"training.world_size", "training.global_batch", "label.noise",
                                                "simulation.noise_sigma"});
  REQUIRE(spec.cell_count() == 12);
  const SweepGrid grid = expand(spec);
  REQUIRE(grid.cells.size() == 12);
  CHECK(grid.describe(grid.cells[0]) ==
        "cell 0 (training.world_size=2, training.global_batch=16, label.noise=low, simulation.noise_sigma=0.01)");
  CHECK(grid.describe(grid.cells[11]) ==
        "cell 11 (training.world_size=4, training.global_batch=48, label.noise=high, simulation.noise_sigma=0.2)");
  CHECK(grid.cells[1].values[2] == "high");
  CHECK(grid.cells[2].values[1] == 32);

  // Each cell is its resolved config: the set value and its own values, never the label.
  const Config c = cell_config(spec, grid, grid.cells[5]);
  CHECK(c.training.steps == 5);
  CHECK(c.training.world_size == 2);
  CHECK(c.training.global_batch == 48);
  CHECK(c.simulation.noise_sigma == 0.2);
  CHECK(grid.cells[5].hash == fnv1a64_hex(c.resolved.dump()));
  CHECK_FALSE(c.resolved.contains("label"));
}

TEST_CASE("a cell's hash depends on its config, not on the sweep that asked for it") {
  test::TempDir dir;
  const SweepGrid a = expand(spec_of(dir, R"({"axes": {"training.world_size": [2, 4]}})"));
  const SweepGrid b = expand(spec_of(dir, R"({"axes": {"training.world_size": [8, 4], "training.steps": [800]}})"));
  CHECK(a.cells[1].hash == b.cells[1].hash);
  CHECK(a.cells[0].hash != b.cells[0].hash);
  CHECK(a.hash != b.hash);  // the grids differ all the same
}

TEST_CASE("sweep.json reads back as the same grid, and an edited one is refused") {
  test::TempDir dir;
  const SweepGrid grid = expand(spec_of(dir, R"({"axes": {"platform.topology": ["pcie", "nvlink"]}})"));
  std::ofstream(dir / "sweep.json") << grid_json(grid).dump(1);
  const SweepGrid back = grid_from_json(dir / "sweep.json");
  CHECK(back.hash == grid.hash);
  CHECK(back.keys == grid.keys);
  REQUIRE(back.cells.size() == 2);
  CHECK(back.cells[1].values[0] == "nvlink");
  auto edited = grid_json(grid);
  edited["cells"][0]["cell"] = "0000000000000000";
  std::ofstream(dir / "sweep.json") << edited.dump();
  CHECK_THROWS_WITH_AS(grid_from_json(dir / "sweep.json"), doctest::Contains("grid_hash does not match its cells"),
                       InputError);
}

TEST_CASE("results.csv: values as text (lists quoted), empty fields for missing metrics, gains vs the first policy") {
  SweepGrid grid;
  grid.keys = {"simulation.rank_speed", "label.name"};
  SweepCell cell;
  cell.hash = "00000000000000aa";
  cell.values = {nlohmann::json::parse("[1.5,1]"), "two \"quoted\""};
  grid.cells.push_back(cell);
  auto doc = nlohmann::ordered_json::parse(R"({"config": {}, "policies": {
    "static": {"steps": 3, "mean_max_step_ms": 200, "p95_max_step_ms": 250, "mean_std_step_ms": null},
    "minmax:buffer=64": {"steps": 3, "mean_max_step_ms": 150, "p95_max_step_ms": 300}}})");
  const std::string csv = results_csv(grid, {doc});
  const auto first_line = csv.substr(0, csv.find('\n'));
  CHECK(first_line.rfind("cell,simulation.rank_speed,label.name,policy,steps,mean_max_step_ms,", 0) == 0);
  CHECK(first_line.find(",gain_pct,p95_gain_pct,gain_per,gain_lo95,gain_hi95,gain_mostly,step_lo95,step_hi95,step_mostly") ==
        first_line.size() - 95);
  CHECK(csv.find("\n00000000000000aa,\"[1.5,1]\",\"two \"\"quoted\"\"\",static,3,200,250,") != std::string::npos);
  CHECK(csv.find(",minmax:buffer=64,3,150,300,") != std::string::npos);
  CHECK(csv.find(",25,-20,step,,,,,,\n") != std::string::npos);  // 1 - 150/200, 1 - 300/250; no interval
  CHECK(csv.find(",0,0,step,,,,,,\n") != std::string::npos);
  // A policy taking 60 samples a step against 48 gains on time per sample: 1 - (150/60)/(200/48).
  doc["policies"]["static"]["mean_global_batch"] = 48;
  doc["policies"]["minmax:buffer=64"]["mean_global_batch"] = 60;
  const std::string per_sample = results_csv(grid, {doc});
  CHECK(per_sample.find(",40,4,sample,,,,,,\n") != std::string::npos);  // and 1 - (300/60)/(250/48)
  // A cell that recorded each gain's prediction interval gives its bounds and its widest source.
  doc["gain_predictions"] = {{"minmax:buffer=64", {{"prediction_interval", {36.5, 43.5}}, {"mostly", "session"}}}};
  CHECK(results_csv(grid, {doc}).find(",40,4,sample,36.5,43.5,session,,,\n") != std::string::npos);
  // And each mean step's, the first policy's too.
  doc["step_predictions"] = {{"static", {{"prediction_interval_ms", {150, 250}}, {"mostly", "training loop"}}}};
  CHECK(results_csv(grid, {doc}).find(",static,3,200,250,") != std::string::npos);
  CHECK(results_csv(grid, {doc}).find(",0,0,step,,,,150,250,training loop\n") != std::string::npos);
}

TEST_CASE("bad sweeps name the file and the key") {
  test::TempDir dir;
  const auto fails = [&](const std::string& text, const std::string& expected) {
    CAPTURE(text);
    CHECK_THROWS_WITH_AS(expand(spec_of(dir, text)), doctest::Contains(expected.c_str()), InputError);
  };
  fails(R"({"axes": {"training.steps": []}})", "is an empty list");
  fails(R"({"zip": [{"a": [1], "b": [1, 2]}]})", "zipped lists move together");
  fails(R"({"axes": {"training.steps": [5]}, "zip": [{"training.steps": [6]}]})", "are both swept");
  fails(R"({"axes": {"": [5]}})", "an empty key");
  fails(R"({"axes": {"training..steps": [5]}})", "empty key segment");
  fails(R"({"axes": {"training.steps.x": [5]}})", "\"x\" is inside a non-object value");
  fails(R"({"axes": {"training.steps": [5, 5]}})", "is the same config as cell 0");
  fails(R"({"axes": {"training.steps": [5]}, "base": 3})", "key \"base\" is number 3");
}
