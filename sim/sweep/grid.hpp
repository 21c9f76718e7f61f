// A sweep file expanded into cells: a base config, fixed overrides, axes over config keys
// (cartesian product) and zipped groups of keys that move together. Every cell is a whole
// config, validated before anything runs and named by the hash of its resolved form, so a
// finished cell is found again whichever sweep, shard or rerun asks for it.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/config.hpp"
#include "sweep/notes.hpp"

namespace ddpsim {

// Grids above this many cells are refused: each cell is a full simulation, and the grid is
// held in memory.
inline constexpr std::size_t MAX_SWEEP_CELLS = 100000;

// One dimension of the grid: a single axis, or a zipped group (several keys, one value each
// per position).
struct SweepDimension {
  std::vector<std::string> keys;
  std::vector<std::vector<nlohmann::json>> values;  // values[position][key]
};

struct SweepSpec {
  std::string origin;       // the sweep file
  std::string base_origin;  // the base config file, or "embedded default config"
  std::string base_dir;     // anchors the cells' relative paths
  nlohmann::json base;      // the base config with the sweep's "set" and "policies" applied
  bool policies_given = false;
  std::vector<SweepDimension> dimensions;  // first varies slowest

  std::vector<std::string> keys() const;  // every swept key, in column order
  std::size_t cell_count() const;
};

struct SweepCell {
  std::size_t index = 0;
  std::string hash;                    // fnv1a64 of the resolved config
  std::vector<nlohmann::json> values;  // one per swept key
  // The dataset its worker may share with the cells before it: a hash of the data source,
  // max_length and seed, and the world size its permutation is sharded over; "" for a
  // pipeline job (and a grid read back from sweep.json), whose worker builds what it reads.
  std::string dataset_key;
  int world_size = 0;
};

struct SweepGrid {
  std::vector<std::string> keys;
  std::vector<SweepCell> cells;
  std::string hash;  // of the keys and every cell's hash: shards of one sweep share it
  // The cells' config notes, each once with the cells that gave it (expand's, not a read-back grid's).
  CellNotes notes;

  // "cell 3 (training.world_size=8, platform.topology=nvlink)", for messages.
  std::string describe(const SweepCell& cell) const;
  // The notes as lines (ddpsim::note_lines).
  std::vector<std::string> note_lines() const;
};

// Reads and checks a sweep file (unknown keys, empty axes, zipped lists of unequal length, a
// key swept twice, grids over MAX_SWEEP_CELLS); throws InputError naming the file and key.
SweepSpec read_sweep(const std::string& path);

// Every cell's config, validated; `progress(done, total)` is called as cells are checked.
SweepGrid expand(const SweepSpec& spec, const std::function<void(std::size_t, std::size_t)>& progress = {});

// The validated config of one cell; errors name the sweep file and the cell.
Config cell_config(const SweepSpec& spec, const SweepGrid& grid, const SweepCell& cell);

// "label.NAME" keys are results.csv columns only, never set in the config: names for values
// that are hard to read in a column (a rank_speed list as "straggler_factor").
inline bool is_label(const std::string& key) {
  return key.rfind("label.", 0) == 0;
}

// A value as a results.csv field and in messages: strings bare, everything else as JSON.
std::string value_text(const nlohmann::json& value);

// sweep.json: the grid, which --merge reads back with grid_from_json.
nlohmann::ordered_json grid_json(const SweepGrid& grid);
SweepGrid grid_from_json(const std::string& path);

}  // namespace ddpsim
