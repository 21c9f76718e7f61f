#include "sweep/grid.hpp"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/input_file.hpp"
#include "common/json_util.hpp"
#include "report/outputs.hpp"

namespace fs = std::filesystem;

namespace ddpsim {

namespace {

// "training" and "training.steps" cannot both be set: one would silently undo the other.
std::string count(std::size_t n) {
  return std::to_string(n) + (n == 1 ? " value" : " values");
}

bool overlaps(const std::string& a, const std::string& b) {
  const auto& [shorter, longer] = a.size() <= b.size() ? std::tie(a, b) : std::tie(b, a);
  return longer.compare(0, shorter.size(), shorter) == 0 &&
         (longer.size() == shorter.size() || longer[shorter.size()] == '.');
}

void set_value(nlohmann::json& doc, const std::string& key, nlohmann::json value, const std::string& where) {
  if (key.empty()) throw InputError(where + ": an empty key (expected a config path such as training.world_size)");
  if (const std::string why = set_by_path(doc, key, std::move(value)); !why.empty())
    throw InputError(where + ": key \"" + key + "\": " + why);
}

nlohmann::json plain(const nlohmann::ordered_json& value) {
  return nlohmann::json::parse(value.dump());
}

// One axis' list: non-empty.
const nlohmann::ordered_json& axis_values(const nlohmann::ordered_json& list, const std::string& where) {
  if (!list.is_array()) throw wrong_type(plain(list), where, "a non-empty array of values");
  if (list.empty()) throw InputError(where + " is an empty list: the grid would have no cells");
  return list;
}

std::string grid_hash(const std::vector<std::string>& keys, const std::vector<SweepCell>& cells) {
  std::uint64_t h = fnv1a64("ddpsim-sweep/1");
  for (const auto& key : keys) h = fnv1a64(key + "\n", h);
  for (const auto& cell : cells) h = fnv1a64(cell.hash, h);
  return fnv1a64_hex(std::to_string(h));
}

}  // namespace

std::vector<std::string> SweepSpec::keys() const {
  std::vector<std::string> all;
  for (const auto& d : dimensions) all.insert(all.end(), d.keys.begin(), d.keys.end());
  return all;
}

std::size_t SweepSpec::cell_count() const {
  std::size_t n = 1;
  for (const auto& d : dimensions) n *= d.values.size();  // read_sweep bounded the product
  return n;
}

SweepSpec read_sweep(const std::string& path) {
  const std::string text = read_input_file(path, "sweep file");
  const nlohmann::json doc = parse_json(text, path);  // strictly: duplicate keys refused
  // The same text again in written order: axes become columns in the order the user gave.
  const auto ordered = nlohmann::ordered_json::parse(text);
  const auto as_written = [&](const char* key) -> const nlohmann::ordered_json& { return ordered.at(key); };
  if (!doc.is_object())
    throw InputError(path + ": expected a JSON object with base, set, axes, zip and policies, got " +
                     std::string(doc.type_name()));
  refuse_other_kind(doc, path, FileKind::sweep_file);
  JsonFields f(doc, path);
  SweepSpec s;
  s.origin = path;
  const fs::path dir = fs::path(path).parent_path();
  if (f.has("base")) {
    fs::path base = f.require<std::string>("base");
    if (base.empty())
      throw InputError(path + ": key \"base\" is empty: expected a config file (or no key: the embedded default)");
    if (base.is_relative()) base = (dir / base).lexically_normal();
    try {
      s.base = read_config_json(base.string());
    } catch (const InputError& e) {
      throw InputError(path + ": key \"base\": " + e.what());
    }
    s.base_origin = base.string();
    s.base_dir = base.parent_path().string();
  } else {
    s.base = default_config_json();
    s.base_origin = "embedded default config";
    s.base_dir = dir.string();
  }

  std::vector<std::string> fixed;
  if (f.has("set")) {
    const auto& set = f.raw("set");
    if (!set.is_object()) throw wrong_type(set, path + ": key \"set\"", "an object of config keys and values");
    for (const auto& [key, value] : set.items()) {
      if (is_label(key))
        throw InputError(path + ": set: \"" + key +
                         "\" is a label, a results.csv column that names swept values: "
                         "put it in axes or zip beside the key it names");
      set_value(s.base, key, value, path + ": set");
      fixed.push_back(key);
    }
  }
  if (f.has("policies")) {
    s.base["policies"] = convert<std::vector<std::string>>(f.raw("policies"), path + ": key \"policies\"");
    s.policies_given = true;
    fixed.emplace_back("policies");
  }
  if (f.has("axes")) {
    const auto& axes = f.raw("axes");
    if (!axes.is_object()) throw wrong_type(axes, path + ": key \"axes\"", "an object of config keys and value lists");
    for (const auto& [key, list] : as_written("axes").items()) {
      SweepDimension d;
      d.keys = {key};
      for (const auto& v : axis_values(list, path + ": axes: \"" + key + "\"")) d.values.push_back({plain(v)});
      s.dimensions.push_back(std::move(d));
    }
  }
  if (f.has("zip")) {
    const auto& groups = f.raw("zip");
    if (!groups.is_array())
      throw wrong_type(groups, path + ": key \"zip\"", "an array of objects, each of keys with equally long lists");
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::string where = path + ": zip[" + std::to_string(g) + "]";
      if (!groups[g].is_object())
        throw wrong_type(groups[g], where, "an object of config keys with lists of equal length");
      if (groups[g].empty())
        throw InputError(where + ": an empty object: a zip group names at least one key with its list of values");
      SweepDimension d;
      std::string first;
      for (const auto& [key, list] : as_written("zip")[g].items()) {
        const auto& values = axis_values(list, where + ": \"" + key + "\"");
        if (d.keys.empty()) {
          d.values.resize(values.size());
          first = key;
        } else if (values.size() != d.values.size()) {
          throw InputError(where + ": \"" + key + "\" lists " + count(values.size()) + ", \"" + first + "\" " +
                           count(d.values.size()) + ": zipped lists move together and need equal lengths");
        }
        for (std::size_t i = 0; i < values.size(); ++i) d.values[i].push_back(plain(values[i]));
        d.keys.push_back(key);
      }
      s.dimensions.push_back(std::move(d));
    }
  }
  f.reject_unknown();
  if (s.dimensions.empty())
    throw InputError(path + ": no \"axes\" or \"zip\": a sweep varies at least one key (one config is `ddpsim run`)");

