#include "eval/sharding.hpp"

#include <algorithm>
#include <numeric>
#include <regex>

#include "common/error.hpp"
#include "engine/platform.hpp"

namespace ddpsim {

std::vector<ShardUnit> shard_units(const PerfModel& model, const std::string& wrap) {
  static const std::regex block(R"((?:^|\.)(?:layers|layer|h|blocks)\.(\d+)\.)");
  std::vector<ShardUnit> units(1);
  units[0].root = true;
  if (wrap == "root") {
    for (const LayerSpec& layer : model.layers) {
      units[0].bytes += double(layer.params) * model.bytes_per_param;
      units[0].share += layer.bwd_fraction;
    }
    return units;
  }
  std::vector<std::string> keys;  // the block index each unit after the root stands for
  for (const LayerSpec& layer : model.layers) {
    std::smatch m;
    std::size_t u = 0;
    if (std::regex_search(layer.name, m, block)) {
      const auto found = std::find(keys.begin(), keys.end(), m[1].str());
      u = 1 + static_cast<std::size_t>(found - keys.begin());
      if (found == keys.end()) {
        keys.push_back(m[1].str());
        units.emplace_back();
      }
    }
    units[u].bytes += double(layer.params) * model.bytes_per_param;
    units[u].share += layer.bwd_fraction;
  }
  return units;
}

void resolve_shard_group(Config& c, const std::string& origin) {
  TrainingConfig& t = c.training;
  if (t.data_parallel != "hybrid") {  // zero2 and fsdp shard over every rank
    t.shard_group = t.world_size;
    return;
  }
  if (t.shard_group == 0 && c.platform.topology == "xml")
    throw InputError(origin +
                     ": training.data_parallel \"hybrid\" on an xml platform: give training.shard_group "
                     "(the ranks a group shards over, a node's GPUs as a rule): the file's nodes are not known here");
  if (t.shard_group == 0) {
    const std::vector<int> nodes = node_of_ranks(c.platform, t.world_size);
    t.shard_group = static_cast<int>(std::count(nodes.begin(), nodes.end(), nodes.front()));
  }
  if (t.world_size % t.shard_group != 0)
    throw InputError(origin + ": training.shard_group " + std::to_string(t.shard_group) + " does not divide " +
                     "training.world_size " + std::to_string(t.world_size) +
                     ": hybrid sharding replicates whole groups of shard_group ranks (give a divisor)");
}

double sharded_memory_offset_mib(const Config& config) {
  constexpr double MiB = 1024.0 * 1024.0;
  const PerfModel& m = *config.model;
  const double state = double(m.total_params()) * 16 / MiB, S = config.training.shard_group;
  if (S <= 1) return 0;  // one rank a group shards and gathers nothing: DDP's memory, the model's own
  if (config.training.data_parallel == "zero2") {  // the weights whole, at the gradient dtype's size; the rest sharded
    const double weights = double(m.total_params()) * m.bytes_per_param / MiB, held = weights + (state - weights) / S;
    return std::max(held - m.mem_m0_mib, held - state);
  }
  std::vector<double> bytes;
  for (const ShardUnit& u : shard_units(m, config.training.wrap)) bytes.push_back(u.bytes);
  std::sort(bytes.rbegin(), bytes.rend());
  const double gathered = config.training.reshard_after_forward
                              ? (bytes[0] + (bytes.size() > 1 ? bytes[1] : 0.0)) / MiB
                              : std::accumulate(bytes.begin(), bytes.end(), 0.0) / MiB;
  // A calibrated model's m0 may hold less than the whole state (it measured what it measured):
  // never below the sharded state itself.
  return std::max(state / S - m.mem_m0_mib, state / S - state) + gathered;
}

void check_sharded(const Config& c, const std::string& origin) {
  const std::string why = origin + ": training.data_parallel \"" + c.training.data_parallel + "\" ";
  if (c.parallel)
    throw InputError(why +
                     "shards a data-parallel step; a pipeline job's parallel section has its own "
                     "data_parallel (ddp, zero2): leave one of them out");
  if (c.simulation.mode != "fast" && !c.training.fully_sharded())
    throw InputError(why +
                     "is simulated in fast mode so far (collectives timed once in SimGrid, then composed): "
                     "simulation.mode \"full\" takes ddp, fsdp and hybrid");
  if (c.training.micro_batches > 1)
    throw InputError(why + "with training.micro_batches " + std::to_string(c.training.micro_batches) +
                     ": gradient accumulation under sharding (a reduce-scatter per micro-batch, or unsharded "
                     "gradients kept) is not simulated yet");
  if (c.training.fully_sharded() && c.training.wrap == "layer" && shard_units(*c.model).size() < 2)
    throw InputError(origin + ": training.wrap \"layer\" wraps each transformer block, and model " + c.model->name +
                     "'s layout names none (no parameter named layers.N., layer.N., h.N. or blocks.N.): wrap "
                     "\"root\" shards it as one unit");
  if (c.simulation.algorithm != "ring")
    throw InputError(why + "gathers and reduce-scatters in rings over the ranks; simulation.algorithm \"" +
                     c.simulation.algorithm + "\" is DDP's allreduce (leave it out)");
}

}  // namespace ddpsim
