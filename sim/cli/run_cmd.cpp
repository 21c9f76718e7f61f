// `ddpsim run` and `ddpsim compare`: the SimGrid step simulation of a config's policies.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "calib/registration.hpp"
#include "cli/against.hpp"
#include "cli/commands.hpp"
#include "cli/config_args.hpp"
#include "cli/pipeline_verb.hpp"
#include "cli/progress.hpp"
#include "cli/replicates.hpp"
#include "cli/run_report.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "eval/sharding.hpp"
#include "eval/simulate.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* RUN_USAGE = R"(usage: ddpsim run [CONFIG] [options]

Simulates synchronous DDP training steps on SimGrid: per rank, the scheduling decision,
forward, backward in gradient buckets whose allreduce overlaps the rest of backward, then the
optimizer once every bucket is reduced. Compute times come from a performance model (with
log-normal noise and per-rank speed factors), communication from SimGrid's network model on
the configured platform. Prints, per policy: mean and P95 of the per-step maximum step time,
samples/s and tokens/s (mean and P95 of the per-step values), the mean cross-rank std of step
time, compute, padded tokens and peak memory, and the exposed communication wait.

Without CONFIG: the study's setting (SST-2 lengths, G=4, B=48, 800 steps) on `pcie`
(4x RTX 3090 through the CPU root complex) with the rtx3090-distilbert model, ring allreduce,
25 MiB buckets (first 1 MiB), overlap on, fast mode.

config sections (every key with its range and default: docs/config.md):
  data        where the lengths come from: sst2, histogram, trace, tsv or lognormal
  training    world_size, global_batch, steps, max_length, seed, b_max, bucket_mb,
              first_bucket_mb, overlap, micro_batches, attention (padded | packed),
              pad_to_multiple_of, grad_dtype,
              data_parallel (ddp | zero1 | zero2 | fsdp | hybrid),
              zero_partition (even | parameters), shard_group,
              wrap (layer | root | size), min_num_params,
              reshard_after_forward, no_sync, backward_prefetch,
              backward_prefetch_depth, forward_prefetch
  policies    the policies simulated, a column each (ddpsim policies lists them)
  model       a built-in name (rtx3090-distilbert, h100-distilbert) or a model JSON file
  platform    topology pcie | nvlink | cluster | xml, bandwidths in GB/s, latencies in us
  simulation  mode fast | full (a pipeline's default: full, every flow on SimGrid, up to 4,096
              GPUs; fast: only its syncs, any size on leaves, refused where its steps would differ),
              algorithm ring | tree | hierarchical (a pipeline's syncs: ring | hierarchical),
              sched_ms, noise_sigma,
              noise_shared_sigma, unit_jitter (fsdp, hybrid), spells, first_use,
              rank_speed, stragglers
  parallel    a pipeline-parallel job instead of DDP: GPipe or 1F1B stages in ZeRO-2 or DDP
              groups, flow classes sharing links by weight; its work in time units
              (abstract) or from the model, data and policies

A pipeline job prints step time, bubble, each flow class's traffic and each stage's memory;
--out writes DIR/summary.json and DIR/pipeline_steps.csv (each step's time and bubble),
--timeline a lane per GPU and flow class, --link-series each class's link utilisation.

examples:
  ddpsim run
  ddpsim run --policies minmax --set platform.topology=nvlink --set model=h100-distilbert
  ddpsim run --set simulation.mode=full --timeline t.json --timeline-steps 10:12 --out runs/a
  ddpsim run --set 'simulation.stragglers=[{"rank":2,"factor":1.3,"from_step":200}]'
  ddpsim run configs/pipeline-study.json --set parallel.channels.model=shared
  ddpsim run configs/llama3-8b-pipeline.json --set parallel.partition=memory
  ddpsim run configs/pipeline-study.json --timeline study.json --link-series links.csv \
      --link-bin 0.25
)";

constexpr const char* COMPARE_USAGE = R"(usage: ddpsim compare [CONFIG] [--policies a,b,...] [options]

The simulation of `ddpsim run` (its config sections: `ddpsim run --help`; every key with its
range and default: docs/config.md), printed as one column per policy with each figure's change
against the first policy. Every policy sees the same sample stream and the same compute noise,
so differences come from the policies alone. Without --policies, the config's policies (the
embedded default compares static, minmax with tokens and tokens_sq, kk, sorted, token_budget).
Where the model draws compute noise, each gain is printed beside the same gain with that noise
off (the plan alone): a gain the noise model makes is then visible as such.

