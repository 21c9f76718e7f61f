// A sweep's finished cells: each read back and checked (DIR/cells/<hash>.json, the cell's
// summary.json), gathered from several folders, and turned into results.csv and notes.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/grid.hpp"

namespace ddpsim {

// The cell file of `hash` in `cells_dir`, if it exists and holds that cell's results; a file
// that does not (damaged, or another config) is an error naming it.
std::optional<nlohmann::ordered_json> load_cell(const std::filesystem::path& cells_dir, const std::string& hash);

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

}  // namespace ddpsim
