// Running a grid's cells in worker processes (sweep/cells.hpp reads the finished ones back).
// SimGrid keeps one engine per process, so parallel cells need processes, not threads; each
// worker writes its cell whole (DIR/cells/<hash>.json, the cell's summary.json) or not at all,
// so a killed sweep loses only the cells in flight and a rerun finds the rest.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <vector>

#include "sweep/grid.hpp"

namespace ddpsim {

struct CellRunStats {
  std::size_t ran = 0;
  double wall_s = 0;
};

// Runs `todo` (indices into grid.cells), at most `jobs` at once, each in a forked worker; calls
// `progress(done, total)` as cells finish. On a failing cell, lets the running ones finish, then
// throws InputError naming the cell and its reason.
CellRunStats run_cells(const SweepSpec& spec, const SweepGrid& grid, const std::vector<std::size_t>& todo, int jobs,
                       const std::filesystem::path& cells_dir,
                       const std::function<void(std::size_t, std::size_t)>& progress = {});

// Processors this process may run on (Slurm and taskset restrict them): the default --jobs.
int available_cores();

}  // namespace ddpsim
