// `ddpsim replay`: from a model back to a measured trace, step for step (what replay shares with
// validate: cli/trace_args.cpp).
#include <filesystem>
#include <iostream>
#include <vector>

#include "calib/validate.hpp"
#include "cli/commands.hpp"
#include "cli/config_args.hpp"
#include "cli/trace_args.hpp"
#include "common/error.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* REPLAY_USAGE = R"(usage: ddpsim replay TRACE.csv --model MODEL.json [CONFIG] [options]

Simulates exactly the per-step, per-rank batches a trace recorded (batch sizes and lengths
from its rows, not resampled) with the given model on the config's platform (default: the
embedded default's `pcie`, ring allreduce; for a trace of ddptrain's emulated ranks, the
allreduce its metadata records unless CONFIG or --set gives platform keys or training.overlap),
and prints the study's table. The world size and policies come from the trace. --out DIR
writes the predicted steps.csv and summary.json.
What the trace fixes cannot be changed with --set, and is refused rather than ignored:
training.steps, global_batch, max_length, b_max and micro_batches (each step is replayed
with the micro-batches it recorded: its micro_batches column, or one per rank without it),
policies, data and model (--model gives it). A CONFIG written for `ddpsim run` may hold
them: its sizes are left unused (a note says so), a micro_batches count other than the
trace's is refused, and simulation.sched_ms "measured" is refused (replay decides nothing).
A trace that records its data_parallel (ddptrain's) or zero_partition (a StepTracer's given
them) is simulated under it unless CONFIG or --set gives that training key, which a note then
names. A trace of packed sequences (its sq_tokens column) is simulated packed, and refused
under training.attention "padded" (its rows record no padding).

examples:
  ddpsim replay runs/minmax/steps.csv --model models/my-3090.json --out runs/minmax-pred
)";

}  // namespace

int replay(const Args& args) {
  po::options_description visible("options"), hidden;
  po::positional_options_description positional;
  hidden.add_options()("trace", po::value<std::string>());
  positional.add("trace", 1);
  add_replay_options(visible, hidden, positional);
  po::variables_map vm;
  if (!parse(args, REPLAY_USAGE, visible, hidden, positional, vm)) return 0;
  if (!vm.count("trace")) throw UsageError("give the TRACE.csv to replay");
  const Trace trace = read_trace(vm["trace"].as<std::string>());
  Config config = config_for_trace(vm, trace);
  const Extrapolation beyond = extrapolation(*config.model, {&trace});
  if (!beyond.text.empty()) config.notes.push_back(beyond.text);  // into summary.json's provenance
  if (vm.count("out"))
    check_outputs({std::filesystem::path(vm["out"].as<std::string>()) / "steps.csv",
                   std::filesystem::path(vm["out"].as<std::string>()) / "summary.json"});
  const SimulationRun sim = ddpsim::replay(trace, config);
  std::vector<TokenSummary> summaries;
  for (const auto& run : sim.runs) summaries.push_back(summarize(run));
  std::cout << "ddpsim replay: " << trace.path << " (" << trace.runs.size() << " polic"
            << (trace.runs.size() == 1 ? "y" : "ies") << ", " << trace.runs.front().G << " ranks) with "
            << config.model->origin << "\n"
            << platform_line(config, trace) << "\n"
            << beyond.note() << step_table(sim.runs, summaries, /*changes=*/sim.runs.size() > 1);
  if (vm.count("out")) {
    const std::filesystem::path dir = vm["out"].as<std::string>();
    const Metadata metadata = {{"tool", "ddpsim replay"},
                               {"replayed", trace.path},
                               {"model", config.model->origin},
                               {"platform", config.platform.topology},
                               {"algorithm", config.simulation.algorithm}};
    nlohmann::json summary_config = config.resolved;
    summary_config["replayed"] = trace.path;
    write_outputs(dir, {{"steps.csv", trace_csv(sim.runs, metadata)},
                        {"summary.json", summary_json(summary_config, sim.runs, summaries, config.provenance())}});
    std::cout << "wrote " << (dir / "steps.csv").string() << " and " << (dir / "summary.json").string() << "\n";
  }
  return 0;
}

}  // namespace ddpsim::cli
