#include "cli/run_report.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "eval/sharding.hpp"
#include "report/outputs.hpp"
#include "sched/scheduler.hpp"

namespace ddpsim::cli {

namespace {

// ZeRO's optimizer shards: even, or by whole parameters with the largest share a rank holds.
std::string optimizer_shards(const Config& config) {
  const TrainingConfig& t = config.training;
  if (t.zero_partition == "even") return "optimizer state sharded";
  const std::vector<double> shares = zero_shares(*config.model, t.world_size, t.zero_partition);
  const auto [least, most] = std::minmax_element(shares.begin(), shares.end());
  return "optimizer state sharded by whole parameters, " + format("%.1f", 100 * *least) + "% to " +
         format("%.1f", 100 * *most) + "% of them a rank";
}

}  // namespace

std::string data_parallel_line(const Config& config, std::size_t buckets) {
  const TrainingConfig& t = config.training;
  if (!t.sharded())
    return "allreduce: " + config.simulation.algorithm + ", " + std::to_string(buckets) + " buckets, overlap " +
           (t.overlap ? "on" : "off") + ", " + config.simulation.mode + " mode";
  if (t.data_parallel == "zero1")
    return "data parallel: zero1 (gradients allreduced in " + std::to_string(buckets) + " buckets, " +
           config.simulation.algorithm + ", " + optimizer_shards(config) +
           ", parameters all-gathered after the step in a ring), overlap " + (t.overlap ? "on" : "off") + ", " +
           config.simulation.mode + " mode";
  if (t.data_parallel == "zero2")
    return "data parallel: zero2 (gradients reduce-scattered in " + std::to_string(buckets) + " buckets, " +
           optimizer_shards(config) + ", parameters all-gathered after the step), ring, overlap " +
           (t.overlap ? "on" : "off") + ", " + config.simulation.mode + " mode";
  const std::size_t n = shard_units(*config.model, t.wrap, t.min_num_params).size();
  std::string units = n == 1              ? std::string("one unit (the whole model)")
                      : t.wrap == "layer" ? std::to_string(n) + " units (a root and a unit per block)"
                                          : std::to_string(n) + " units (a root and " + std::to_string(n - 1) +
                                                " of at least " + format("%g", t.min_num_params) +
                                                (t.min_num_params == 1 ? " parameter)" : " parameters)");
  if (n == 1 && t.wrap == "size") units += ", no module holds " + format("%g", t.min_num_params) + " parameters";
  units += t.reshard_after_forward ? ", resharded after forward" : ", kept gathered from forward to backward";
  if (accumulates(config))
    units += t.no_sync ? ", reduce-scattered after the last micro-batch (no_sync)"
                       : ", reduce-scattered after every micro-batch";
  if (t.backward_prefetch != "backward_pre" && t.reshard_after_forward && n > 1)
    units += ", backward_prefetch " + t.backward_prefetch;
  if (t.forward_prefetch > 1 && n > 1) units += ", " + std::to_string(t.forward_prefetch) + " units gathered ahead";
  if (t.backward_prefetch_depth > 1 && t.reshard_after_forward && n > 1)
    units += ", " + std::to_string(t.backward_prefetch_depth) + " re-gathered ahead in backward";
  if (config.simulation.unit_jitter > 0 && n > 1)
    units += ", unit jitter σ " + format("%g", config.simulation.unit_jitter);
  const int groups = t.world_size / t.shard_group;
  if (t.data_parallel == "fsdp" || groups == 1)
    return "data parallel: " + t.data_parallel + " (full sharding" +
           (t.data_parallel == "hybrid" ? " in one group of every rank: fsdp" : "") + "), " + units +
           ", ring all-gather and reduce-scatter, " + config.simulation.mode + " mode";
  const auto count = [](int n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
  return "data parallel: hybrid (full sharding inside " + count(groups, "group") + " of " +
         count(t.shard_group, "rank") + ", replicated across them), " + units +
         ", ring all-gather and reduce-scatter in a group, ring allreduce of each shard across groups, " +
         config.simulation.mode + " mode";
}

std::vector<std::string> capacity_warnings(const Config& config, const SimulationRun& sim) {
  const PerfModel& m = *config.model;
  const auto mib = [](double v) { return std::to_string(std::llround(v)) + " MiB"; };
  if (m.mem_capacity_mib > 0 && m.mem_m0_mib > m.mem_capacity_mib && config.training.sharded()) {
    const std::string& dp = config.training.data_parallel;
    return {m.name + "'s fixed memory under " +
            (dp == "fsdp"    ? "FSDP"
             : dp == "zero1" ? "ZeRO-1"
             : dp == "zero2" ? "ZeRO-2"
                             : "HSDP") +
            " alone (" +
            (dp == "zero1"   ? "weights and gradients, and its shard of the optimizer state: "
             : dp == "zero2" ? "weights, and its shard of gradients and optimizer state: "
                             : "its shard of weights, gradients and optimizer state, and what it gathers: ") +
            mib(m.mem_m0_mib) + ") passes its capacity of " + mib(m.mem_capacity_mib) +
            ": no batch fits a rank, and the times assume memory allowed (" +
            (dp == "zero1" || dp == "zero2" ? "more ranks shard it thinner, or a deeper stage of sharding"
                                            : "more ranks a shard group shard it thinner") +
            ")"};
  }
  if (m.mem_capacity_mib > 0 && m.mem_m0_mib > m.mem_capacity_mib)
    return {m.name + "'s fixed memory alone (weights, gradients, optimizer state: " + mib(m.mem_m0_mib) +
            ") passes its capacity of " + mib(m.mem_capacity_mib) +
            ": no batch fits a rank under plain DDP, and the times assume memory allowed (sharding is for that: "
            "training.data_parallel \"fsdp\", or a parallel section with data_parallel zero2)"};
  std::vector<std::string> warnings;
  for (std::size_t p = 0; p < sim.runs.size(); ++p)
    if (const TokenSummary& s = sim.summaries[p]; s.steps_over_capacity > 0)
      warnings.push_back("policy " + sim.runs[p].label + ": in " + std::to_string(s.steps_over_capacity) + " of " +
                         std::to_string(s.steps) + " steps a rank needs more memory than " + m.name +
                         "'s capacity (up to " + std::to_string(std::llround(s.max_peak_mem_mib)) + " of " +
                         mib(m.mem_capacity_mib) +
                         "): a real run would run out of memory; cap the batch with training.b_max (\"model\" "
                         "derives the cap from the memory model)");
  return warnings;
}

nlohmann::json provenance(const Config& config, const std::vector<std::string>& warnings) {
  nlohmann::json p = config.provenance();
  if (!warnings.empty()) p["warnings"] = warnings;
  return p;
}

void print_header(std::ostream& out, const Config& config, const LengthSource& source, const char* verb) {
  const StepShape shape = config.shape();
  out << "ddpsim " << verb << ": " << config.origin << "\n  data: " << source.describe() << "\n  G=" << shape.G
      << " ranks, B=" << shape.B << ", " << config.training.steps << " steps, max_length " << shape.max_length
      << (config.training.micro_batches > 1 && !config.parallel
              ? ", " + std::to_string(config.training.micro_batches) + " micro-batches a rank"
              : "")
      << ", seed " << shape.seed << "\n  model: " << config.model->name << " (" << config.model->origin
      << ")\n  model source: " << config.model->source
      << (config.model->fit_warning.empty() ? "" : "\n  warning: this model " + config.model->fit_warning)
      << "\n  platform: " << config.platform.to_json().dump()
      << (config.platform_source.empty() ? "" : "\n  platform from: " + config.platform_source) << "\n  "
      << data_parallel_line(config, config_buckets(config).size()) << "\n  gradients: " << config.gradients() << "\n";
  out << "\n";
}

void publish_and_say(const std::vector<std::pair<std::filesystem::path, std::string>>& files,
                     std::vector<std::unique_ptr<AtomicFile>> written,
                     const std::vector<std::filesystem::path>& streamed) {
  publish(files, std::move(written));
  if (files.empty() && streamed.empty()) return;
  std::cout << "wrote";
  for (const auto& path : streamed) std::cout << " " << path.string();
  for (const auto& [path, content] : files) std::cout << " " << path.string();
  std::cout << "\n";
}

}  // namespace ddpsim::cli
