#include "eval/config.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "engine/collective.hpp"
#include "eval/config_sections.hpp"
#include "eval/pipeline_eval.hpp"
#include "eval/sharding.hpp"
#include "pipeline/fast_pipeline.hpp"
#include "pipeline/sync_plans.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

namespace fs = std::filesystem;

nlohmann::json Config::provenance() const {
  nlohmann::json p = {{"model", model->origin}, {"model_source", model->source}};
  if (!model->step_factors_source.empty()) p["model_noise_from"] = model->step_factors_source;
  if (model->first_use_ms > 0) p["model_first_use_ms"] = model->first_use_ms;
  if (!model->fit_warning.empty()) p["model_fit_warning"] = model->fit_warning;
  p["gradients"] = gradients();
  p["platform"] = platform.to_json();
  p["platform_source"] = platform_source.empty() ? "the config and its --set (or their defaults)" : platform_source;
  if (!notes.empty()) p["notes"] = notes;  // what the run leaves out stays with its figures
  return p;
}

std::string Config::gradients() const {
  const int bytes = model->bytes_per_param;
  std::string dtype = training.grad_dtype;
  if (dtype == "model") dtype = bytes == 4 ? "fp32" : bytes == 2 ? "16-bit" : std::to_string(bytes) + "-byte";
  return dtype + " (" + std::to_string(bytes) + " B a parameter; " +
         (training.grad_dtype == "model" ? "the model's" : "training.grad_dtype") + ")";
}

int Config::fixed_batch_samples() const {
  const bool any_fixed = std::any_of(policies.begin(), policies.end(), [](const PolicySpec& p) {
    return p.name != "token_budget" && !forms_own_micro_batches(p.name);
  });
  if (parallel || !any_fixed) return 0;
  const int G = std::max(1, training.world_size), M = std::max(1, training.micro_batches);
  return ((training.global_batch + G - 1) / G + M - 1) / M;  // the rank's largest micro-batch
}

std::vector<std::string> Config::add_data_notes(const std::vector<int>& dataset) {
  const StepShape s = shape();
  const int longest = dataset.empty() ? 0 : *std::max_element(dataset.begin(), dataset.end());
  std::vector<std::string> added;
  if (std::string beyond = model->extrapolation_note((s.B + s.G - 1) / s.G, std::min(longest, s.max_length), true);
      !beyond.empty())
    added.push_back(std::move(beyond));
  if (std::string untrained = untrained_size_note(); !untrained.empty()) added.push_back(std::move(untrained));
  notes.insert(notes.end(), added.begin(), added.end());
  return added;
}

std::string Config::untrained_size_note() const {
  const int samples = fixed_batch_samples();
  return samples >= 1 ? model->training_samples_note(samples) : "";
}

StepShape Config::shape() const {
  StepShape s;
  s.G = training.world_size;
  s.B = training.global_batch;
  s.max_length = training.max_length;
  s.b_max = training.b_max;
  s.micro_batches = training.micro_batches;
  s.packed = training.attention == "packed";
  s.pad_to_multiple_of = training.pad_to_multiple_of;
  s.seed = training.seed;
  if (parallel && !parallel->abstract_mode) {  // a pipeline's policies split each step over its D groups
    s.G = parallel->setup.groups;
    s.micro_batches = parallel->setup.micro_batches;
    s.micro_batching = parallel->micro_batching;
  }
  if (model) {
    std::shared_ptr<const CostModel> time = std::make_shared<ModelTimeCost>(model);
    if (!simulation.rank_speed.empty())
      time = std::make_shared<RankScaledCost>(std::make_unique<ModelTimeCost>(model), simulation.rank_speed);
    s.time_cost = std::move(time);
  }
  return s;
}

double SimulationConfig::speed_factor(int rank, int step) const {
  double f = rank_speed.empty() ? 1.0 : rank_speed[static_cast<std::size_t>(rank)];
  for (const Straggler& s : stragglers)
    if (s.rank == rank && step >= s.from_step && (s.to_step < 0 || step < s.to_step)) f *= s.factor;
  return f;
}

using namespace config_detail;

