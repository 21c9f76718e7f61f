#include "eval/sharding.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <regex>

#include "common/error.hpp"
#include "common/split.hpp"
#include "engine/platform.hpp"
#include "sched/scheduler.hpp"

namespace ddpsim {

namespace {

// The module tree the layout's dotted names give, each node with what its subtree holds.
struct ModuleNode {
  std::vector<std::pair<std::string, std::size_t>> children;  // name, node index; in layout order
  double params = 0, share = 0;                               // the subtree's
};

std::vector<ModuleNode> module_tree(const PerfModel& model) {
  std::vector<ModuleNode> nodes(1);
  for (const LayerSpec& layer : model.layers) {
    std::size_t at = 0;
    nodes[0].params += double(layer.params), nodes[0].share += layer.bwd_fraction;
    for (std::size_t from = 0; from <= layer.name.size();) {
      const std::size_t dot = std::min(layer.name.find('.', from), layer.name.size());
      const std::string part = layer.name.substr(from, dot - from);
      from = dot + 1;
      auto& kids = nodes[at].children;
      const auto it = std::find_if(kids.begin(), kids.end(), [&](const auto& kid) { return kid.first == part; });
      const std::size_t next = it != kids.end() ? it->second : nodes.size();
      if (it == kids.end()) {
        kids.emplace_back(part, next);
        nodes.emplace_back();
      }
      at = next;
      nodes[at].params += double(layer.params), nodes[at].share += layer.bwd_fraction;
    }
  }
  return nodes;
}

// PyTorch's size_based_auto_wrap_policy through _recursive_wrap: a module of at least `min`
// parameters is searched, its children first; it becomes a unit if what its wrapped children
// leave is still at least `min` — but not the root (it keeps the rest), a module list (a node
// whose children are all numbered: the policy excludes nn.ModuleList) nor a parameter (a leaf
// named weight or bias: its module is the one wrapped). Units come parent first, as forward
// gathers them. Returns the subtree's wrapped parameters and share.
std::pair<double, double> wrap_by_size(const std::vector<ModuleNode>& nodes, std::size_t at, const std::string& name,
                                       bool root, double min, double bytes_per_param, std::vector<ShardUnit>& units) {
  const ModuleNode& n = nodes[at];
  if (n.params < min || name == "weight" || name == "bias") return {0, 0};
  const std::size_t place = units.size();
  double params = 0, share = 0;
  for (const auto& [child, kid] : n.children) {
    const auto [p, s] = wrap_by_size(nodes, kid, child, false, min, bytes_per_param, units);
    params += p, share += s;
  }
  const bool list = !n.children.empty() && std::all_of(n.children.begin(), n.children.end(), [](const auto& kid) {
    return !kid.first.empty() && kid.first.find_first_not_of("0123456789") == std::string::npos;
  });
  if (root || list || n.params - params < min) return {params, share};
  units.insert(units.begin() + static_cast<std::ptrdiff_t>(place),
               ShardUnit{(n.params - params) * bytes_per_param, n.share - share, false});
  return {n.params, n.share};
}

}  // namespace

std::vector<ShardUnit> shard_units(const PerfModel& model, const std::string& wrap, double min_num_params) {
  static const std::regex block(R"((?:^|\.)(?:layers|layer|h|blocks)\.(\d+)\.)");
  std::vector<ShardUnit> units(1);
  units[0].root = true;
  if (wrap == "size") {
    const std::vector<ModuleNode> nodes = module_tree(model);
    const auto [params, share] = wrap_by_size(nodes, 0, "", true, min_num_params, model.bytes_per_param, units);
    units[0].bytes = (nodes[0].params - params) * model.bytes_per_param;
    units[0].share = nodes[0].share - share;
    return units;
  }
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

std::vector<double> zero_shares(const PerfModel& model, int G, const std::string& partition) {
  const auto ranks = static_cast<std::size_t>(G);
  const double total = double(model.total_params());
  if (partition == "even" || !(total > 0)) return std::vector<double>(ranks, 1.0 / G);
  std::vector<long long> sizes;
  for (const LayerSpec& layer : model.layers) sizes.push_back(layer.params);
  std::stable_sort(sizes.begin(), sizes.end(), std::greater<>());
  std::vector<double> held(ranks, 0.0);
  for (const long long size : sizes) *std::min_element(held.begin(), held.end()) += double(size);
  for (double& h : held) h /= total;
  return held;
}

void resolve_shard_group(Config& c, const std::string& origin) {
  TrainingConfig& t = c.training;
  if (t.data_parallel != "hybrid") {  // zero1, zero2 and fsdp shard over every rank
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

bool accumulates(const Config& c) {
  return c.training.micro_batches > 1 || std::any_of(c.policies.begin(), c.policies.end(), [&](const PolicySpec& spec) {
           try {
             return make_scheduler(spec, c.shape())->forms_micro_batches();
           } catch (const InputError&) {  // left to parse_config, which names the policy's place
             return false;
           }
         });
}

double sharded_memory_offset_mib(const Config& config) {
  constexpr double MiB = 1024.0 * 1024.0;
  const PerfModel& m = *config.model;
  const double state = double(m.total_params()) * 16 / MiB, S = config.training.shard_group;
  if (S <= 1) return 0;  // one rank a group shards and gathers nothing: DDP's memory, the model's own
  const std::string& dp = config.training.data_parallel;
  if (dp == "zero1" || dp == "zero2") {  // weights (zero1: and gradients) whole, at the gradient dtype's size
    const std::vector<double> shares = zero_shares(m, config.training.world_size, config.training.zero_partition);
    const double whole = double(m.total_params()) * m.bytes_per_param / MiB * (dp == "zero1" ? 2 : 1),
                 held = whole + (state - whole) * *std::max_element(shares.begin(), shares.end());
    return std::max(held - m.mem_m0_mib, held - state);
  }
  // The root unit stays gathered from its forward through its backward (FSDP frees the root's
  // parameters after neither), beside the unit computing and those gathered ahead of it: in
  // forward, forward_prefetch of them; in backward, backward_prefetch_depth.
  double root = 0;
  std::vector<double> bytes;  // the other units
  for (const ShardUnit& u : shard_units(m, config.training.wrap, config.training.min_num_params))
    if (u.root)
      root += u.bytes;
    else
      bytes.push_back(u.bytes);
  std::sort(bytes.rbegin(), bytes.rend());
  const auto held =
      config.training.reshard_after_forward
          ? std::min(bytes.size(), static_cast<std::size_t>(std::max(config.training.forward_prefetch,
                                                                     config.training.backward_prefetch_depth)) +
                                       1)
          : bytes.size();
  const double gathered =
      (root + std::accumulate(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(held), 0.0)) / MiB;
  // no_sync keeps a micro-batch's gradients unsharded (at the gradient dtype's size) until the last.
  const double unsharded = config.training.no_sync && accumulates(config)
                               ? double(m.total_params()) * m.bytes_per_param / MiB * (1 - 1 / S)
                               : 0;
  // A calibrated model's m0 may hold less than the whole state (it measured what it measured):
  // never below the sharded state itself.
  return std::max(state / S - m.mem_m0_mib, state / S - state) + gathered + unsharded;
}

void check_sharded(const Config& c, const std::string& origin) {
  const std::string why = origin + ": training.data_parallel \"" + c.training.data_parallel + "\" ";
  if (c.parallel)
    throw InputError(why +
                     "shards a data-parallel step; a pipeline job's parallel section has its own "
                     "data_parallel (ddp, zero2): leave one of them out");
  if (c.training.fully_sharded() && c.training.wrap == "layer" && shard_units(*c.model).size() < 2)
    throw InputError(origin + ": training.wrap \"layer\" wraps each transformer block, and model " + c.model->name +
                     "'s layout names none (no parameter named layers.N., layer.N., h.N. or blocks.N.): wrap "
                     "\"root\" shards it as one unit");
  if (c.simulation.algorithm != "ring" && c.training.shards_gradients())
    throw InputError(why + "gathers and reduce-scatters in rings over the ranks; simulation.algorithm \"" +
                     c.simulation.algorithm + "\" is DDP's allreduce (leave it out)");
}

void check_equal_micro_batches(const Config& c, const PolicyRun& run) {
  if (!c.training.shards_gradients() || run.G <= 0) return;
  const auto count = [](const RankStep& r) { return std::max<std::size_t>(r.micro.size(), 1); };
  for (std::size_t first = 0; first + static_cast<std::size_t>(run.G) <= run.rows.size(); first += run.G)
    for (std::size_t i = first + 1; i < first + static_cast<std::size_t>(run.G); ++i) {
      const RankStep &a = run.rows[first], &b = run.rows[i];
      if (count(a) == count(b)) continue;
      throw InputError(
          "policy " + run.label + ", step " + std::to_string(a.step) + ": rank " + std::to_string(a.rank) + " runs " +
          std::to_string(count(a)) + (count(a) == 1 ? " micro-batch" : " micro-batches") + " and rank " +
          std::to_string(b.rank) + " runs " + std::to_string(count(b)) +
          " (a batch of b samples makes at most b): under training.data_parallel \"" + c.training.data_parallel +
          "\" every rank runs as many, each micro-batch " +
          (c.training.data_parallel == "zero2" ? "reduce-scattering its buckets" : "gathering every unit") +
          " with all the ranks (give "
          "training.micro_batches no more than the smallest batch a rank gets, or a policy that keeps "
          "each rank's batch at least that large)");
    }
}

void interference_notes(Config& c) {
  const int S = c.training.shard_group;  // resolved: a group of every rank has no replicas
  if (c.training.data_parallel != "hybrid" || S == c.training.world_size) return;
  std::vector<std::string> factors;
  if (c.model->comm_slowdown != 1) factors.push_back("comm_slowdown");
  if (c.model->allreduce_slowdown != 1) factors.push_back("allreduce_slowdown");
  if (factors.empty()) return;
  const std::string named = "model " + c.model->name + "'s " + and_list(factors);
  if (S == 1)
    c.notes.push_back(named + (factors.size() == 2 ? " have" : " has") +
                      " no effect under training.shard_group 1: a group of one rank gathers and reduce-scatters "
                      "nothing, and the allreduce across groups is neither slowed by compute nor slows it");
  else
    c.notes.push_back(named + (factors.size() == 2 ? " act" : " acts") +
                      " between compute and its shard group's all-gathers and reduce-scatters, not the allreduce "
                      "across groups");
}

void unused_sharding_notes(Config& c) {
  const TrainingConfig& t = c.training;
  const TrainingConfig defaults;
  std::vector<std::string> backward;  // backward's prefetch keys given other than their defaults
  if (t.backward_prefetch != defaults.backward_prefetch) backward.push_back("backward_prefetch");
  if (t.backward_prefetch_depth != defaults.backward_prefetch_depth) backward.push_back("backward_prefetch_depth");
  std::vector<std::string> any = backward;  // and forward's
  if (t.forward_prefetch != defaults.forward_prefetch) any.insert(any.begin(), "forward_prefetch");
  if (!t.reshard_after_forward) any.insert(any.begin(), "reshard_after_forward");
  const auto named = [](std::vector<std::string> keys) {
    for (std::string& key : keys) key.insert(0, "training.");
    return and_list(keys) + (keys.size() == 1 ? " has" : " have");
  };
  std::size_t blocks = 0;  // units besides the root
  for (const ShardUnit& u : shard_units(*c.model, t.wrap, t.min_num_params)) blocks += !u.root;
  if (!any.empty() && blocks == 0)
    c.notes.push_back(named(any) + " no effect: the model is one unit (training.wrap), gathered once and kept " +
                      "through backward");
  else if (!backward.empty() && !t.reshard_after_forward)
    c.notes.push_back(named(backward) + " no effect: with training.reshard_after_forward false every unit stays " +
                      "gathered from its forward to its backward, so backward re-gathers nothing");
  else if (!backward.empty() && blocks == 1)
    c.notes.push_back(named(backward) + " no effect: with one unit besides the root (training.wrap), backward " +
                      "re-gathers that unit alone, as it begins");
  if (t.no_sync && !accumulates(c))
    c.notes.push_back(
        "training.no_sync has no effect: a step of one micro-batch (training.micro_batches 1) "
        "accumulates no gradients");
}

}  // namespace ddpsim
