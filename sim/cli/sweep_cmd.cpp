// `ddpsim sweep`: what-if grids over config keys, run in parallel processes, resumable,
// sharded across a cluster's array jobs and merged back into one results.csv.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/options.hpp"
#include "cli/progress.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "report/outputs.hpp"
#include "sweep/cells.hpp"
#include "sweep/grid.hpp"
#include "sweep/run.hpp"

namespace fs = std::filesystem;

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim sweep SWEEP.json --out DIR [--jobs N] [--shard I/N] [--resume]
       ddpsim sweep --merge SHARD_DIR... --out DIR

Runs `ddpsim run` over a grid of configs and tabulates every policy of every cell. A sweep
file names a base config, keys to vary (any path `--set` takes: the config sections in
`ddpsim run --help`, every key in docs/config.md) and the policies:

  {
    "base": "my.json",                          (optional; default: the embedded default)
    "set": {"training.steps": 400},             (optional; fixed for every cell)
    "axes": {"training.world_size": [4, 8, 16],
             "training.global_batch": [48, 96]},  (cartesian product: 6 cells)
    "zip": [{"platform.topology": ["pcie", "nvlink"],
             "model": ["rtx3090-distilbert", "h100-distilbert"]}],  (move together: x2)
    "policies": ["static", "minmax", "kk"]      (optional; default: the base config's)
  }

Relative paths resolve against the sweep file's folder (the base config's, for the values
inside a cell). Every cell is checked before anything runs. Each runs in its own worker
process and is written whole to DIR/cells/<hash>.json (its summary.json; the hash is that of
the resolved config), so a rerun, or --resume, skips finished cells and a killed sweep loses
only the cells in flight; cells are shared by any sweep that writes into DIR.

Outputs: DIR/sweep.json (the grid), DIR/results.csv: one row per cell and policy, a column
per swept key, every summary metric (decision times aside, so the file depends on the inputs
alone: the same whatever --jobs or sharding) and gain_pct / p95_gain_pct, the share of the
cell's first policy's mean / P95 maximum step time a policy saves. A base config with a
parallel section makes every cell a pipeline job: results.csv then carries the pipeline's
figures (mean_step_time, compute_share, bubble_mean, per flow class volume, mean transfer
time, throughput and utilisation, ...), e.g. configs/pipeline-priorities.json.

Clusters: --shard I/N runs every N-th cell from the I-th (1 <= I <= N; Slurm array tasks:
--shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT with --array=1-N) and writes no
results.csv; --merge combines the shards' folders into DIR. scripts/slurm_sweep.sh submits both.

examples:
  ddpsim sweep configs/sweep-study.json --out sweeps/study
  ddpsim sweep configs/sweep-study.json --out sweeps/study --shard 2/4 --jobs 8
  ddpsim sweep --merge sweeps/s1 sweeps/s2 sweeps/s3 sweeps/s4 --out sweeps/study
)";

struct Shard {
  std::size_t index = 1, count = 1;  // 1-based
};

Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  try {
    // Digits only: stol would skip a leading space or take a sign.
    if (slash != std::string::npos && text.find_first_not_of("0123456789/") == std::string::npos) {
      std::size_t used_i = 0, used_n = 0;
      const long i = std::stol(text.substr(0, slash), &used_i);
      const long n = std::stol(text.substr(slash + 1), &used_n);
      if (used_i == slash && used_n == text.size() - slash - 1 && 1 <= i && i <= n &&
          n <= static_cast<long>(MAX_SWEEP_CELLS))
        return {static_cast<std::size_t>(i), static_cast<std::size_t>(n)};
    }
  } catch (const std::exception&) {
  }
  throw UsageError("--shard \"" + text + "\": expected I/N with 1 <= I <= N <= " + std::to_string(MAX_SWEEP_CELLS) +
                   ", e.g. 2/4");
}

