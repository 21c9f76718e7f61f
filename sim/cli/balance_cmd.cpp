// `ddpsim balance`: token-level comparison of policies on one config.
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "cli/config_args.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim balance [CONFIG] [options]

Runs each policy for the configured number of steps on the same seeded sample stream and
prints, per policy: the per-step maximum padded tokens over ranks (mean, P95), the mean
cross-rank standard deviation of padded tokens, padding waste (padded - real) / padded, the
mean global batch, samples consumed and the mean decision time. Changes are against the
first policy. No timing model is involved: padded tokens are the study's proxy.

CONFIG is a JSON file with sections data, training and policies (see docs/config.md); without
one, the study's setting: SST-2 train lengths (embedded), G=4, B=48, K=64, 800 steps, max
length 256, comparing static, minmax (tokens and tokens_sq), kk, sorted and token_budget.

policies: name[:option=value]...; `ddpsim policies` lists every name, option and default.

examples:
  ddpsim balance
  ddpsim balance --policies static,minmax:buffer=16,minmax:buffer=64 --out runs/k
  ddpsim balance my.json --set training.world_size=8 --set training.global_batch=256
)";

}  // namespace

int balance(const Args& args) {
  po::options_description visible("options"), hidden;
  po::positional_options_description positional;
  add_config_options(visible, hidden, positional);
  visible.add_options()("out", po::value<std::string>(), "write DIR/steps.csv and DIR/summary.json")("help,h",
                                                                                                     "this help");
  po::variables_map vm;
  if (!parse(args, USAGE, visible, hidden, positional, vm)) return 0;
  const Config config = load_config(vm);
  if (config.parallel && config.parallel->abstract_mode)
    throw InputError(config.origin + ": parallel.abstract: this pipeline job has no data and no policies to balance "
                     "(a model-mode pipeline balances over its data-parallel groups)");
  if (print_config(vm, config)) return 0;

  const StepShape shape = config.shape();
  const auto source = make_length_source(config.data, config.training.max_length);
  const std::vector<int> dataset = config_dataset(config, *source);

  std::cout << "ddpsim balance: " << config.origin << "\n  data: " << source->describe() << "\n  G=" << shape.G
            << " ranks, B=" << shape.B << ", " << config.training.steps << " steps, max_length " << shape.max_length
            << ", seed " << shape.seed << "\n\n";
  // steps.csv is written as the steps are planned, so a long run never holds its rows.
  std::unique_ptr<AtomicFile> trace_file;
  std::unique_ptr<TraceWriter> trace;
  std::filesystem::path dir;
  if (vm.count("out")) {
    dir = vm["out"].as<std::string>();
    check_outputs({dir / "steps.csv", dir / "summary.json"});
    const Metadata metadata = {{"tool", "ddpsim balance"},
                               {"config", config.origin},
                               {"data", source->describe()},
                               {"world_size", std::to_string(shape.G)},
                               {"global_batch", std::to_string(shape.B)},
                               {"seed", std::to_string(shape.seed)}};
    trace_file = std::make_unique<AtomicFile>(dir / "steps.csv");
    trace = std::make_unique<TraceWriter>(trace_file->stream(), metadata, trace_columns_for(config));
  }
  const bool show_progress = ::isatty(STDERR_FILENO);
  const int block = std::max(1, (1 << 18) / shape.G);
  std::vector<PolicyRun> runs;
  std::vector<TokenSummary> summaries;
  for (const auto& spec : config.policies) {
    if (show_progress)
      std::cerr << "  [" << runs.size() + 1 << "/" << config.policies.size() << "] " << spec.label() << "\r"
                << std::flush;
    PolicyStream stream(spec, shape, dataset);
    SummaryBuilder summary(shape.G);
    PolicyRun run;
    for (int first = 0; first < config.training.steps; first += block) {
      run = stream.next(std::min(block, config.training.steps - first));
      summary.add_steps(run);
      if (trace) trace->write(run.label, run.rows);
    }
    run.rows = {};
    run.decision_us = {};
    runs.push_back(std::move(run));
    summaries.push_back(summary.finish());
  }
  if (show_progress) std::cerr << std::string(60, ' ') << "\r";
  std::cout << balance_table(runs, summaries);

  if (trace) {
    std::vector<std::unique_ptr<AtomicFile>> written;
    written.push_back(std::move(trace_file));
    publish({{dir / "summary.json", summary_json(config.resolved, runs, summaries)}}, std::move(written));
    std::cout << "\nwrote " << (dir / "steps.csv").string() << " and " << (dir / "summary.json").string() << "\n";
  }
  return 0;
}

}  // namespace ddpsim::cli
