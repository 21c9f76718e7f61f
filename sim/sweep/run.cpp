#include "sweep/run.hpp"

#include <malloc.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "data/sampler.hpp"
#include "eval/pipeline_eval.hpp"
#include "eval/simulate.hpp"
#include "eval/step_interval.hpp"
#include "eval/uncertainty.hpp"
#include "report/outputs.hpp"

namespace fs = std::filesystem;

namespace ddpsim {

namespace {

// Each policy's gain and mean step prediction at the cell's seed (eval/uncertainty.hpp,
// eval/step_interval.hpp): its seeds' range is the cell's figure alone, widened by the model's
// terms (variants and noise-off simulated here, once for both), as the cell's extra keys.
nlohmann::ordered_json cell_predictions(const Config& config, const std::vector<int>& dataset,
                                        const SimulationRun& sim) {
  std::optional<SimulationRun> quiet;
  if (draws_compute_noise(config) && can_simulate_again(config))
    quiet = simulate_streamed(without_compute_noise(config), dataset, {0, 0}, {}, {});
  std::vector<std::vector<double>> gains, means;
  for (double g : run_gains(sim)) gains.push_back({g});
  for (const TokenSummary& s : sim.summaries) means.push_back({s.mean_max_step_ms});
  const std::vector<VariantRun> variants = simulate_variants(config, dataset);
  const SimulationRun* off = quiet ? &*quiet : nullptr;
  const std::vector<GainPrediction> predicted = gain_predictions(config, variants, sim, off, gains);
  const std::vector<StepPrediction> steps = step_predictions(config, variants, sim, off, means);
  nlohmann::ordered_json out = {{"gain_predictions", nlohmann::ordered_json::object()},
                                {"step_predictions", nlohmann::ordered_json::object()}};
  for (std::size_t p = 0; p < sim.runs.size(); ++p) {
    if (p > 0) out["gain_predictions"][sim.runs[p].label] = gain_prediction_json(predicted[p]);
    out["step_predictions"][sim.runs[p].label] = step_prediction_json(steps[p]);
  }
  return out;
}

// The worker: simulates one cell and writes its file; its error, if any, goes up the pipe. Its
// config is built here, not in the parent, whose every page written after a fork is a copy.
[[noreturn]] void work(const SweepSpec& spec, const SweepGrid& grid, const SweepCell& cell,
                       const std::vector<int>* shared, const fs::path& target, int pipe_fd) {
  int code = 0;
  // On a thread of its own, which allocates from an arena of its own: the main arena's free
  // chunks are the parent's pages, which every allocation walking them would copy (on a 10,000-
  // cell sweep, half a cell's CPU went to such copy-on-write faults).
  std::thread([&] {
    try {
      Config config = cell_config(spec, grid, cell);
      if (config.parallel) {
        auto summary = pipeline_summary(config, simulate_parallel(config));
        summary["config"] = config.printable();  // as below: what the cell's name hashes
        if (!config.parallel->abstract_mode) summary["provenance"] = config.provenance();  // time units need none
        write_file_atomically(target, summary.dump(2) + "\n");
      } else {
        std::vector<int> own;
        if (!shared) own = config_dataset(config, *make_length_source(config.data, config.training.max_length));
        const std::vector<int>& dataset = shared ? *shared : own;
        config.add_data_notes(dataset);
        const SimulationRun sim = simulate_streamed(config, dataset, {0, 0}, {}, {});  // a cell keeps no rows
        // The config with absolute paths: what the cell's name hashes (grid.cpp), from any folder.
        write_file_atomically(target, summary_json(config.printable(), sim.runs, sim.summaries, config.provenance(),
                                                   cell_predictions(config, dataset, sim)));
      }
    } catch (const std::exception& e) {
      const std::string what = std::string(e.what()).substr(0, 4000);  // below a pipe's buffer: never blocks
      [[maybe_unused]] const auto written = ::write(pipe_fd, what.data(), what.size());
      code = 1;
    }
  }).join();
  ::_exit(code);  // no atexit handlers, no flushing of buffers inherited from the parent
}

// Datasets and their first permutations, built once in the parent and shared with the workers
// (copy-on-write after fork): a TSV source tokenizes its file once for the whole sweep, and the
// cells of a seed shuffle it once, not once per cell.
class SharedDatasets {
 public:
  const std::vector<int>* get(const SweepSpec& spec, const SweepGrid& grid, const SweepCell& cell) {
    if (cell.dataset_key.empty()) return nullptr;
    auto it = datasets_.find(cell.dataset_key);
    if (it == datasets_.end()) {
      if (datasets_.size() >= 16) {  // a swept seed: keep memory bounded
        datasets_.clear();
        prepared_.clear();
      }
      const Config config = cell_config(spec, grid, cell);
      it = datasets_
               .emplace(cell.dataset_key,
                        Dataset{config_dataset(config, *make_length_source(config.data, config.training.max_length)),
                                config.training.seed})
               .first;
    }
    const Dataset& d = it->second;
    if (prepared_.emplace(cell.dataset_key, cell.world_size).second)
      DistributedSampler::prepare(d.lengths, cell.world_size, d.seed);
    return &d.lengths;
  }