namespace {

// The policies compared (static where none is given), each label once: outputs are keyed by it.
void parse_policy_list(const JsonFields& top, Config& c, const std::string& origin,
                       const std::string& policies_origin) {
  if (top.has("policies")) {
    const auto& list = top.raw("policies");
    if (!list.is_array() || list.empty())
      throw InputError(origin + ": policies must be a non-empty array of policy names or objects");
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string at =
          policies_origin.empty() ? origin + ": policies[" + std::to_string(i) + "]" : policies_origin;
      c.policies.push_back(parse_policy(list[i], at));
      for (std::size_t j = 0; j + 1 < c.policies.size(); ++j)
        if (c.policies[j].label() == c.policies.back().label())
          throw InputError(at + ": " + c.policies.back().label() + " is already policies[" + std::to_string(j) +
                           "] (each policy once: outputs are keyed by it)");
    }
  } else {
    c.policies.push_back(parse_policy_spec("static"));
  }
}

// The model, named or a file, with the gradients' dtype the config asks for; its name or path,
// as the resolved config reads it back.
std::string load_model(const JsonFields& top, Config& c, const std::string& origin, const std::string& base_dir) {
  std::string model = top.get<std::string>("model", "rtx3090-distilbert");
  if (!is_builtin_model(model)) model = resolve(model, base_dir);
  try {
    c.model = std::make_shared<const PerfModel>(load_perf_model(model));
  } catch (const InputError& e) {
    throw InputError(origin + ": model: " + e.what());
  }
  if (c.training.grad_dtype != "model") {  // every reader (buckets, allreduce, pipeline state) sees it
    auto m = std::make_shared<PerfModel>(*c.model);
    m->bytes_per_param = c.training.grad_dtype == "fp32" ? 4 : 2;
    c.model = std::move(m);
  }
  if (c.model->position_table > 0 && c.training.max_length > c.model->position_table)
    throw InputError(origin + ": training.max_length " + std::to_string(c.training.max_length) + " is more than the " +
                     std::to_string(c.model->position_table) + " positions of " + c.model->name +
                     "'s learned position table (its hf_config): a longer sample has no position to embed");
  return model;
}

// The simulation section, and a note for each key the model gives nothing to act on.
void parse_simulation_section(const JsonFields& top, Config& c, const std::string& origin) {
  if (top.has("simulation")) {
    c.simulation = parse_simulation(top.raw("simulation"), origin + ": simulation", c.training.world_size);
    const auto& given = top.raw("simulation");
    // A printed config names every default: only a value other than the default is a request.
    if (given.contains("first_use") && c.simulation.first_use != "own" && c.model->first_use_ms <= 0 &&
        !c.model->first_use_unknown())
      c.notes.push_back("simulation.first_use has no effect: model " + c.model->name +
                        " has no first-use cost (first_use_ms; ddpsim calibrate --training measures it)");
    if (c.simulation.unit_jitter > 0 && (top.has("parallel") || !c.training.fully_sharded()))
      throw InputError(origin + ": simulation: unit_jitter spreads a rank's compute unevenly over FSDP's units " +
                       "(training.data_parallel \"fsdp\" or \"hybrid\"); " +
                       (top.has("parallel") ? std::string("a pipeline job's stages have none")
                                            : "data_parallel \"" + c.training.data_parallel + "\" has none") +
                       " (leave it out)");
    if (c.simulation.unit_jitter > 0 && shard_units(*c.model, c.training.wrap, c.training.min_num_params).size() < 2)
      c.notes.push_back("simulation.unit_jitter has no effect: the model is one unit (training.wrap)");
    if (given.contains("spells") && c.simulation.spells != "own" && c.model->spell_quantiles.empty())
      c.notes.push_back("simulation.spells has no effect: model " + c.model->name +
                        " has no slow spells (noise.spells; ddpsim calibrate measures them)");
  }
}

