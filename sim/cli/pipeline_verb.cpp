// `ddpsim run` and `compare` on a pipeline job (cli/pipeline_verb.hpp).
#include "cli/pipeline_verb.hpp"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/progress.hpp"
#include "cli/replicates.hpp"
#include "cli/run_report.hpp"
#include "common/error.hpp"
#include "engine/platform.hpp"
#include "eval/pipeline_eval.hpp"
#include "pipeline/fast_pipeline.hpp"
#include "pipeline/parallel_config.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace po = boost::program_options;

namespace {

// The pipeline's links as the platform shapes them (pipeline/network.hpp).
std::string fabric_line(const Config& config) {
  const auto& p = config.platform;
  std::ostringstream line;
  line << p.topology << ", GPU links " << p.link_GBps << " GB/s and " << p.latency_us << " us";
  if (p.topology == "pcie" && p.host_GBps > 0) line << ", root complex " << p.host_GBps << " GB/s";
  const int nodes = node_of_ranks(p, config.training.world_size).back() + 1;
  if (p.topology == "cluster" && nodes > 1)
    line << " inside a node; " << nodes << " nodes, NICs " << p.nic_GBps << " GB/s and " << p.nic_latency_us << " us, "
         << p.nodes_per_leaf << " nodes per leaf, oversubscription " << p.oversubscription;
  return line.str();
}

// Jobs from which full mode's cost per send shows (about 0.1 s a step at 1,024 GPUs).
constexpr int FAST_MODE_HINT_GPUS = 1024;

// A pipeline job's header: its shape, channels and (model mode) partition and links.
void print_pipeline_header(const Config& config, bool compare) {
  const auto& p = *config.parallel;
  const nlohmann::json described = p.to_json();
  std::cout << "ddpsim " << (compare ? "compare" : "run") << ": " << config.origin << "\n  pipeline: " << p.setup.stages
            << (p.setup.stages == 1 ? " stage × " : " stages × ") << p.setup.groups << " data-parallel group"
            << (p.setup.groups == 1 ? "" : "s") << ", " << p.setup.schedule << ", " << p.setup.micro_batches
            << " micro-batches, " << p.setup.data_parallel
            << (p.setup.groups > 1 ? " (" + p.setup.algorithm + " syncs)" : std::string()) << ", "
            << config.training.steps << " step" << (config.training.steps == 1 ? "" : "s") << ", " << p.setup.mode
            << " mode"
            << "\n  channels: " << described["channels"].dump() << "\n";
  if (p.setup.mode == "full" && p.setup.gpus() >= FAST_MODE_HINT_GPUS && pipeline::fast_mode_obstacle(p.setup).empty())
    std::cout << "  (simulation.mode \"fast\" gives these steps without a SimGrid flow per send, many times "
                 "faster: docs/pipelines.md)\n";
  if (p.abstract_mode) {
    std::cout << "  abstract work: " << described["abstract"].dump() << "\n\n";
    return;
  }
  std::string layers;
  for (int n : pipeline::layers_per_stage(stage_partition(config), static_cast<int>(config.model->layers.size())))
    (layers += layers.empty() ? "" : " ") += std::to_string(n);
  std::cout << "  model: " << config.model->name << ", partition " << p.partition << " (layers per stage: " << layers
            << "), " << p.micro_batching << " micro-batches, " << p.activation_bytes_per_token
            << " activation bytes per token\n  links: " << fabric_line(config) << "\n\n";
}

}  // namespace

int parallel_verb(const Config& config, const po::variables_map& vm, bool compare, std::pair<int, int> record,
                  int replicates) {
  const std::filesystem::path dir = vm.count("out") ? std::filesystem::path(vm["out"].as<std::string>()) : "";
  std::vector<std::filesystem::path> outputs;
  if (!dir.empty()) outputs = {dir / "summary.json", dir / "pipeline_steps.csv"};
  for (const char* option : {"timeline", "link-series"})
    if (vm.count(option)) outputs.emplace_back(vm[option].as<std::string>());
  check_outputs(outputs);
  const pipeline::PipelineSetup& setup = config.parallel->setup;
  if ((vm.count("timeline") || vm.count("link-series")) && setup.gpus() > pipeline::MAX_PIPELINE_GPUS)
    throw UsageError("--timeline and --link-series record their steps in full mode, which simulates at most " +
                     std::to_string(pipeline::MAX_PIPELINE_GPUS) + " GPUs; this job has " +
                     std::to_string(setup.gpus()) + " (leave them out, or record a smaller job)");
  print_pipeline_header(config, compare);
  const auto columns = simulate_parallel(config, record);
  std::cout << pipeline_table(config, columns);
  nlohmann::ordered_json summary = pipeline_summary(config, columns);
  if (!config.parallel->abstract_mode) summary["provenance"] = config.provenance();  // time units need none
  if (replicates > 1) {
    Progress progress("replicates", "seeds");
    const Replicates seeds = pipeline_replicates(config, columns, replicates, std::ref(progress));
    std::cout << seeds.report;
    summary["replicates"] = seeds.json;
  }
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  if (!dir.empty()) {
    files.emplace_back(dir / "summary.json", summary.dump(2) + "\n");
    files.emplace_back(dir / "pipeline_steps.csv", pipeline_steps_csv(config, columns));
  }
  if (vm.count("timeline")) files.emplace_back(vm["timeline"].as<std::string>(), pipeline_timeline(config, columns));
  if (vm.count("link-series"))
    files.emplace_back(vm["link-series"].as<std::string>(),
                       link_series_csv(config, columns, vm.count("link-bin") ? vm["link-bin"].as<double>() : 0));
  publish_and_say(files);
  return 0;
}

}  // namespace ddpsim::cli