// Per policy: in how many cells it is the fastest, and its gain over the first policy.
void print_digest(const SweepGrid& grid, const std::vector<nlohmann::ordered_json>& cells) {
  struct Tally {
    std::size_t fastest = 0, count = 0;
    double sum = 0, min = 1e300, max = -1e300;
    std::size_t min_cell = 0, max_cell = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Tally> tally;
  // A pipeline job's step time is in time units in abstract mode.
  const bool pipelines = !cells.empty() && cells.front()["config"].contains("parallel");
  const char* metric = pipelines ? "mean_step_time" : "mean_max_step_ms";
  if (pipelines && cells.front()["policies"].size() == 1) {
    // One column per cell (abstract mode): the cells themselves are what is compared.
    std::size_t fastest = 0, slowest = 0;
    const auto time = [&](std::size_t i) { return cells[i]["policies"].begin().value()[metric].get<double>(); };
    for (std::size_t i = 1; i < cells.size(); ++i) {
      if (time(i) < time(fastest)) fastest = i;
      if (time(i) > time(slowest)) slowest = i;
    }
    std::printf("\nfastest: %s, step %.4g\nslowest: %s, step %.4g\n", grid.describe(grid.cells[fastest]).c_str(),
                time(fastest), grid.describe(grid.cells[slowest]).c_str(), time(slowest));
    return;
  }
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& policies = cells[i]["policies"];
    const auto& base = policies.begin().value()[metric];
    std::string best;
    double best_ms = 1e300;
    for (const auto& [label, p] : policies.items()) {
      if (!tally.count(label)) order.push_back(label);
      Tally& t = tally[label];
      const auto& ms = p[metric];
      if (!ms.is_number() || !base.is_number() || base.get<double>() <= 0) continue;
      const double gain = 100 * (1 - ms.get<double>() / base.get<double>());
      ++t.count;
      t.sum += gain;
      if (gain < t.min) t.min = gain, t.min_cell = i;
      if (gain > t.max) t.max = gain, t.max_cell = i;
      if (ms.get<double>() < best_ms) best_ms = ms.get<double>(), best = label;
    }
    if (!best.empty()) ++tally[best].fastest;
  }
  std::size_t width = 6;
  for (const auto& label : order) width = std::max(width, label.size());
  std::printf("\n%-*s %8s %10s %10s %10s   gain = 1 - mean max step / %s's\n", static_cast<int>(width), "policy",
              "fastest", "gain mean", "min", "max", order.front().c_str());
  for (const auto& label : order) {
    const Tally& t = tally[label];
    if (!t.count) continue;
    std::printf("%-*s %8zu %9.2f%% %9.2f%% %9.2f%%\n", static_cast<int>(width), label.c_str(), t.fastest,
                t.sum / t.count, t.min, t.max);
  }
  // Where the best gain over the baseline flips sign is what a sweep is for: show the extremes.
  for (const auto& label : order) {
    const Tally& t = tally[label];
    if (!t.count || label == order.front()) continue;
    std::printf("  %s: best in %s, worst in %s\n", label.c_str(), grid.describe(grid.cells[t.max_cell]).c_str(),
                grid.describe(grid.cells[t.min_cell]).c_str());
  }
}

// results.csv (and sweep.json, unless `dir` already holds this grid's) published together.
void write_results(const fs::path& dir, const SweepGrid& grid, const std::vector<nlohmann::ordered_json>& cells,
                   bool write_grid) {
  std::vector<std::pair<fs::path, std::string>> files;
  files.emplace_back(dir / "results.csv", results_csv(grid, cells));
  if (write_grid) files.emplace_back(dir / "sweep.json", grid_json(grid).dump(1) + "\n");
  publish(files);
  std::size_t rows = 0;
  for (const auto& cell : cells) rows += cell["policies"].size();
  std::cout << "wrote " << (dir / "results.csv").string() << " (" << rows << " rows: " << cells.size()
            << " cells × policies)" << (write_grid ? " and " + (dir / "sweep.json").string() : "") << "\n";
}

// The grid `dir`/sweep.json holds, if any.
std::optional<SweepGrid> grid_in(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir / "sweep.json", ec)) return std::nullopt;
  return grid_from_json((dir / "sweep.json").string());
}

