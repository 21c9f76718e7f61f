// What a pipeline job takes from the rest of the config: the keys it refuses, and its
// network fabric from the platform section.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "engine/collective.hpp"
#include "eval/config_sections.hpp"
#include "eval/pipeline_eval.hpp"
#include "pipeline/fast_pipeline.hpp"
#include "pipeline/sync_plans.hpp"

namespace ddpsim::config_detail {

std::vector<UnusedKeys> unused_by_pipeline(bool abstract) {
  std::vector<UnusedKeys> unused = {
      {"training",
       {"bucket_mb", "first_bucket_mb", "overlap"},
       "a stage syncs its gradients every parallel.sync_every backward passes, not in DDP buckets"},
      {"training", {"micro_batches"}, "its micro-batches per step are parallel.micro_batches"},
      {"simulation",
       {"sched_ms", "spells", "first_use"},
       "its steps have no scheduling time, slow spells or first-use costs"}};
  if (abstract) {
    const std::string in_units = "in abstract mode the work is given in time units (parallel.abstract)";
    unused.push_back({"simulation", {"algorithm"}, in_units + " and its syncs are rings"});
    unused.push_back({"", {"data", "model", "platform", "policies"}, in_units});
    unused.push_back({"training", {"global_batch", "max_length", "b_max", "attention"}, in_units});
  }
  return unused;
}

void refuse_unused_by_pipeline(const JsonFields& top, const pipeline::ParallelConfig& p, const std::string& origin) {
  for (const UnusedKeys& unused : unused_by_pipeline(p.abstract_mode))
    for (const std::string& key : unused.keys) {
      const bool given = unused.section.empty() ? top.has(key)
                                                : top.has(unused.section) && top.raw(unused.section).is_object() &&
                                                      top.raw(unused.section).contains(key);
      if (given)
        throw InputError(origin + ": " + (unused.section.empty() ? "" : unused.section + ".") + key +
                         " is not used by a pipeline job (parallel): " + unused.instead);
    }
}

// A pipeline's links in the platform's shape (pipeline/network.hpp): a PCIe root complex, or
// nodes joined by NICs under leaf switches. An XML platform's routes cannot carry the three
// flow classes' channels, so pipelines take the built-in topologies only.
pipeline::Fabric pipeline_fabric(const PlatformConfig& platform, int G, const std::string& origin) {
  if (platform.topology == "xml")
    throw InputError(origin +
                     ": platform.topology \"xml\": pipelines run on the built-in topologies (pcie, "
                     "nvlink, cluster), whose links they copy per flow class");
  pipeline::Fabric fabric;
  if (platform.topology == "pcie") fabric.host_bytes_per_s = platform.host_GBps * 1e9;
  if (platform.topology == "cluster") {
    fabric.node = node_of_ranks(platform, G);
    fabric.nic_bytes_per_s = platform.nic_GBps * 1e9;
    fabric.nic_latency_s = platform.nic_latency_us * 1e-6;
    fabric.nodes_per_leaf = platform.nodes_per_leaf;
    fabric.leaf_bytes_per_s =
        platform.nodes_per_leaf * platform.gpus_per_node * platform.nic_GBps * 1e9 / platform.oversubscription;
  }
  return fabric;
}

void parse_pipeline_job(const JsonFields& top, Config& c, const std::string& origin,
                        const std::string& policies_origin) {
  c.parallel = pipeline::parse_parallel(top.raw("parallel"), origin + ": parallel", c.training.world_size);
  pipeline::PipelineSetup& setup = c.parallel->setup;
  if (top.has("simulation") && top.raw("simulation").is_object() && top.raw("simulation").contains("mode"))
    setup.mode = c.simulation.mode;  // a pipeline's default is full, where DDP's is fast
  if (setup.mode == "full" && c.training.world_size > pipeline::MAX_PIPELINE_GPUS)
    throw InputError(origin + ": training.world_size is " + std::to_string(c.training.world_size) +
                     ", and a pipeline job in simulation.mode \"full\" simulates at most " +
                     std::to_string(pipeline::MAX_PIPELINE_GPUS) +
                     " GPUs (SimGrid's routing table grows with the square of their three endpoints each); "
                     "\"fast\" takes every world size where it gives full mode's steps (docs/pipelines.md)");
  if (c.parallel->abstract_mode && top.has("policies"))
    throw InputError((policies_origin.empty() ? origin + ": policies" : policies_origin) +
                     ": parallel.abstract runs its unit times as one column, with no policy; policies need "
                     "model mode (a parallel section without abstract)");
  if (!c.parallel->abstract_mode) {  // the platform's links
    c.parallel->setup.channels.bytes_per_s = c.platform.link_GBps * 1e9;
    c.parallel->setup.channels.latency_s = c.platform.latency_us * 1e-6;
    c.parallel->setup.channels.fabric = pipeline_fabric(c.platform, c.training.world_size, origin);
    if (c.simulation.algorithm == "tree")
      throw InputError(origin +
                       ": simulation.algorithm \"tree\": a pipeline's syncs over a stage's peers are ring "
                       "or hierarchical collectives");
    c.parallel->setup.algorithm = c.simulation.algorithm;
    try {
      pipeline::stage_plans(c.parallel->setup);  // a hierarchical sync's nodes
    } catch (const InputError& e) {
      throw InputError(origin + ": " + e.what());
    }
  }
  if (setup.mode == "fast" && c.training.world_size > pipeline::MAX_PIPELINE_GPUS && !pipeline::syncs_zoned(setup))
    throw InputError(
        origin + ": training.world_size is " + std::to_string(c.training.world_size) + ": above " +
        std::to_string(pipeline::MAX_PIPELINE_GPUS) + " GPUs fast mode keeps its syncs' routes per leaf switch, and " +
        (c.parallel->abstract_mode ? std::string("an abstract job's GPUs share one node (give the job a model and "
                                                 "platform.topology \"cluster\")")
                                   : std::string("this platform has one (use platform.topology \"cluster\" with "
                                                 "platform.nodes_per_leaf below its node count)")));
  if (setup.mode == "fast")
    if (const std::string why = pipeline::fast_mode_obstacle(setup); !why.empty())
      throw InputError(origin + ": simulation.mode \"fast\" would not give this job full mode's steps: " + why +
                       "; use \"full\"");
}

}  // namespace ddpsim::config_detail
