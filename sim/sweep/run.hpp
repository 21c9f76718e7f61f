// Running a grid's cells in worker processes and turning finished cells into results.csv.
// SimGrid keeps one engine per process, so parallel cells need processes, not threads; each
// worker writes its cell whole (DIR/cells/<hash>.json, the cell's summary.json) or not at all,
// so a killed sweep loses only the cells in flight and a rerun finds the rest.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/grid.hpp"

namespace ddpsim {

// The cell file of `hash` in `cells_dir`, if it exists and holds that cell's results; a file
// that does not (damaged, or another config) is an error naming it.
std::optional<nlohmann::ordered_json> load_cell(const std::filesystem::path& cells_dir, const std::string& hash);

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

// Tidy results: one row per cell × policy, a column per swept key, every summary metric but the
// measured decision times (so that the file depends on the inputs alone), and the gain of each
// policy over the cell's first. `cells[i]` is grid.cells[i]'s file.
std::string results_csv(const SweepGrid& grid, const std::vector<nlohmann::ordered_json>& cells);

// Every cell of `grid`, looked up in each of `dirs`' cells/ folders in turn; throws InputError
// listing how many are missing (and the first few) when some are nowhere.
std::vector<nlohmann::ordered_json> collect_cells(const SweepGrid& grid,
                                                  const std::vector<std::filesystem::path>& dirs);

// The notes the cells' runs kept in their provenance (a cell's data beyond its model's measured
// shapes is known only once its worker loads it), each once with its cells, less the grid's own.
std::vector<std::string> cell_note_lines(const SweepGrid& grid, const std::vector<nlohmann::ordered_json>& cells);

// Processors this process may run on (Slurm and taskset restrict them): the default --jobs.
int available_cores();

}  // namespace ddpsim