int merge(const std::vector<std::string>& shard_dirs, const fs::path& out) {
  check_outputs({out / "results.csv"});
  std::vector<fs::path> dirs(shard_dirs.begin(), shard_dirs.end());
  std::optional<SweepGrid> grid;
  for (const auto& dir : dirs) {
    if (!fs::is_directory(dir)) throw InputError(dir.string() + ": not a folder (expected a sweep's --out folder)");
    auto found = grid_in(dir);
    if (!found) throw InputError(dir.string() + ": no sweep.json (not the --out folder of a ddpsim sweep)");
    if (grid && found->hash != grid->hash)
      throw InputError((dir / "sweep.json").string() + " is another sweep (grid " + found->hash + ", " +
                       std::to_string(found->cells.size()) + " cells) than " + (dirs.front() / "sweep.json").string() +
                       " (grid " + grid->hash + ", " + std::to_string(grid->cells.size()) + " cells)");
    if (!grid) grid = std::move(found);
  }
  std::cout << "ddpsim sweep --merge: " << dirs.size() << " folders, grid " << grid->hash << ", " << grid->cells.size()
            << " cells\n";
  const auto cells = collect_cells(*grid, dirs);
  const auto out_grid = grid_in(out);
  if (out_grid && out_grid->hash != grid->hash)
    throw InputError((out / "sweep.json").string() + " is another sweep (grid " + out_grid->hash +
                     "): merge into an empty folder or one of the shards'");
  std::error_code ec;
  fs::create_directories(out / "cells", ec);
  if (ec) throw InputError((out / "cells").string() + ": cannot create the folder: " + ec.message());
  std::size_t copied = 0;
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (!load_cell(out / "cells", grid->cells[i].hash)) {
      write_file_atomically(out / "cells" / (grid->cells[i].hash + ".json"), cells[i].dump(2) + "\n");
      ++copied;
    }
  if (copied) std::cout << "copied " << copied << " cells into " << (out / "cells").string() << "\n";
  for (const std::string& note : cell_note_lines(*grid, cells)) std::cerr << "note: " << note << "\n";
  print_digest(*grid, cells);
  write_results(out, *grid, cells, /*write_grid=*/!out_grid);
  return 0;
}

}  // namespace