With --replicates R, each gain also gets a 95% prediction interval: the seeds' range widened
by what the model does not know — the spread over the forms its fit supports, the session a
run meets (by compute regime), the first-use cost, a poor fit's held-out error, how far runs
trained in turn differed in level (a model calibrated with several --training runs), batch
sizes its training runs never held, and for a model derived from specs its efficiency, launch
floor and network (with --against, any network it did not measure) — and the source that
dominates it (docs/intervals.md). Each policy's mean max step gets one too, in % of the step,
which also carries the level of the process a run meets (the model's, from calibrate
--training over several processes, or this project's figures; a model from a profile alone
carries the training loop it never timed). summary.json carries them under "replicates". A
model-mode pipeline job takes --replicates too: its gains are in mean pipeline step time, and
carry the wider, launch-bound session spread (a pipeline step is no one rank-step to place in a
regime).

With --against [LABEL:]KEY=VALUE (repeatable), the columns are configs instead of policies: the
config, then variants of it, each with its values set as --set sets them (values sharing a
LABEL make one column), all under the config's one policy (choose it with --policies). It
answers what-ifs on the setting — ZeRO-1 or DDP, NVLink or PCIe, 8 or 16 GPUs — at the same
seeds. Each column is a run of its own, so with --replicates its gain's interval takes the
session term of runs apart, and the model's variants are set on both sides of the gain.
--out DIR then writes DIR/summary.json alone: each column's values, config and figures;
--register FILE the prediction before its runs, for ddpsim validate --registered FILE --column.

examples:
  ddpsim compare
  ddpsim compare --policies static,minmax,minmax:cost=model
  ddpsim compare --policies static,minmax --replicates 20   # each gain, its range over 20 seeds
  ddpsim compare configs/llama3-8b-pipeline.json --replicates 10 --steps 50
  ddpsim compare my.json --policies static,minmax --set simulation.algorithm=tree
  ddpsim compare configs/llm-rollouts.json --policies static,verl:max_token_len=16384 \
      --set training.micro_batches=4 --set training.attention=packed
      # VeRL's dynamic batching against 4 fixed micro-batches, both remove-padding as in VeRL
      # (with padded attention, each of verl's few large micro-batches would pad to its longest)
  ddpsim compare --policies sorted --against zero1:training.data_parallel=zero1 \
      --against 8gpus:training.world_size=8 --against 8gpus:platform.topology=nvlink --replicates 10
)";

std::pair<int, int> parse_range(const std::string& text) {
  const auto colon = text.find(':');
  try {
    if (colon != std::string::npos) {
      std::size_t used = 0;
      const int a = std::stoi(text.substr(0, colon), &used);
      if (used == colon) {
        const std::string rest = text.substr(colon + 1);
        const int b = std::stoi(rest, &used);
        if (used == rest.size() && 0 <= a && a < b) return {a, b};
      }
    }
  } catch (const std::out_of_range&) {
    throw UsageError("--timeline-steps \"" + text + "\": a step number beyond 2147483647");
  } catch (const std::exception&) {
  }
  throw UsageError("--timeline-steps \"" + text + "\": expected FROM:TO with 0 <= FROM < TO, e.g. 10:12");
}