 private:
  struct Dataset {
    std::vector<int> lengths;
    std::uint64_t seed;  // its sampler's
  };
  std::map<std::string, Dataset> datasets_;
  std::set<std::pair<std::string, int>> prepared_;
};

std::string read_all(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  return text;
}

}  // namespace

CellRunStats run_cells(const SweepSpec& spec, const SweepGrid& grid, const std::vector<std::size_t>& todo, int jobs,
                       const fs::path& cells_dir, const std::function<void(std::size_t, std::size_t)>& progress) {
  std::error_code ec;
  fs::create_directories(cells_dir, ec);
  if (ec) throw InputError(cells_dir.string() + ": cannot create the folder: " + ec.message());
  const auto start = std::chrono::steady_clock::now();
  struct Worker {
    std::size_t cell;
    int pipe_fd;
    int slot;  // among the workers a signal stops
  };
  std::map<pid_t, Worker> running;
  // What checking the grid freed goes back to the system: a fork copies the page table of every
  // page this process holds, once per cell.
  ::malloc_trim(0);
  SharedDatasets datasets;
  // Cells that share a dataset run one after the other, whatever the axes' order.
  std::vector<std::size_t> order(todo);
  std::map<std::string, std::size_t> first_seen;
  std::vector<std::size_t> group(grid.cells.size());
  for (const std::size_t i : todo)
    group[i] = first_seen.emplace(grid.cells[i].dataset_key, first_seen.size()).first->second;
  std::ranges::stable_sort(order, {}, [&](std::size_t i) { return group[i]; });
  std::string failure;
  std::size_t next = 0, done = 0;
  while (true) {
    while (failure.empty() && next < todo.size() && running.size() < static_cast<std::size_t>(jobs)) {
      const SweepCell& cell = grid.cells[order[next++]];
      try {
        const std::vector<int>* dataset = datasets.get(spec, grid, cell);
        int fds[2];
        if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
        std::cout.flush();
        std::fflush(nullptr);
        // A stop signal between fork and remember_worker would miss the new worker: hold such
        // signals until it is registered (here) or has become a worker (there).
        sigset_t stops, previous;
        sigemptyset(&stops);
        for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, signal);
        ::sigprocmask(SIG_BLOCK, &stops, &previous);
        const pid_t pid = ::fork();
        if (pid == 0) {
          become_worker();
          ::sigprocmask(SIG_SETMASK, &previous, nullptr);
          ::close(fds[0]);
          work(spec, grid, cell, dataset, cells_dir / (cell.hash + ".json"), fds[1]);
        }
        const int fork_errno = errno;
        if (pid > 0) running[pid] = {cell.index, fds[0], remember_worker(pid)};
        ::sigprocmask(SIG_SETMASK, &previous, nullptr);
        ::close(fds[1]);
        if (pid < 0) {
          ::close(fds[0]);
          throw std::runtime_error(std::string("fork: ") + std::strerror(fork_errno));
        }
      } catch (const std::exception& e) {
        failure = e.what();
      }
    }
    if (running.empty()) break;
    int status = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &status, 0)) < 0 && errno == EINTR) {
    }
    if (pid < 0) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
    const auto it = running.find(pid);
    if (it == running.end()) continue;
    const Worker worker = it->second;
    running.erase(it);
    forget_worker(worker.slot);
    const std::string message = read_all(worker.pipe_fd);
    ::close(worker.pipe_fd);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++done;
      if (progress) progress(done, todo.size());
    } else if (failure.empty()) {
      const std::string reason = !message.empty() ? message
                                 : WIFSIGNALED(status)
                                     ? std::string("the worker died of ") + ::strsignal(WTERMSIG(status))
                                     : "the worker exited with status " + std::to_string(WEXITSTATUS(status));
      failure = spec.origin + ", " + grid.describe(grid.cells[worker.cell]) + ": " + reason;
    }
  }
  if (!failure.empty())
    throw InputError(failure + " (" + std::to_string(done) + " cells finished in this run are kept in " +
                     cells_dir.string() + "; a rerun skips them)");
  return {done, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

int available_cores() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace ddpsim
