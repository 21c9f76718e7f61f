#include "eval/sharding.hpp"

#include <algorithm>
#include <regex>

#include "common/error.hpp"

namespace ddpsim {

std::vector<ShardUnit> shard_units(const PerfModel& model) {
  static const std::regex block(R"((?:^|\.)(?:layers|layer|h|blocks)\.(\d+)\.)");
  std::vector<ShardUnit> units(1);
  units[0].root = true;
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

double sharded_memory_offset_mib(const Config& config) {
  constexpr double MiB = 1024.0 * 1024.0;
  const PerfModel& m = *config.model;
  const double state = double(m.total_params()) * 16 / MiB, G = config.training.world_size;
  std::vector<double> bytes;
  for (const ShardUnit& u : shard_units(m)) bytes.push_back(u.bytes);
  std::sort(bytes.rbegin(), bytes.rend());
  const double gathered = (bytes[0] + (bytes.size() > 1 ? bytes[1] : 0.0)) / MiB;
  // A calibrated model's m0 may hold less than the whole state (it measured what it measured):
  // never below the sharded state itself.
  return std::max(state / G - m.mem_m0_mib, state / G - state) + gathered;
}

void check_sharded(const Config& c, const std::string& origin) {
  const std::string why = origin + ": training.data_parallel \"fsdp\" ";
  if (c.parallel)
    throw InputError(why +
                     "shards a data-parallel step; a pipeline job's parallel section has its own "
                     "data_parallel (zero1, zero2): leave one of them out");
  if (c.simulation.mode != "fast")
    throw InputError(why +
                     "is simulated in fast mode so far (collectives timed once in SimGrid, then composed): "
                     "simulation.mode \"full\" simulates DDP's buckets only");
  if (c.training.micro_batches > 1)
    throw InputError(why + "with training.micro_batches " + std::to_string(c.training.micro_batches) +
                     ": gradient accumulation under FSDP (a reduce-scatter per micro-batch, or unsharded gradients "
                     "kept) is not simulated yet");
  if (c.simulation.algorithm != "ring")
    throw InputError(why + "gathers and reduce-scatters in rings over the ranks; simulation.algorithm \"" +
                     c.simulation.algorithm + "\" is DDP's allreduce (leave it out)");
}

}  // namespace ddpsim