// Each rank's b_max (from the model's memory where asked) and the micro-batches a rank's share
// of the global batch can hold.
void resolve_batch_caps(const JsonFields& top, Config& c, const std::string& origin) {
  const int ranks = c.shape().G;  // those a step's samples are split over: a pipeline's groups
  if (c.training.b_max_from_model) {
    if (c.parallel)
      throw InputError(origin +
                       ": training.b_max \"model\" caps a DDP rank from the whole model's memory; a pipeline "
                       "stage holds part of it (its peak memory is reported per stage): give b_max per group");
    const int cap = c.model->max_batch(c.training.max_length);
    if (cap < 1)
      throw InputError(origin + ": training.b_max=\"model\": not one sample of length " +
                       std::to_string(c.training.max_length) + " fits the " + c.model->name + " memory capacity");
    // Activations live for one micro-batch: M even micro-batches of at most `cap` samples each.
    const long long per_rank = static_cast<long long>(cap) * c.training.micro_batches;
    c.training.b_max.assign(static_cast<std::size_t>(ranks),
                            static_cast<int>(std::min<long long>(per_rank, std::numeric_limits<int>::max())));
  }
  if (c.parallel && !c.training.b_max.empty() && top.raw("training").at("b_max").is_number())
    c.training.b_max.assign(static_cast<std::size_t>(ranks), c.training.b_max.front());  // one cap for every group
  if (!c.training.b_max.empty() && static_cast<int>(c.training.b_max.size()) != ranks)
    throw InputError(origin + ": training.b_max lists " + std::to_string(c.training.b_max.size()) + " ranks, " +
                     (c.parallel
                          ? "the pipeline has " + std::to_string(ranks) + " data-parallel groups (one entry each)"
                          : "world_size is " + std::to_string(ranks)));
  if (c.parallel && !c.parallel->abstract_mode && c.parallel->setup.micro_batches > c.training.global_batch / ranks)
    throw InputError(origin + ": parallel.micro_batches (" + std::to_string(c.parallel->setup.micro_batches) +
                     ") is more than a group's share of the global batch (" + std::to_string(c.training.global_batch) +
                     " over " + std::to_string(ranks) + " groups: " + std::to_string(c.training.global_batch / ranks) +
                     "): every micro-batch needs a sample");
  if (!c.parallel && c.training.global_batch >= ranks && c.training.micro_batches > c.training.global_batch / ranks)
    throw InputError(origin + ": training.micro_batches (" + std::to_string(c.training.micro_batches) +
                     ") is more than a rank's share of the global batch (" + std::to_string(c.training.global_batch) +
                     " over " + std::to_string(ranks) + " ranks: " + std::to_string(c.training.global_batch / ranks) +
                     "): every micro-batch needs a sample");
  check_micro_batch_count(c, origin);
}

// Runs stream their rows (in blocks of about 2^18 rank-steps) and keep a few numbers per step
// for the summary's percentiles. Refuse a run that could not fit rather than fail hours in with
// bad_alloc.
void check_run_size(const Config& c, const std::string& origin) {
  const double step_bytes = 5.0 * sizeof(double);
  constexpr double LIMIT_GIB = 8;
  const double gib = double(c.training.steps) * double(c.policies.size()) * step_bytes / (1024.0 * 1024 * 1024);
  if (gib > LIMIT_GIB)
    throw InputError(origin + ": " + std::to_string(c.training.steps) + " steps × " +
                     std::to_string(c.policies.size()) + " policies would hold " + format("%g", gib) +
                     " GiB of per-step figures (at most " + format("%g", LIMIT_GIB) + "): fewer steps or policies");
  if (c.parallel) {  // a pipeline job holds every step's work and results, per GPU and micro-batch
    const double G = c.training.world_size, M = c.parallel->setup.micro_batches;
    const double pipeline_gib = double(c.training.steps) * G * (3 * sizeof(double) * M + 160) / (1024.0 * 1024 * 1024);
    if (pipeline_gib > LIMIT_GIB)
      throw InputError(origin + ": " + std::to_string(c.training.steps) + " steps × " + format("%g", G) + " GPUs × " +
                       format("%g", M) + " micro-batches would hold " + format("%.3g", pipeline_gib) +
                       " GiB of pipeline work and results (at most " + format("%g", LIMIT_GIB) +
                       "): fewer steps, GPUs or micro-batches");
  }
}

// What a sharded config cannot take, and notes on what it leaves out or unused.
void sharded_checks_and_notes(Config& c, const std::string& origin) {
  if (c.training.sharded()) check_sharded(c, origin);
  if (c.training.data_parallel == "zero2" && c.simulation.mode == "fast" && accumulates(c) &&
      (c.model->comm_slowdown != 1 || c.model->allreduce_slowdown != 1))
    c.notes.push_back("ZeRO-2's fast mode leaves out how model " + c.model->name +
                      "'s comm_slowdown and allreduce_slowdown slow a reduce-scatter that runs on into the next "
                      "micro-batch's backward, and that backward; simulation.mode \"full\" simulates them "
                      "(docs/sharding.md)");
  if (c.training.fully_sharded()) {
    // A printed config names every default: only a value other than DDP's default is a request.
    const TrainingConfig ddp;
    if (!c.training.overlap || c.training.bucket_mb != ddp.bucket_mb ||
        c.training.first_bucket_mb != ddp.first_bucket_mb)
      c.notes.push_back(
          "training.overlap, bucket_mb and first_bucket_mb have no effect under training.data_parallel \"" +
          c.training.data_parallel +
          "\": its units, not DDP's buckets, set the collectives, which always overlap compute");
    interference_notes(c);
    unused_sharding_notes(c);
  }
}

