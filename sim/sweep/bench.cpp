#include "sweep/bench.hpp"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "sweep/grid.hpp"
#include "sweep/run.hpp"

namespace fs = std::filesystem;

namespace ddpsim {

SweepBenchResult run_sweep_bench(double scale, int jobs) {
  SweepBenchResult r;
  r.cells = std::max(2, static_cast<int>(1000 * scale));
  r.jobs = jobs;
  r.target_s = 60;
  // Cells differ by seed only: the study's setting (the embedded default's six policies, 800
  // steps, fast mode) a thousand times over.
  const fs::path dir = fs::temp_directory_path() / ("ddpsim-sweep-bench." + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  nlohmann::json seeds = nlohmann::json::array();
  for (int i = 0; i < r.cells; ++i) seeds.push_back(i);
  std::ofstream(dir / "sweep.json") << nlohmann::json{{"axes", {{"training.seed", seeds}}}}.dump() << "\n";

  const auto start = std::chrono::steady_clock::now();
  const SweepSpec spec = read_sweep((dir / "sweep.json").string());
  const SweepGrid grid = expand(spec);
  std::vector<std::size_t> todo(grid.cells.size());
  for (std::size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  run_cells(spec, grid, todo, jobs, dir / "out" / "cells");
  [[maybe_unused]] const std::string csv = results_csv(grid, collect_cells(grid, {dir / "out"}));
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cells_per_s = r.cells / r.wall_s;
  const Config first = cell_config(spec, grid, grid.cells.front());
  r.policies = static_cast<int>(first.policies.size());
  r.steps = first.training.steps;
  return r;
}

}  // namespace ddpsim
