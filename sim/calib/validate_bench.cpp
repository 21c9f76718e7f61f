#include "calib/validate_bench.hpp"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "calib/trace_reader.hpp"
#include "calib/validate.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {

// A folder of its own for the traces, removed however the bench ends.
struct ScratchDir {
  std::filesystem::path path;
  ScratchDir() {
    std::string name = (std::filesystem::temp_directory_path() / "ddpsim-bench-XXXXXX").string();
    if (!::mkdtemp(name.data())) throw std::runtime_error("bench: cannot create a folder under the temp directory");
    path = name;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

}  // namespace

ValidateBenchResult run_validate_bench(double scale) {
  ValidateBenchResult r;
  r.steps = static_cast<int>(50'000 * scale);
  r.target_s = scale == 1.0 ? 3 : 0;
  nlohmann::json doc = default_config_json();
  doc["training"]["steps"] = r.steps;
  doc["policies"] = {"static", "minmax"};
  const Config config = parse_config(doc, "bench", "");
  const auto source = make_length_source(config.data, config.training.max_length);
  const SimulationRun sim = simulate(config, config_dataset(config, *source));
  ScratchDir dir;
  for (const PolicyRun& run : sim.runs)
    std::ofstream(dir.path / (run.label + ".csv")) << trace_csv({run}, {{"device", "simulated"}});
  r.rows = static_cast<long>(sim.runs.front().rows.size());

  const auto start = std::chrono::steady_clock::now();
  const Trace measured = read_trace(dir.path / "minmax.csv"), baseline = read_trace(dir.path / "static.csv");
  const Validation v = validate(measured, config, &baseline);
  const std::size_t written =
      validation_report(v).size() + validation_json(v, measured, "bench").dump().size() + validation_csv(v).size();
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (written == 0) throw std::runtime_error("bench: the validation wrote nothing");
  return r;
}

}  // namespace ddpsim