  const auto keys = s.keys();
  // Where each key is swept, for messages: axes, or zip[g].
  std::vector<std::string> origin;
  for (std::size_t d = 0, zip = 0; d < s.dimensions.size(); ++d) {
    const bool axis = d < s.dimensions.size() - (f.has("zip") ? f.raw("zip").size() : 0);
    for (std::size_t k = 0; k < s.dimensions[d].keys.size(); ++k)
      origin.push_back(axis ? "axes" : "zip[" + std::to_string(zip) + "]");
    zip += axis ? 0 : 1;
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].empty()) throw InputError(path + ": an empty key among the axes (expected a config path)");
    if (keys[i] == "label.")
      throw InputError(path + ": \"label.\" has no name: a label is label.NAME, NAME its results.csv column");
    for (std::size_t j = 0; j < i; ++j)
      if (overlaps(keys[i], keys[j]))
        throw InputError(path + ": \"" + keys[j] + "\" (" + origin[j] + ") and \"" + keys[i] + "\" (" + origin[i] +
                         ") are both swept: each key at most once");
    for (const auto& set : fixed)
      if (overlaps(keys[i], set))
        throw InputError(path + ": \"" + keys[i] + "\" is swept and also fixed by \"" + set + "\": choose one");
  }
  double cells = 1;
  for (const auto& d : s.dimensions) cells *= static_cast<double>(d.values.size());
  if (cells > static_cast<double>(MAX_SWEEP_CELLS)) {
    std::string shape;
    for (const auto& d : s.dimensions) shape += (shape.empty() ? "" : " × ") + std::to_string(d.values.size());
    throw InputError(path + ": the grid has " + shape + " = " + format("%.0f", cells) + " cells, more than the " +
                     std::to_string(MAX_SWEEP_CELLS) + " one sweep runs: split it into several sweeps");
  }
  return s;
}

std::string SweepGrid::describe(const SweepCell& cell) const {
  std::string text = "cell " + std::to_string(cell.index) + " (";
  for (std::size_t k = 0; k < keys.size(); ++k) text += (k ? ", " : "") + keys[k] + "=" + value_text(cell.values[k]);
  return text + ")";
}

std::vector<std::string> SweepGrid::note_lines() const { return ddpsim::note_lines(notes, cells.size()); }

Config cell_config(const SweepSpec& spec, const SweepGrid& grid, const SweepCell& cell) {
  const std::string origin = spec.origin + ", " + grid.describe(cell);
  nlohmann::json doc = spec.base;
  for (std::size_t k = 0; k < grid.keys.size(); ++k)
    if (!is_label(grid.keys[k])) set_value(doc, grid.keys[k], cell.values[k], origin);
  Config config;
  try {
    config = parse_config(doc, origin, spec.base_dir);
  } catch (const InputError& e) {  // a file the cell names (a model, a platform) blames only itself
    if (std::string_view(e.what()).starts_with(spec.origin)) throw;
    throw InputError(origin + ": " + e.what());
  }
  // A sweep's results.csv is the same bytes on every run; a decision time read off this
  // machine's clock is not.
  if (config.simulation.sched_measured)
    throw InputError(origin +
                     ": simulation.sched_ms \"measured\" times each decision on this machine's clock, so "
                     "two runs of the sweep would write different results: give sched_ms in ms (ddpsim run "
                     "takes \"measured\")");
  return config;
}