// Every policy against the step's shape, before any work: its options and the B/G/K
// constraints; two spellings of one policy refused.
void check_policies_against_shape(const Config& c, const std::string& origin, const std::string& policies_origin) {
  const StepShape shape = c.shape();
  std::vector<std::string> resolved;                              // labels with every option at its value in force
  const bool abstract = c.parallel && c.parallel->abstract_mode;  // no policy: the work is in time units
  for (std::size_t i = 0; i < (abstract ? 0 : c.policies.size()); ++i) {
    const std::string at = policies_origin.empty() ? origin + ": policies[" + std::to_string(i) + "]" : policies_origin;
    try {
      make_scheduler(c.policies[i], shape);
      resolved.push_back(resolved_policy(c.policies[i], shape).label());
    } catch (const InputError& e) {
      throw InputError(at + ": " + e.what());
    }
    for (std::size_t j = 0; j < i; ++j)
      if (resolved[j] == resolved[i])
        throw InputError(at + ": " + c.policies[i].label() + " is policies[" + std::to_string(j) + "] (" +
                         c.policies[j].label() + ") with its options written out (" + resolved[i] +
                         "): the same policy twice");
  }
}

// A sharded rank's memory: its shard of the state and the units it gathers (a model without
// memory keeps none).
void add_sharded_memory(Config& c) {
  const PerfModel& given = *c.model;
  if (given.mem_m0_mib <= 0 && given.mem_mu_mib <= 0 && given.mem_nu_mib <= 0) return;
  auto m = std::make_shared<PerfModel>(given);
  m->mem_m0_mib += sharded_memory_offset_mib(c);
  c.model = std::move(m);
}

// An xml platform's file against the collectives that will run on it, and gpus_per_node where
// nothing reads it.
void check_xml_platform(const nlohmann::json& doc, const Config& c, const std::string& origin) {
  if (c.platform.topology == "xml" && c.simulation.algorithm != "hierarchical" && doc.contains("platform") &&
      doc["platform"].is_object() && doc["platform"].contains("gpus_per_node"))
    throw InputError(origin +
                     ": platform.gpus_per_node groups an xml platform's ranks into nodes for "
                     "simulation.algorithm \"hierarchical\"; the " +
                     c.simulation.algorithm + " algorithm does not use it (leave it out)");
  if (c.platform.topology == "xml" && !c.parallel)
    check_platform_file(
        c.platform, make_allreduce(c.simulation.algorithm, node_of_ranks(c.platform, c.training.world_size)).pairs());
}

// Packed sequences need a model of Σs and Σs².
void check_packed_form(const Config& c, const std::string& origin) {
  if (c.training.attention == "packed" && (c.model->forward.use_grid() || c.model->backward.use_grid()))
    throw InputError(
        origin + ": training.attention \"packed\" needs the analytic or roofline form (of Σs and Σs²), but model " +
        c.model->origin + " uses a measured grid over (b, L) (calibrate it with --form analytic or roofline)");
}

// Packed rows hold Σs² alone: a window that binds would need each sequence's length.
void check_packed_window(const Config& c, const std::string& origin) {
  if (const AttentionWindow& w = c.model->attention_window;
      c.training.attention == "packed" && w.any() && c.training.max_length > w.tokens)
    throw InputError(origin + ": training.attention \"packed\" with model " + c.model->origin +
                     "'s sliding window of " + std::to_string(w.tokens) +
                     " tokens: packed sequences longer than the window are not modelled " + "(training.max_length is " +
                     std::to_string(c.training.max_length) +
                     "; at most the window packs exactly, or pad the sequences)");
}

}  // namespace

