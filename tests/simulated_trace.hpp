// Traces simulated from a known model, for tests that must recover it (calibrate) or replay it
// exactly (validate).
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_util.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"
#include "report/outputs.hpp"
#include "test_data.hpp"

namespace ddpsim::test {

// A known model whose three terms all matter at these lengths.
inline nlohmann::json known_model(double sigma) {
  nlohmann::json m = read_json_file(DDPSIM_SOURCE_DIR "/models/rtx3090-distilbert.json");
  m["name"] = "known";
  m["forward_ms"] = {{"a", 2.0}, {"beta", 0.002}, {"gamma", 1e-5}};
  m["backward_ms"] = {{"a", 4.0}, {"beta", 0.004}, {"gamma", 2e-5}};
  m["optimizer_ms"] = 1.5;
  m["noise"] = {{"sigma", sigma}};
  m.erase("platform");  // the tests' platform is the config's
  return m;
}

// Simulated steps of three policies over wide lengths, written as a trace file.
inline std::string simulated_trace(const TempDir& dir, double sigma, const std::string& name,
                                   std::vector<std::string> policies, int steps = 300,
                                   const std::string& attention = "padded") {
  std::ofstream(dir / (name + ".json")) << known_model(sigma).dump();
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 45}, {"min", 8}, {"max", 250}, {"samples", 20000}}},
      {"training", {{"world_size", 4}, {"global_batch", 48}, {"steps", steps}, {"seed", 3}, {"attention", attention}}},
      {"policies", policies},
      {"model", dir / (name + ".json")}};
  const Config config = parse_config(doc, "test", "");
  const auto dataset = make_length_source(config.data, 256)->dataset(3);
  const SimulationRun sim = simulate(config, dataset);
  const std::string path = dir / (name + ".csv");
  std::ofstream(path) << trace_csv(sim.runs, {{"device", "simulated"}});
  return path;
}

}  // namespace ddpsim::test