// What compare was given, as a registration records it (--steps as its --set equivalent).
RegisteredInputs registered_inputs(const po::variables_map& vm, const Args& args) {
  RegisteredInputs in;
  if (vm.count("config")) in.config_file = vm["config"].as<std::string>();
  if (vm.count("set")) in.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("steps")) in.sets.push_back("training.steps=" + std::to_string(vm["steps"].as<int>()));
  in.command = "ddpsim compare";
  for (const std::string& a : args) in.command += " " + a;
  return in;
}

// The files a data-parallel run or compare writes, checked writable before any work.
void check_run_outputs(const po::variables_map& vm) {
  std::vector<std::filesystem::path> outputs;
  if (vm.count("out"))
    for (const char* name : {"steps.csv", "summary.json"})
      outputs.push_back(std::filesystem::path(vm["out"].as<std::string>()) / name);
  if (vm.count("timeline")) outputs.emplace_back(vm["timeline"].as<std::string>());
  check_outputs(outputs);
}

void add_simulate_options(po::options_description& visible, bool compare) {
  if (compare)
    visible.add_options()(
        "against", po::value<std::vector<std::string>>()->composing(),
        "[LABEL:]KEY=VALUE: a column of the config with KEY set to VALUE, against the config's "
        "own (values sharing a LABEL make one column; repeatable; --out then writes summary.json alone, "
        "--print-config each column's config)");
  visible.add_options()("out", po::value<std::string>(),
                        "write DIR/steps.csv (trace schema) and DIR/summary.json (a pipeline job: DIR/summary.json and "
                        "DIR/pipeline_steps.csv)")(
      "timeline", po::value<std::string>(), "write a Chrome trace JSON (Perfetto, chrome://tracing) of some steps")(
      "timeline-steps", po::value<std::string>()->default_value("0:3"),
      "FROM:TO, the steps the timeline (and the link series) shows")(
      "link-series", po::value<std::string>(),
      "pipelines: write a CSV of each flow class's link utilisation over the timeline's steps")(
      "link-bin", po::value<double>(),
      "pipelines: the link series' bin in ms (time units in abstract mode); default: a 200th of the steps")(
      "replicates", po::value<int>()->default_value(1),
      "R: simulate the config again under seeds seed+1 ... seed+R-1 and add a table of each policy's mean, P95 and "
      "gain as the mean over the seeds with their 2.5-97.5% range, and each gain's prediction interval (outputs hold "
      "the first seed's run; summary.json adds the ranges)")(
      "register", po::value<std::string>(),
      "FILE: compare only, with --replicates: write the prediction as registered before its run (the config, its "
      "--set, the model's hash, every policy's figures and each gain's prediction interval), for ddpsim validate "
      "--registered FILE to score")("help,h", "this help");
}

// --replicates and --register against the config; returns the replicates.
int checked_replicates(const po::variables_map& vm, const Config& config, bool compare) {
  const int replicates = vm["replicates"].as<int>();
  if (replicates < 1 || replicates > 1000)
    throw UsageError("--replicates " + std::to_string(replicates) + ": expected 1 (no replicates) to 1000 seeds");
  if (replicates > 1 && !can_simulate_again(config))
    throw UsageError(std::string("--replicates ") + std::to_string(replicates) + ": " + kXmlOncePerProcess +
                     "; run each seed as its own command (--set training.seed=N)");
  if (replicates > 1 && config.parallel && config.parallel->abstract_mode)
    throw UsageError(
        "--replicates repeats a run under other seeds; an abstract pipeline job has no sample stream to "
        "redraw");
  if (!vm.count("register")) return replicates;
  const std::string file = vm["register"].as<std::string>();
  if (!compare) throw UsageError("--register writes a prediction of gains: use ddpsim compare");
  if (config.parallel)
    throw UsageError("--register " + file +
                     ": a registered prediction is scored by ddpsim validate against a traced data-parallel run, "
                     "and no trainer here runs a pipeline job");
  if (vm.count("config-json"))  // a registration names its config file, which a later validate reads
    throw UsageError("--register " + file + " records the config file it predicts from: write the config to a file");
  if (replicates < 2)
    throw UsageError("--register " + file +
                     " registers each gain with its prediction interval, which needs the seeds' range: add "
                     "--replicates R (20 is usual)");
  if (config.policies.size() < 2 && !vm.count("against"))
    throw UsageError("--register " + file +
                     ": a registered prediction is of gains over the first policy; give two "
                     "or more with --policies");
  check_output_path(file, "--register");
  return replicates;
}

