#include "sweep/bench.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/error.hpp"
#include "sweep/cells.hpp"
#include "sweep/grid.hpp"
#include "sweep/run.hpp"

namespace fs = std::filesystem;

namespace ddpsim {

namespace {

// This process's CPU and that of its children waited for, in seconds.
double cpu_seconds() {
  double s = 0;
  for (const int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    ::getrusage(who, &u);
    s += double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  }
  return s;
}

// The sweep file of a grid: `study` differs by seed only (the embedded default's six policies,
// 800 steps, fast mode); `small` by seed and global batch, 5 steps of static and minmax.
nlohmann::json sweep_file(const std::string& grid, int cells) {
  nlohmann::json seeds = nlohmann::json::array();
  if (grid == "study") {
    for (int i = 0; i < cells; ++i) seeds.push_back(i);
    return {{"axes", {{"training.seed", seeds}}}};
  }
  const int batches = std::max(1, std::min(100, cells / 100));
  nlohmann::json sizes = nlohmann::json::array();
  for (int k = 1; k <= batches; ++k) sizes.push_back(4 * k);
  for (int i = 0; i < std::max(1, cells / batches); ++i) seeds.push_back(i);
  return {{"set", {{"training.steps", 5}}},
          {"axes", {{"training.seed", seeds}, {"training.global_batch", sizes}}},
          {"policies", {"static", "minmax:buffer=256"}}};
}

}  // namespace

SweepBenchResult run_sweep_bench(const std::string& grid_name, double scale, int jobs) {
  SweepBenchResult r;
  r.grid = grid_name;
  r.jobs = jobs;
  const bool small = grid_name == "small";
  r.target_s = 60;
  r.target_cpu_ms = small ? 5 : 0;
  const fs::path dir = fs::temp_directory_path() / ("ddpsim-sweep-bench." + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};
  std::ofstream(dir / "sweep.json")
      << sweep_file(grid_name, std::max(2, static_cast<int>((small ? 10'000 : 1000) * scale))).dump() << "\n";

  const double cpu_before = cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  const SweepSpec spec = read_sweep((dir / "sweep.json").string());
  const SweepGrid grid = expand(spec);
  std::vector<std::size_t> todo(grid.cells.size());
  for (std::size_t i = 0; i < todo.size(); ++i) todo[i] = i;
  run_cells(spec, grid, todo, jobs, dir / "out" / "cells");
  [[maybe_unused]] const std::string csv = results_csv(grid, collect_cells(grid, {dir / "out"}));
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.cpu_s = cpu_seconds() - cpu_before;
  r.cells = static_cast<int>(grid.cells.size());
  r.cells_per_s = r.cells / r.wall_s;
  const Config first = cell_config(spec, grid, grid.cells.front());
  r.policies = static_cast<int>(first.policies.size());
  r.steps = first.training.steps;
  return r;
}

}  // namespace ddpsim