int sweep(const Args& args) {
  po::options_description visible("options"), hidden;
  visible.add_options()("out", po::value<std::string>(), "DIR: cells/, sweep.json and results.csv go here")(
      "jobs", po::value<int>(), "worker processes (default: the cores this process may use)")(
      "shard", po::value<std::string>(), "I/N: run only the I-th of N disjoint slices of the cells")(
      "resume",
      "continue the sweep DIR holds (its grid is written before any cell runs): refuse unless DIR/sweep.json is this "
      "grid")("dry-run", "check every cell and print the grid, run nothing")(
      "merge", po::value<std::vector<std::string>>()->multitoken(),
      "SHARD_DIR...: combine the folders of a sharded sweep into --out")("help,h", "this help");
  hidden.add_options()("sweep", po::value<std::string>());
  po::positional_options_description positional;
  positional.add("sweep", 1);
  po::variables_map vm;
  if (!parse(args, USAGE, visible, hidden, positional, vm)) return 0;
  if (!vm.count("out") && vm.count("merge"))
    for (const auto& dir : vm["merge"].as<std::vector<std::string>>())
      if (dir.starts_with("--"))  // --merge takes every word after it
        throw UsageError("--merge read \"" + dir +
                         "\" as a shard folder: give the folders after --merge (at least one)"
                         ", then --out DIR");
  if (!vm.count("out")) throw UsageError("--out DIR is required");
  const fs::path out = vm["out"].as<std::string>();
  if (std::error_code ec; fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw UsageError("--out " + out.string() + ": exists and is not a folder");
  if (vm.count("merge")) {
    for (const char* other : {"sweep", "jobs", "shard", "resume", "dry-run"})
      if (vm.count(other))
        throw UsageError(std::string("--merge combines finished shards; ") +
                         (std::string(other) == "sweep" ? "a SWEEP file" : "--" + std::string(other)) +
                         " belongs to a run");
    return merge(vm["merge"].as<std::vector<std::string>>(), out);
  }
  if (!vm.count("sweep")) throw UsageError("missing SWEEP.json (or --merge SHARD_DIR...)");
  const int jobs = vm.count("jobs") ? vm["jobs"].as<int>() : available_cores();
  if (jobs < 1 || jobs > 1024) throw UsageError("--jobs " + std::to_string(jobs) + ": expected 1 to 1024");
  if (vm.count("jobs") && vm.count("dry-run"))
    throw UsageError("--jobs sets the worker processes that run cells, and --dry-run runs none: give one of them");
  const Shard shard = vm.count("shard") ? parse_shard(vm["shard"].as<std::string>()) : Shard{};
  const bool sharded = vm.count("shard") > 0;

  const std::string path = vm["sweep"].as<std::string>();
  const SweepSpec spec = read_sweep(path);
  std::string shape;
  for (const auto& d : spec.dimensions) {
    std::string keys;
    for (const auto& k : d.keys) keys += (keys.empty() ? "" : "+") + k;
    shape += (shape.empty() ? "" : " × ") + keys + " (" + std::to_string(d.values.size()) + ")";
  }
  std::cout << "ddpsim sweep: " << path << "\n  base: " << spec.base_origin << "\n  grid: " << shape << " = "
            << spec.cell_count() << " cells\n";
  SweepGrid grid;
  {
    Progress progress("checking", "cells");
    grid = expand(spec, [&](std::size_t done, std::size_t total) { progress(long(done), long(total)); });
  }
  for (const std::string& note : grid.note_lines()) std::cerr << "note: " << note << "\n";
  const std::size_t policies = cell_config(spec, grid, grid.cells.front()).policies.size();
  std::cout << "  " << policies << (policies == 1 ? " policy per cell" : " policies per cell")
            << " (in the first): " << grid.cells.size() * policies << " results; grid " << grid.hash << "\n";
  // After the grid is read, so that an output that is one of its inputs (the base config, a
  // model a cell names) is refused before any cell runs.
  if (!vm.count("dry-run")) check_outputs({out / "results.csv", out / "sweep.json"});
  const auto existing = grid_in(out);
  if (vm.count("resume") && (!existing || existing->hash != grid.hash))
    throw InputError(out.string() +
                     (existing ? " holds another sweep (grid " + existing->hash + ")" : " holds no sweep.json") +
                     ": --resume continues the same sweep in the same folder (without --resume, finished cells "
                     "are reused all the same)");
  if (vm.count("dry-run")) {
    for (const auto& cell : grid.cells) std::cout << "  " << cell.hash << "  " << grid.describe(cell) << "\n";
    return 0;
  }

  const bool write_grid = !existing || existing->hash != grid.hash;
  if (existing && existing->hash != grid.hash && !sharded)
    std::cerr << "note: " << out.string() << " held another sweep (grid " << existing->hash
              << "): its sweep.json and results.csv are replaced by this one's; its cells stay, for reuse\n";
  std::vector<std::size_t> slice, todo;
  for (std::size_t i = shard.index - 1; i < grid.cells.size(); i += shard.count) slice.push_back(i);
  for (const std::size_t i : slice)
    if (!load_cell(out / "cells", grid.cells[i].hash)) todo.push_back(i);
  std::cout << "  " << slice.size() << " cells" << (sharded ? " in shard " + vm["shard"].as<std::string>() : "") << ", "
            << slice.size() - todo.size() << " already done, " << todo.size() << " to run";
  if (!todo.empty()) std::cout << " with " << std::min<std::size_t>(jobs, todo.size()) << " jobs";
  std::cout << "\n";
  // The grid first, so that a sweep stopped half-way is one --resume continues.
  if (write_grid) publish({{out / "sweep.json", grid_json(grid).dump(1) + "\n"}});
  CellRunStats stats;
  {
    Progress progress("sweeping", "cells");
    stats = run_cells(spec, grid, todo, jobs, out / "cells",
                      [&](std::size_t done, std::size_t total) { progress(long(done), long(total)); });
  }
  if (stats.ran)
    std::printf("ran %zu cells in %.1f s (%.1f cells/s)\n", stats.ran, stats.wall_s,
                stats.ran / std::max(stats.wall_s, 1e-9));
  if (sharded) {
    std::cout << "shard " << vm["shard"].as<std::string>() << " done in " << out.string()
              << "; once every shard is: ddpsim sweep --merge SHARD_DIR... --out DIR\n";
    return 0;
  }
  const auto cells = collect_cells(grid, {out});
  for (const std::string& note : cell_note_lines(grid, cells)) std::cerr << "note: " << note << "\n";
  print_digest(grid, cells);
  write_results(out, grid, cells, /*write_grid=*/false);  // published before the cells ran
  return 0;
}

}  // namespace ddpsim::cli