// The steps a --timeline or --link-series records ({0, 0}: none), its options checked first.
std::pair<int, int> checked_timeline(const po::variables_map& vm, const Config& config) {
  if (!config.parallel)
    for (const char* option : {"link-series", "link-bin"})
      if (vm.count(option))
        throw UsageError(std::string("--") + option +
                         " is for pipeline jobs (a config with a parallel section); a DDP run's communication is in "
                         "its --timeline");
  if (vm.count("link-bin") && !vm.count("link-series"))
    throw UsageError("--link-bin sets the bins of a --link-series FILE, which is not given");
  if (vm.count("link-bin") && !(vm["link-bin"].as<double>() > 0 && std::isfinite(vm["link-bin"].as<double>())))
    throw UsageError("--link-bin " + format("%g", vm["link-bin"].as<double>()) + ": expected a positive width");
  const bool recorded = vm.count("timeline") || vm.count("link-series");
  if (!recorded && !vm["timeline-steps"].defaulted())
    throw UsageError("--timeline-steps chooses the steps of a --timeline FILE (or --link-series), which is not given");
  if (!recorded) return {0, 0};
  const std::pair<int, int> timeline = parse_range(vm["timeline-steps"].as<std::string>());
  if (timeline.first >= config.training.steps)
    throw UsageError("--timeline-steps " + vm["timeline-steps"].as<std::string>() + ": the run has " +
                     std::to_string(config.training.steps) + " steps (0 to " +
                     std::to_string(config.training.steps - 1) + "), so the timeline would be empty");
  for (const char* option : {"timeline", "link-series"})
    if (vm.count(option))
      check_output_path(vm[option].as<std::string>(), std::string("--") + option);  // before the work
  return timeline;
}

// DIR/steps.csv, written while the steps are simulated so that a long run never holds its rows.
std::unique_ptr<TraceWriter> open_trace(const Config& config, const LengthSource& source, const char* tool,
                                        const std::filesystem::path& dir, std::unique_ptr<AtomicFile>& file) {
  const StepShape shape = config.shape();
  Metadata metadata = {{"tool", tool},
                       {"config", config.origin},
                       {"data", source.describe()},
                       {"world_size", std::to_string(shape.G)},
                       {"global_batch", std::to_string(shape.B)},
                       {"seed", std::to_string(shape.seed)},
                       {"model", config.model->origin},
                       {"platform", config.platform.topology},
                       {"algorithm", config.simulation.algorithm},
                       {"mode", config.simulation.mode},
                       {"attention", config.training.attention},
                       {"data_parallel", config.training.data_parallel}};
  if (config.training.data_parallel == "zero1") metadata.push_back({"zero_partition", config.training.zero_partition});
  file = std::make_unique<AtomicFile>(dir / "steps.csv");
  return std::make_unique<TraceWriter>(file->stream(), metadata, trace_columns_for(config));
}

