#include "cli/sync_fit.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "calib/validate.hpp"
#include "cli/trace_args.hpp"
#include "common/error.hpp"

namespace ddpsim::cli {

namespace {

// The candidate model as a file while the runs are replayed: configs load their model from a
// file. Removed when it goes out of scope, on every path.
class TemporaryModel {
 public:
  explicit TemporaryModel(const nlohmann::ordered_json& model) {
    std::error_code error;
    const std::filesystem::path folder = std::filesystem::temp_directory_path(error);
    if (error)
      throw InputError("no temporary folder to replay the training runs from (TMPDIR): " + error.message());
    std::string name = (folder / "ddpsim-calibrate-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    if (fd < 0)
      throw InputError("cannot create a temporary file in " + folder.string() +
                       " to replay the training runs: " + std::strerror(errno));
    ::close(fd);
    path_ = name;
    std::ofstream(path_) << model.dump();
  }
  ~TemporaryModel() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  TemporaryModel(const TemporaryModel&) = delete;
  TemporaryModel& operator=(const TemporaryModel&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

SyncFit fit_sync(const nlohmann::ordered_json& model, const std::vector<Trace>& training,
                 const std::vector<LeadingSteps>& warmups) {
  SyncFit fit;
  std::optional<TemporaryModel> file;  // written once a run is to be replayed: none may be
  po::variables_map vm;
  double measured = 0, replayed = 0;
  for (const Trace& trace : training) {
    if (trace.runs.empty() || trace.runs.front().G < 2) continue;  // no gradients to wait for
    if (modelled_allreduce(trace)) {
      fit.skipped.push_back(trace.path + ": emulated ranks, their allreduce modelled");
      continue;
    }
    if (!file) vm.insert({"model", po::variable_value(file.emplace(model).path(), false)});
    SimulationRun sim;
    try {
      sim = replay(trace, config_for_trace(vm, trace));
    } catch (const InputError& e) {
      fit.skipped.push_back(trace.path + ": " + e.what());
      continue;
    }
    long counted = 0;
    const int first_kept = first_kept_step(warmups, trace.path);
    for (std::size_t p = 0; p < trace.runs.size() && p < sim.runs.size(); ++p) {
      const auto &rows = trace.runs[p].rows, &simulated = sim.runs[p].rows;
      if (rows.size() != simulated.size()) continue;
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (rows[i].step < first_kept || !std::isfinite(rows[i].comm_wait_ms) ||
            !std::isfinite(simulated[i].comm_wait_ms))
          continue;
        measured += rows[i].comm_wait_ms, replayed += simulated[i].comm_wait_ms, ++counted;
      }
    }
    if (counted == 0) {
      fit.skipped.push_back(trace.path + ": no comm_wait_ms after the warm-up");
      continue;
    }
    fit.rank_steps += counted, ++fit.runs;
  }
  if (fit.rank_steps > 0) {
    fit.measured_ms = measured / double(fit.rank_steps);
    fit.replayed_ms = replayed / double(fit.rank_steps);
  }
  return fit;
}

void add_sync(nlohmann::ordered_json& model, const SyncFit& fit) {
  const double ms = std::round(fit.sync_ms() * 100) / 100;
  if (ms <= 0) return;
  char text[256];
  std::snprintf(text, sizeof text,
                "calibrate --training: the ranks of %d training run(s) waited %.2f ms a rank-step for their "
                "gradients where the model replays %.2f",
                fit.runs, fit.measured_ms, fit.replayed_ms);
  model["sync_ms"] = ms;
  model["sync_source"] = text;
}

std::string sync_report(const SyncFit& fit) {
  std::string out;
  char line[384];
  if (fit.rank_steps > 0) {
    std::snprintf(line, sizeof line,
                  "  sync      comm wait of the training runs %.2f ms a rank-step, the model's replay of them %.2f "
                  "(%ld rank-steps of %d run(s)): %s\n",
                  fit.measured_ms, fit.replayed_ms, fit.rank_steps, fit.runs,
                  fit.sync_ms() >= 0.005 ? "each rank waits the difference after its last collective (sync_ms)"
                                         : "the model waits long enough, no sync_ms");
    out += line;
  }
  for (const std::string& why : fit.skipped) out += "            sync: not compared, " + why + "\n";
  return out;
}

}  // namespace ddpsim::cli