SweepGrid expand(const SweepSpec& spec, const std::function<void(std::size_t, std::size_t)>& progress) {
  SweepGrid grid;
  grid.keys = spec.keys();
  const std::size_t total = spec.cell_count();
  std::unordered_map<std::string, std::size_t> seen;
  bool first_abstract = false;
  for (std::size_t i = 0; i < total; ++i) {
    SweepCell cell;
    cell.index = i;
    // Row-major: the last dimension varies fastest.
    std::vector<std::size_t> position(spec.dimensions.size());
    for (std::size_t d = spec.dimensions.size(), rest = i; d-- > 0;) {
      position[d] = rest % spec.dimensions[d].values.size();
      rest /= spec.dimensions[d].values.size();
    }
    for (std::size_t d = 0; d < spec.dimensions.size(); ++d)
      for (const auto& v : spec.dimensions[d].values[position[d]]) cell.values.push_back(v);
    const Config config = cell_config(spec, grid, cell);
    // Named by its content, with every file path absolute: the same cell from any working
    // folder, so that a sweep resumes, reruns and merges its shards wherever it is started.
    cell.hash = fnv1a64_hex(config.printable().dump());
    if (!config.parallel) {
      cell.dataset_key =
          fnv1a64_hex(config.resolved.at("data").dump() + " " + std::to_string(config.training.max_length) + " " +
                      std::to_string(config.training.seed));
      cell.world_size = config.training.world_size;
    }
    // A pipeline's abstract mode reports time units, its model mode ms: one results.csv, one unit.
    const bool abstract = config.parallel && config.parallel->abstract_mode;
    if (i == 0) first_abstract = abstract;
    if (abstract != first_abstract)
      throw InputError(spec.origin + ": " + grid.describe(cell) + " is a pipeline in " +
                       (abstract ? "abstract mode (time units)" : "model mode (ms)") + ", " +
                       grid.describe(grid.cells.front()) + " in " + (abstract ? "model mode" : "abstract mode") +
                       ": one sweep's step times share one unit, so sweep them apart");
    for (const std::string& note : config.notes) add_cell_note(grid.notes, note, i);
    if (const std::string untrained = config.untrained_size_note(); !untrained.empty())
      add_cell_note(grid.notes, untrained, i);
    if (const auto [it, fresh] = seen.emplace(cell.hash, i); !fresh)
      throw InputError(spec.origin + ": " + grid.describe(cell) + " is the same config as " +
                       grid.describe(grid.cells[it->second]) + ": a value listed twice, or one the config ignores");
    grid.cells.push_back(std::move(cell));
    if (progress) progress(i + 1, total);
  }
  grid.hash = grid_hash(grid.keys, grid.cells);
  return grid;
}

std::string value_text(const nlohmann::json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

nlohmann::ordered_json grid_json(const SweepGrid& grid) {
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const auto& c : grid.cells) cells.push_back({{"cell", c.hash}, {"values", c.values}});
  return {{"format", "ddpsim-sweep/1"}, {"grid_hash", grid.hash}, {"keys", grid.keys}, {"cells", std::move(cells)}};
}

SweepGrid grid_from_json(const std::string& path) {
  const nlohmann::json doc = parse_json(read_own_file(path, "sweep grid"), path);
  if (!doc.is_object()) throw InputError(path + ": expected the JSON object `ddpsim sweep` writes");
  JsonFields f(doc, path);
  if (f.require<std::string>("format") != "ddpsim-sweep/1")
    throw InputError(path + ": format is not ddpsim-sweep/1 (written by another version of ddpsim?)");
  SweepGrid grid;
  grid.keys = f.require<std::vector<std::string>>("keys");
  const auto stated = f.require<std::string>("grid_hash");
  const auto& cells = f.raw("cells");
  if (!cells.is_array()) throw wrong_type(cells, path + ": key \"cells\"", "an array");
  for (std::size_t i = 0; i < cells.size(); ++i) {
    JsonFields c(cells[i], path + ": cells[" + std::to_string(i) + "]");
    SweepCell cell;
    cell.index = i;
    cell.hash = c.require<std::string>("cell");
    const auto& values = c.raw("values");
    if (!values.is_array() || values.size() != grid.keys.size())
      throw InputError(c.where() + ": expected " + std::to_string(grid.keys.size()) + " values, one per key");
    cell.values.assign(values.begin(), values.end());
    c.reject_unknown();
    grid.cells.push_back(std::move(cell));
  }
  f.reject_unknown();
  grid.hash = grid_hash(grid.keys, grid.cells);
  if (grid.hash != stated) throw InputError(path + ": grid_hash does not match its cells (an edited or damaged file)");
  return grid;
}

}  // namespace ddpsim