// The registration, summary.json and the timeline beside steps.csv: all of them or none.
void publish_outputs(const po::variables_map& vm, const Args& args, const Config& config, const SimulationRun& sim,
                     const nlohmann::ordered_json& seeds, const std::vector<std::string>& warnings,
                     std::unique_ptr<AtomicFile> trace_file, bool trace, const std::filesystem::path& dir) {
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  if (vm.count("register")) {
    const std::string file = vm["register"].as<std::string>();
    files.emplace_back(file, registration_json(file, config, registered_inputs(vm, args), seeds).dump(2) + "\n");
  }
  if (trace)
    files.emplace_back(
        dir / "summary.json",
        summary_json(config.resolved, sim.runs, sim.summaries, provenance(config, warnings),
                     seeds.is_null() ? nlohmann::ordered_json() : nlohmann::ordered_json{{"replicates", seeds}}));
  if (vm.count("timeline")) files.emplace_back(vm["timeline"].as<std::string>(), chrome_trace(sim));
  std::vector<std::unique_ptr<AtomicFile>> written;
  if (trace_file) written.push_back(std::move(trace_file));
  publish_and_say(files, std::move(written),
                  trace ? std::vector<std::filesystem::path>{dir / "steps.csv"} : std::vector<std::filesystem::path>{});
}

int simulate_verb(const Args& args, bool compare) {
  po::options_description visible("options"), hidden;
  po::positional_options_description positional;
  add_config_options(visible, hidden, positional);
  add_simulate_options(visible, compare);
  po::variables_map vm;
  if (!parse(args, compare ? COMPARE_USAGE : RUN_USAGE, visible, hidden, positional, vm)) return 0;
  Config config = load_config(vm);
  if (vm.count("against")) {
    check_against(vm, config);
    return against_verb(vm, config, checked_replicates(vm, config, compare), registered_inputs(vm, args));
  }
  const std::pair<int, int> timeline = checked_timeline(vm, config);
  const int replicates = checked_replicates(vm, config, compare);
  if (print_config(vm, config)) return 0;  // after the options' checks: a refused command is refused either way
  if (config.parallel) return parallel_verb(config, vm, compare, timeline, replicates);
  const char* verb = compare ? "compare" : "run";
  check_run_outputs(vm);

  const auto source = make_length_source(config.data, config.training.max_length);
  const std::vector<int> dataset = config_dataset(config, *source);
  for (const std::string& note : config.add_data_notes(dataset)) std::cerr << "note: " << note << "\n";
  print_header(std::cout, config, *source, verb);
  std::unique_ptr<AtomicFile> trace_file;
  std::unique_ptr<TraceWriter> trace;
  const std::filesystem::path dir = vm.count("out") ? vm["out"].as<std::string>() : "";
  if (vm.count("out")) trace = open_trace(config, *source, compare ? "ddpsim compare" : "ddpsim run", dir, trace_file);
  RowSink sink;
  if (trace) sink = [&](const std::string& policy, std::span<const RankStep> rows) { trace->write(policy, rows); };

  const auto start = std::chrono::steady_clock::now();
  SimulationRun sim;
  {
    Progress progress("simulating", "steps");
    sim = simulate_streamed(config, dataset, timeline, std::ref(progress), sink);
  }
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << step_table(sim.runs, sim.summaries, /*changes=*/compare);
  std::fprintf(stdout, "\nsimulated %ld rank-steps in %.2f s\n",
               static_cast<long>(sim.runs.size()) * config.training.steps * config.shape().G, wall_s);
  const NoiseOff quiet = noise_off(config, dataset, sim);
  std::cout << quiet.report;
  Replicates seeds;
  if (replicates > 1) {
    Progress progress("replicates", "seeds");
    seeds = replicates_report(config, *source, sim, quiet.run ? &*quiet.run : nullptr, replicates, std::ref(progress));
    std::cout << seeds.report;
  }
  const std::vector<std::string> warnings = capacity_warnings(config, sim);
  for (const std::string& warning : warnings) std::cerr << "ddpsim " << verb << ": warning: " << warning << "\n";

  publish_outputs(vm, args, config, sim, seeds.json, warnings, std::move(trace_file), trace != nullptr, dir);
  return 0;
}

}  // namespace

int run(const Args& args) {
  return simulate_verb(args, false);
}
int compare(const Args& args) {
  return simulate_verb(args, true);
}

}  // namespace ddpsim::cli