Config parse_config(const nlohmann::json& doc, const std::string& origin, const std::string& base_dir,
                    const std::string& policies_origin) {
  JsonFields top(doc, origin);
  Config c;
  c.origin = origin;
  if (top.has("data")) c.data = parse_data(top.raw("data"), origin + ": data", base_dir);
  if (top.has("training")) c.training = parse_training(top.raw("training"), origin + ": training", top.has("parallel"));
  if (c.data.source == "lognormal" && c.data.min > c.training.max_length)
    throw InputError(origin + ": data: min (" + std::to_string(c.data.min) + ") is more than training.max_length (" +
                     std::to_string(c.training.max_length) + "): every sample would be truncated below it");
  parse_policy_list(top, c, origin, policies_origin);
  const std::string model = load_model(top, c, origin, base_dir);
  c.platform = parse_platform(
      platform_with_model(top.has("platform") ? top.raw("platform") : nlohmann::json::object(), *c.model, c, origin),
      origin + ": platform", c.training.world_size, base_dir);
  if (c.platform_source.empty())
    c.platform_source = preset_source(top.has("platform") ? top.raw("platform") : nlohmann::json::object(), c.platform);
  if (c.training.sharded()) {  // a rank's fixed memory is then its shard and the units gathered
    resolve_shard_group(c, origin);
    add_sharded_memory(c);
  }
  parse_simulation_section(top, c, origin);
  for (std::size_t i = 0; i < c.simulation.stragglers.size(); ++i)
    if (c.simulation.stragglers[i].from_step >= c.training.steps)
      throw InputError(origin + ": simulation.stragglers[" + std::to_string(i) + "]: from_step " +
                       std::to_string(c.simulation.stragglers[i].from_step) + " is past the run's last step (" +
                       std::to_string(c.training.steps - 1) + "): it would never straggle");
  if (top.has("parallel")) parse_pipeline_job(top, c, origin, policies_origin);
  top.reject_unknown();
  if (c.parallel) refuse_unused_by_pipeline(top, *c.parallel, origin);
  check_xml_platform(doc, c, origin);
  resolve_batch_caps(top, c, origin);
  check_run_size(c, origin);
  check_packed_form(c, origin);
  sharded_checks_and_notes(c, origin);
  check_packed_window(c, origin);
  if (c.parallel && !c.parallel->abstract_mode) {  // the stage partition, before any work
    try {
      stage_partition(c);
    } catch (const InputError& e) {
      throw InputError(origin + ": parallel: " + e.what());
    }
  }
  check_policies_against_shape(c, origin, policies_origin);

  c.resolved = resolved_config(c, model);
  return c;
}

nlohmann::json Config::printable() const {
  nlohmann::json doc = resolved;
  const auto absolute = [](nlohmann::json& path) {
    if (path.is_string() && !path.get<std::string>().empty())
      path = fs::absolute(path.get<std::string>()).lexically_normal().string();
  };
  if (doc.contains("data") && doc["data"].contains("path")) absolute(doc["data"]["path"]);
  if (doc.contains("data") && doc["data"].contains("vocab")) absolute(doc["data"]["vocab"]);
  if (doc.contains("model") && !is_builtin_model(doc["model"].get<std::string>())) absolute(doc["model"]);
  if (doc.contains("platform") && doc["platform"].contains("file")) absolute(doc["platform"]["file"]);
  return doc;
}

std::unique_ptr<LengthSource> make_length_source(const DataConfig& d, int max_length) {
  if (d.source == "sst2") return histogram_source(sst2_train_histogram(), max_length);
  if (d.source == "histogram") {
    LengthHistogram h = histogram_from_json(read_json_file(d.path), d.path);
    if (h.source.empty()) h.source = d.path;  // messages and trace metadata name it by its file
    return histogram_source(std::move(h), max_length);
  }
  if (d.source == "trace") return trace_source(d.path, max_length);
  if (d.source == "tsv") return tsv_source(d.path, d.vocab, max_length);
  return lognormal_source(d.mean, d.std, d.min, d.max, d.samples, max_length);
}

std::vector<int> config_dataset(const Config& config, const LengthSource& source) {
  std::vector<int> dataset = source.dataset(config.training.seed);
  const int G = config.shape().G;
  if (dataset.size() < static_cast<std::size_t>(G))
    throw InputError(config.origin + ": data (" + source.describe() + "): " + std::to_string(dataset.size()) +
                     " samples, fewer than the " + std::to_string(G) + " ranks sharing them");
  // A step larger than the dataset would hold samples twice (the sampler's next epoch); only a
  // token budget sizes its steps without the global batch.
  const int B = config.shape().B;
  for (const auto& policy : config.policies)
    if (policy.name != "token_budget" && dataset.size() < static_cast<std::size_t>(B))
      throw InputError(config.origin + ": data (" + source.describe() + "): " + std::to_string(dataset.size()) +
                       " samples, fewer than training.global_batch " + std::to_string(B) +
                       ": a step would hold samples twice");
  return dataset;
}

}  // namespace ddpsim
