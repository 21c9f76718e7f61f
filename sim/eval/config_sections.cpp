// The config's data, training, policies and simulation sections, each read and checked
// against its own ranges; parse_config joins them and checks what spans sections.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "engine/collective.hpp"
#include "eval/config_sections.hpp"
#include "report/outputs.hpp"

namespace ddpsim::config_detail {

namespace fs = std::filesystem;

std::string resolve(const std::string& path, const std::string& base_dir) {
  if (path.empty() || fs::path(path).is_absolute() || base_dir.empty()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

DataConfig parse_data(const nlohmann::json& doc, const std::string& where, const std::string& base_dir) {
  JsonFields f(doc, where);
  DataConfig d;
  d.source = f.get<std::string>("source", d.source);
  if (d.source == "histogram" || d.source == "trace" || d.source == "tsv") {
    d.path = resolve(f.require<std::string>("path"), base_dir);
    if (d.path.empty()) throw InputError(where + ": path is empty (expected the " + d.source + " file)");
  }
  if (d.source == "tsv") d.vocab = resolve(f.require<std::string>("vocab"), base_dir);
  if (d.source == "tsv" && d.vocab.empty()) throw InputError(where + ": vocab is empty (expected a vocab.txt)");
  if (d.source == "lognormal") {
    d.mean = f.get<double>("mean", d.mean);
    d.std = f.get<double>("std", d.std);
    d.min = f.get_in<int>("min", d.min, 1, 1000000);
    d.max = f.get_in<int>("max", d.max, 1, 1000000);
    if (!(d.mean > 0 && d.mean <= 1e6))
      throw InputError(where + ": mean must be > 0 and at most 1e6 tokens, got " + nlohmann::json(d.mean).dump());
    if (!(d.std >= 0 && d.std <= 1e6))
      throw InputError(where + ": std must be from 0 to 1e6 tokens, got " + nlohmann::json(d.std).dump());
    if (d.min > d.max)
      throw InputError(where + ": min (" + std::to_string(d.min) + ") is more than max (" + std::to_string(d.max) +
                       ")");
    if (d.mean < d.min || d.mean > d.max)  // the clip would pile most samples onto one length
      throw InputError(where + ": mean " + format("%g", d.mean) + " is outside min " + std::to_string(d.min) +
                       " to max " + std::to_string(d.max) + ": most samples would be clipped to one length");
    d.samples = f.get<std::int64_t>("samples", d.samples);
    if (d.samples < 1 || d.samples > MAX_DATASET_SAMPLES)
      throw InputError(where + ": samples must be from 1 to " + std::to_string(MAX_DATASET_SAMPLES) + ", got " +
                       std::to_string(d.samples));
  }
  if (d.source != "sst2" && d.source != "histogram" && d.source != "trace" && d.source != "tsv" &&
      d.source != "lognormal")
    throw InputError(where + ": unknown source \"" + d.source + "\" (known: sst2, histogram, trace, tsv, lognormal)");
  f.reject_unknown();
  return d;
}

namespace {

// A pipeline job's data parallelism is its parallel section's (ddp, zero2): none of FSDP's keys
// has anything to act on there. A printed config names their defaults, which are no request.
void refuse_in_pipeline(const JsonFields& f, const std::string& where) {
  if (f.has("data_parallel") && f.raw("data_parallel") != "ddp") return;  // check_sharded: "leave one out"
  const TrainingConfig d;
  const std::pair<const char*, nlohmann::json> defaults[] = {{"shard_group", nullptr},
                                                             {"wrap", d.wrap},
                                                             {"min_num_params", d.min_num_params},
                                                             {"reshard_after_forward", d.reshard_after_forward},
                                                             {"forward_prefetch", d.forward_prefetch},
                                                             {"backward_prefetch", d.backward_prefetch},
                                                             {"backward_prefetch_depth", d.backward_prefetch_depth},
                                                             {"no_sync", d.no_sync}};
  for (const auto& [key, value] : defaults)
    if (f.has(key) && f.raw(key) != value)
      throw InputError(where + ": " + key +
                       " is sharded data parallelism's (data_parallel \"fsdp\" or \"hybrid\"); a pipeline job's "
                       "data parallelism is its parallel section's data_parallel (ddp or zero2), which takes none "
                       "of FSDP's keys (leave it out)");
}

// training's sharding kind, ZeRO's partition and HSDP's groups (docs/sharding.md).
void parse_sharding_kind(const JsonFields& f, const std::string& where, TrainingConfig& t, bool pipeline) {
  t.data_parallel = f.get<std::string>("data_parallel", t.data_parallel);
  if (t.data_parallel != "ddp" && t.data_parallel != "zero1" && t.data_parallel != "zero2" &&
      t.data_parallel != "fsdp" && t.data_parallel != "hybrid")
    throw InputError(where +
                     ": data_parallel is \"ddp\" (bucketed allreduce), \"zero1\" (that allreduce, optimizer "
                     "state sharded), \"zero2\" (buckets reduce-scattered, optimizer state sharded), \"fsdp\" (full "
                     "sharding: a gather per unit and a reduce-scatter) "
                     "or \"hybrid\" (full sharding inside groups of shard_group ranks, replicated across them), "
                     "got \"" +
                     t.data_parallel + "\"");
  t.zero_partition = f.get<std::string>("zero_partition", t.zero_partition);
  if (t.zero_partition != "even" && t.zero_partition != "parameters")
    throw InputError(where +
                     ": zero_partition is \"even\" (a G-th of the optimizer state each, DeepSpeed's flat partition) "
                     "or \"parameters\" (whole parameters, largest first, each to the rank holding fewest: "
                     "PyTorch's ZeroRedundancyOptimizer), got \"" +
                     t.zero_partition + "\"");
  // ZeroRedundancyOptimizer is ZeRO-1; the ZeRO-2s that exist (DeepSpeed's, FSDP's
  // SHARD_GRAD_OP) partition flat, as the even reduce-scatter assumes.
  if (t.zero_partition != "even" && t.data_parallel != "zero1")
    throw InputError(where + ": zero_partition shards data_parallel \"zero1\"'s optimizer state as PyTorch's " +
                     "ZeroRedundancyOptimizer does; " +
                     (pipeline                      ? std::string("a pipeline's zero2 shards it evenly")
                      : t.data_parallel == "zero2" ? std::string("zero2 reduce-scatters even shards")
                                                   : "data_parallel \"" + t.data_parallel + "\" " +
                                                         (t.fully_sharded() ? "shards whole units" : "shards nothing")) +
                     " (leave it out)");
  t.shard_group = f.get_in<int>("shard_group", t.shard_group, 1, 65536);
  if (f.has("shard_group") && t.data_parallel != "hybrid")
    throw InputError(where + ": shard_group sizes data_parallel \"hybrid\"'s groups; data_parallel \"" +
                     t.data_parallel + "\" " +
                     (t.data_parallel == "ddp" ? "shards nothing" : "shards over all the ranks") +
                     " (leave it out, or set data_parallel \"hybrid\")");
}

// FSDP's options (fsdp and hybrid), each refused under the other kinds where it asks for
// anything but its default.
void parse_fsdp_options(const JsonFields& f, const std::string& where, TrainingConfig& t) {
  const TrainingConfig defaults;
  t.reshard_after_forward = f.get<bool>("reshard_after_forward", t.reshard_after_forward);
  t.no_sync = f.get<bool>("no_sync", t.no_sync);
  t.backward_prefetch = f.get<std::string>("backward_prefetch", t.backward_prefetch);
  if (t.backward_prefetch != "backward_pre" && t.backward_prefetch != "backward_post" && t.backward_prefetch != "none")
    throw InputError(where +
                     ": backward_prefetch is FSDP's BackwardPrefetch: \"backward_pre\" (a unit's re-gather issued as "
                     "the unit after it begins backward), \"backward_post\" (as that unit ends) or \"none\" (once "
                     "it is reduce-scattered), got \"" +
                     t.backward_prefetch + "\"");
  // A prefetch depth: a whole number of units from 1 to 64; `is` says what it counts.
  const auto depth = [&](const char* key, int value, const char* is) {
    if (f.has(key) && !f.raw(key).is_number_integer())
      throw InputError(where + ": " + key + is + ", got " + f.raw(key).dump() + integer_spelling(f.raw(key)));
    return f.get_in<int>(key, value, 1, 64);
  };
  t.forward_prefetch = depth("forward_prefetch", t.forward_prefetch,
                             " is how many units forward gathers ahead of the one computing, a whole number from 1 "
                             "(FSDP's implicit prefetch; FSDP1's forward_prefetch=True changes only the CPU's issue "
                             "order) to 64 (FSDP2's set_modules_to_forward_prefetch)");
  t.backward_prefetch_depth = depth("backward_prefetch_depth", t.backward_prefetch_depth,
                                    " is how many units backward re-gathers ahead of the one computing, a whole number "
                                    "from 1 (FSDP's backward_pre) to 64 (FSDP2's set_modules_to_backward_prefetch)");
  if (t.backward_prefetch_depth > 1 && t.backward_prefetch != "backward_pre")
    throw InputError(where + ": backward_prefetch_depth deepens backward_prefetch \"backward_pre\"'s re-gathers; " +
                     "backward_prefetch is \"" + t.backward_prefetch + "\" (leave the depth out)");
  t.wrap = f.get<std::string>("wrap", t.wrap);
  if (t.wrap != "layer" && t.wrap != "root" && t.wrap != "size")
    throw InputError(where +
                     ": wrap is \"layer\" (a unit per transformer block), \"root\" (the whole model one unit) or "
                     "\"size\" (PyTorch's size_based_auto_wrap_policy with min_num_params), got \"" +
                     t.wrap + "\"");
  t.min_num_params = f.get<double>("min_num_params", t.min_num_params);
  if (!(t.min_num_params >= 1 && t.min_num_params <= 1e15 && std::floor(t.min_num_params) == t.min_num_params))
    throw InputError(where + ": min_num_params is a whole parameter count from 1 to 1e15, got " +
                     format("%.17g", t.min_num_params));
  if (t.min_num_params != defaults.min_num_params && t.wrap != "size")
    throw InputError(where + ": min_num_params sizes wrap \"size\"'s units; wrap is \"" + t.wrap +
                     "\" (leave it out, or set wrap \"size\")");
  // Under the other kinds, only a value other than the default is a request (a sweep may set
  // the default across kinds).
  const auto fsdp_only = [&](bool asked, const std::string& what, const char* instead) {
    if (asked && !t.fully_sharded())
      throw InputError(where + ": " + what + " (data_parallel \"fsdp\" or \"hybrid\"); data_parallel \"" +
                       t.data_parallel + "\" " + instead + " (leave it out)");
  };
  fsdp_only(t.wrap != defaults.wrap, "wrap sets FSDP's units", "has none");
  fsdp_only(t.backward_prefetch != defaults.backward_prefetch, "backward_prefetch sets FSDP's re-gathers", "has none");
  fsdp_only(t.forward_prefetch != defaults.forward_prefetch, "forward_prefetch sets FSDP's gathers ahead", "has none");
  fsdp_only(t.backward_prefetch_depth != defaults.backward_prefetch_depth,
            "backward_prefetch_depth sets FSDP's re-gathers ahead", "has none");
  fsdp_only(!t.reshard_after_forward, "reshard_after_forward false is FSDP's", "holds every parameter throughout");
  fsdp_only(t.no_sync, "no_sync picks FSDP's gradient accumulation",
            t.data_parallel == "ddp" || t.data_parallel == "zero1"
                ? "accumulates under DDP's no_sync always"
                : "reduce-scatters every micro-batch's gradients (DeepSpeed refuses no_sync with "
                  "partitioned gradients)");
}

}  // namespace

TrainingConfig parse_training(const nlohmann::json& doc, const std::string& where, bool pipeline) {
  JsonFields f(doc, where);
  TrainingConfig t;
  t.world_size = f.get_in<int>("world_size", t.world_size, 1, 65536);
  t.global_batch = f.get_in<int>("global_batch", t.global_batch, 1, 10000000);
  t.steps = f.get_in<int>("steps", t.steps, 1, std::numeric_limits<int>::max());
  t.max_length = f.get_in<int>("max_length", t.max_length, 2, 1000000);
  t.seed = f.get<std::uint64_t>("seed", t.seed);
  t.bucket_mb = f.get<double>("bucket_mb", t.bucket_mb);
  t.first_bucket_mb = f.get<double>("first_bucket_mb", t.first_bucket_mb);
  t.overlap = f.get<bool>("overlap", t.overlap);
  t.micro_batches = f.get_in<int>("micro_batches", t.micro_batches, 1, 10000);
  t.attention = f.get<std::string>("attention", t.attention);
  if (pipeline) refuse_in_pipeline(f, where);
  parse_sharding_kind(f, where, t, pipeline);
  parse_fsdp_options(f, where, t);
  t.grad_dtype = f.get<std::string>("grad_dtype", t.grad_dtype);
  if (t.grad_dtype != "model" && t.grad_dtype != "fp32" && t.grad_dtype != "bf16" && t.grad_dtype != "fp16")
    throw InputError(where + ": grad_dtype is \"model\" (the model's gradient_bytes_per_param), \"fp32\", \"bf16\" " +
                     "or \"fp16\" (the gradients' dtype in the buckets and the allreduce), got \"" + t.grad_dtype +
                     "\"");
  t.pad_to_multiple_of = f.get_in<int>("pad_to_multiple_of", t.pad_to_multiple_of, 1, t.max_length);
  if (t.pad_to_multiple_of > 1 && t.attention == "packed")
    throw InputError(where + ": pad_to_multiple_of " + std::to_string(t.pad_to_multiple_of) +
                     " pads batches, and attention \"packed\" has none to pad: leave one of them out");
  if (t.attention != "padded" && t.attention != "packed")
    throw InputError(where +
                     ": attention is \"padded\" (every sample padded to its micro-batch's longest) or "
                     "\"packed\" (sequences packed without padding, varlen attention), got \"" +
                     t.attention + "\"");
  for (const auto& [key, mb] : {std::pair{"bucket_mb", t.bucket_mb}, std::pair{"first_bucket_mb", t.first_bucket_mb}})
    if (!(mb > 0 && mb <= 1e6))
      throw InputError(where + ": " + key + " must be > 0 and ≤ 1000000 (MB), got " + nlohmann::json(mb).dump());
  if (f.has("b_max")) {
    const auto& b = f.raw("b_max");
    if (b.is_string()) {
      if (b.get<std::string>() != "model")
        throw InputError(where + ": b_max is an integer, a list of integers, or \"model\" (from the memory model)");
      t.b_max_from_model = true;
    } else if (b.is_number()) {
      const int cap = f.get_in<int>("b_max", 0, 0, std::numeric_limits<int>::max());  // 0: no cap
      if (cap > 0) t.b_max.assign(static_cast<std::size_t>(std::max(t.world_size, 0)), cap);
    } else {
      t.b_max = f.get<std::vector<int>>("b_max", {});
    }
  }
  f.reject_unknown();
  for (int cap : t.b_max)
    if (cap < 1) throw InputError(where + ": b_max must be ≥ 1 for every rank, got " + std::to_string(cap));
  return t;
}

PolicySpec parse_policy(const nlohmann::json& item, const std::string& where) {
  if (item.is_string()) try {
      return parse_policy_spec(item.get<std::string>());
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
  if (!item.is_object()) throw InputError(where + ": a policy is a string like \"minmax:cost=tokens\" or an object");
  PolicySpec spec;
  for (const auto& [key, value] : item.items()) {
    // JSON's true and false are the on and off of a switch option ("balance": false).
    const std::string text = value.is_string()    ? value.get<std::string>()
                             : value.is_boolean() ? (value.get<bool>() ? "on" : "off")
                                                  : value.dump();
    if (key == "name") {
      spec.name = text;
    } else {
      spec.options[key] = text;
      if (value.is_string()) spec.quoted.insert(key);
    }
  }
  if (spec.name.empty()) throw InputError(where + ": policy object needs a \"name\"");
  return spec;
}

SimulationConfig parse_simulation(const nlohmann::json& doc, const std::string& where, int G) {
  JsonFields f(doc, where);
  SimulationConfig s;
  s.mode = f.get<std::string>("mode", s.mode);
  if (s.mode != "fast" && s.mode != "full")
    throw InputError(where + ": mode is \"fast\" or \"full\", got \"" + s.mode + "\"");
  s.algorithm = f.get<std::string>("algorithm", s.algorithm);
  if (std::find(allreduce_algorithms().begin(), allreduce_algorithms().end(), s.algorithm) ==
      allreduce_algorithms().end())
    throw InputError(where + ": unknown algorithm \"" + s.algorithm + "\" (known: ring, tree, hierarchical)");
  if (f.has("sched_ms")) {
    const auto& v = f.raw("sched_ms");
    if (v.is_string() && v.get<std::string>() == "measured")
      s.sched_measured = true;
    else if (v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1e6)
      s.sched_ms = v.get<double>();
    else
      throw InputError(where + ": sched_ms is a number of ms from 0 to 1e6 or \"measured\", got " + v.dump());
  }
  for (auto [key, sigma] : {std::pair{"noise_sigma", &s.noise_sigma}, {"noise_shared_sigma", &s.noise_shared_sigma}})
    if (f.has(key)) {
      *sigma = f.get<double>(key, *sigma);
      if (*sigma < 0 || *sigma > 3)
        throw InputError(where + ": " + key + " is a log-normal σ in [0, 3] (leave it out for the model's), got " +
                         nlohmann::json(*sigma).dump());
    }
  if (f.has("unit_jitter")) {
    s.unit_jitter = f.get<double>("unit_jitter", s.unit_jitter);
    if (!(s.unit_jitter >= 0 && s.unit_jitter <= 3))
      throw InputError(where + ": unit_jitter is a log-normal σ in [0, 3] of each FSDP unit's share of a " +
                       "rank's compute, got " + nlohmann::json(s.unit_jitter).dump());
  }
  s.spells = f.get<std::string>("spells", s.spells);
  if (s.spells != "own" && s.spells != "shared" && s.spells != "off")
    throw InputError(where +
                     ": spells is \"own\" (the model's slow spells drawn for each rank-step), \"shared\" "
                     "(once per step for all ranks) or \"off\", got \"" +
                     s.spells + "\"");
  s.first_use = f.get<std::string>("first_use", s.first_use);
  if (s.first_use != "own" && s.first_use != "shared" && s.first_use != "off")
    throw InputError(where +
                     ": first_use is \"own\" (the model's first-use cost of a shape, once per rank), "
                     "\"shared\" (once for all ranks: one process, as ddptrain --emulate-ranks) or \"off\", got \"" +
                     s.first_use + "\"");
  s.rank_speed = f.get<std::vector<double>>("rank_speed", {});
  if (!s.rank_speed.empty() && static_cast<int>(s.rank_speed.size()) != G)
    throw InputError(where + ": rank_speed lists " + std::to_string(s.rank_speed.size()) + " ranks, world_size is " +
                     std::to_string(G));
  for (std::size_t g = 0; g < s.rank_speed.size(); ++g)
    if (!(s.rank_speed[g] >= 1e-6 && s.rank_speed[g] <= 1e6))
      throw InputError(where + ": rank_speed[" + std::to_string(g) + "] must be in [1e-6, 1e6], got " +
                       nlohmann::json(s.rank_speed[g]).dump());
  if (f.has("stragglers")) {
    const auto& list = f.raw("stragglers");
    if (!list.is_array()) throw InputError(where + ": stragglers is an array of {rank, factor, from_step, to_step}");
    for (std::size_t i = 0; i < list.size(); ++i) {
      JsonFields item(list[i], where + ": stragglers[" + std::to_string(i) + "]");
      Straggler st;
      for (const char* key : {"rank", "factor", "from_step", "to_step"}) item.has(key);
      item.reject_unknown();  // a misspelt key is named before a missing one is
      st.rank = item.require<int>("rank");
      st.factor = item.require<double>("factor");
      st.from_step = item.get_in<int>("from_step", 0, 0, std::numeric_limits<int>::max());
      st.to_step = item.get<int>("to_step", -1);
      item.reject_unknown();
      if (st.rank < 0 || st.rank >= G)
        throw InputError(item.where() + ": rank " + std::to_string(st.rank) + " is outside 0.." +
                         std::to_string(G - 1));
      if (!(st.factor >= 1e-6 && st.factor <= 1e6))
        throw InputError(item.where() + ": factor must be in [1e-6, 1e6], got " + nlohmann::json(st.factor).dump());
      if (st.to_step != -1 && st.to_step <= st.from_step)
        throw InputError(item.where() + ": to_step (" + std::to_string(st.to_step) + ") must be after from_step (" +
                         std::to_string(st.from_step) + "); -1 or none for \"to the end\"");
      s.stragglers.push_back(st);
    }
  }
  f.reject_unknown();
  return s;
}

// The config's platform with the model's calibrated network beneath it: each key the config
// does not set comes from the model, so the loop profile -> calibrate -> replay simulates the
// network it measured; a config naming another topology keeps its own figures, since the
// model's describe a different network. Says in c.platform_source which figures came from where.
nlohmann::json platform_with_model(nlohmann::json platform, const PerfModel& model, Config& c,
                                   const std::string& origin) {
  if (model.platform.empty() || !platform.is_object()) return platform;  // the parser names a non-object
  // The model's own figures are checked as the model's, before they can be blamed on the config.
  (void)parse_platform(model.platform, model.origin + ": platform", c.training.world_size, "");
  const auto& theirs = model.platform;
  if (platform.contains("topology") && theirs.contains("topology") && platform["topology"] != theirs["topology"]) {
    c.platform_source = "the config's (" + origin + "); " + model.name + "'s calibrated network is " +
                        theirs["topology"].dump() + ", not this topology, and is not used";
    return platform;
  }
  const bool config_sets_some = !platform.empty();
  std::string taken;
  bool overridden = false;  // a figure of the model's network that the config sets itself
  for (const auto& [key, value] : theirs.items())
    if (!platform.contains(key)) {
      platform[key] = value;
      taken += (taken.empty() ? "" : ", ") + key;
    } else {
      overridden |= key != "topology";
    }
  c.network_from_model = !taken.empty() && !overridden;
  c.platform_source = taken.empty()
                          ? "the config's, which sets every figure of " + model.name + "'s calibrated network itself"
                          : taken + " from model " + model.name + " (" + model.platform_source + ")" +
                                (config_sets_some ? "; the rest from the config" : "");
  return platform;
}

void check_micro_batch_count(Config& c, const std::string& origin) {
  if (c.parallel || c.training.micro_batches == 1) return;
  std::string takers;
  for (const PolicySpec& p : c.policies)
    if (!forms_own_micro_batches(p.name)) takers += (takers.empty() ? "" : ", ") + p.label();
  const std::string count = "training.micro_batches " + std::to_string(c.training.micro_batches);
  if (takers.empty()) throw InputError(origin + ": " + own_micro_batches_refusal(count));
  if (std::any_of(c.policies.begin(), c.policies.end(),
                  [](const PolicySpec& p) { return forms_own_micro_batches(p.name); }))
    c.notes.push_back(count + " is for " + takers + "; verl forms its own micro-batches from its max_token_len");
}

std::string preset_source(const nlohmann::json& given, const PlatformConfig& platform) {
  if (platform.topology == "xml") return "the platform file " + platform.file + ", which the config names";
  std::string own, preset;
  const nlohmann::json figures = platform.to_json();  // items() of a temporary would dangle
  for (const auto& [key, value] : figures.items()) {
    if (key == "topology") continue;
    std::string& into = given.is_object() && given.contains(key) ? own : preset;
    into += (into.empty() ? "" : ", ") + key;
  }
  if (preset.empty()) return "the config's: every figure given";
  return (own.empty() ? "" : "the config's " + own + "; ") + "the " + platform.topology + " preset's nominal " +
         preset +
         " (an assumption, not a measurement: give measured figures, or calibrate an allreduce profile into the "
         "model)";
}

}  // namespace ddpsim::config_detail
