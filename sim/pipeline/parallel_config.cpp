#include "pipeline/parallel_config.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "pipeline/partition.hpp"
#include "pipeline/sync_plans.hpp"
#include "report/outputs.hpp"

namespace ddpsim::pipeline {

namespace {

double non_negative(const JsonFields& f, const char* key, double fallback, double limit) {
  const double v = f.get<double>(key, fallback);
  if (!(v >= 0 && v <= limit))
    throw InputError(f.where() + ": " + key + " must be from 0 to " + format("%g", limit) + ", got " +
                     nlohmann::json(v).dump());
  return v;
}

// An abstract time in units, one unit a second of simulated time: 0, or from 10⁻³ (SimGrid
// keeps its clock to 10⁻⁹ s and its link shares to 10⁻⁵, which smaller units would lose).
double unit_time(const JsonFields& f, const char* key, double fallback) {
  const double v = f.get<double>(key, fallback);
  if (!(v == 0 || (v >= 1e-3 && v <= 1e9)))
    throw InputError(f.where() + ": " + key + " must be 0 or from 0.001 to 1e9 units (scale all times alike), got " +
                     nlohmann::json(v).dump());
  return v;
}

ChannelConfig parse_channels(const nlohmann::json& doc, const std::string& where) {
  JsonFields f(doc, where);
  ChannelConfig c;
  c.model = f.get<std::string>("model", c.model);
  if (c.model != "separate" && c.model != "shared")
    throw InputError(where +
                     ": model is \"separate\" (a link per flow class) or \"shared\" (one link per GPU "
                     "and direction), got \"" +
                     c.model + "\"");
  c.receiver_limit = f.get<bool>("receiver_limit", c.receiver_limit);
  if (c.model == "separate" && f.has("receiver_limit"))
    throw InputError(where +
                     ": receiver_limit contends a GPU's incoming link among the classes, but model "
                     "\"separate\" gives each class its own: set model \"shared\", or leave it out");
  if (f.has("weights")) {
    JsonFields w(f.raw("weights"), where + ": weights");
    for (int k = 0; k < FLOW_CLASSES; ++k) {
      const auto& name = flow_class_names()[static_cast<std::size_t>(k)];
      const double v = w.get<double>(name, 1.0);
      if (!(v > 0 && v <= 1e6))
        throw InputError(w.where() + ": " + name + " must be > 0 and ≤ 1e6 (a share of a shared link), got " +
                         nlohmann::json(v).dump());
      c.weights[static_cast<std::size_t>(k)] = v;
    }
    w.reject_unknown();
    const auto [low, high] = std::minmax_element(c.weights.begin(), c.weights.end());
    if (*high > MAX_WEIGHT_RATIO * *low)
      throw InputError(w.where() + ": the largest weight is at most " + format("%g", MAX_WEIGHT_RATIO) +
                       " times the smallest (SimGrid's solver loses smaller shares), got " +
                       nlohmann::json(*high).dump() + " and " + nlohmann::json(*low).dump() +
                       "; for strict priority, name the class in exclusive");
  }
  if (f.has("exclusive")) {
    const auto& e = f.raw("exclusive");
    if (e.is_array())
      throw InputError(where + ": exclusive names one flow class (strict priority for one class only), got " +
                       e.dump());
    const std::string name = f.get<std::string>("exclusive", "");
    for (int k = 0; k < FLOW_CLASSES; ++k)
      if (flow_class_names()[static_cast<std::size_t>(k)] == name) c.exclusive = k;
    if (c.exclusive < 0 && name != "none")
      throw InputError(where + ": exclusive is one of fwd_prop, bwd_prop, grad_sync or none, got \"" + name + "\"");
  }
  f.reject_unknown();
  const bool weighted = std::any_of(c.weights.begin(), c.weights.end(), [](double w) { return w != 1; });
  if (c.model == "separate" && (weighted || c.exclusive >= 0))
    throw InputError(where + ": " + (weighted ? "weights decide" : "exclusive decides") +
                     " how classes share a link, but model \"separate\" gives each class its own: set "
                     "model \"shared\", or leave them out");
  return c;
}

}  // namespace

ParallelConfig parse_parallel(const nlohmann::json& doc, const std::string& where, int world_size) {
  JsonFields f(doc, where);
  ParallelConfig p;
  PipelineSetup& s = p.setup;
  s.stages = f.get_in<int>("stages", s.stages, 1, 1024);
  if (world_size % s.stages != 0)
    throw InputError(where + ": stages (" + std::to_string(s.stages) + ") must divide training.world_size (" +
                     std::to_string(world_size) + "): world size = stages × data-parallel groups");
  s.groups = world_size / s.stages;
  s.schedule = f.get<std::string>("schedule", s.schedule);
  s.micro_batches = f.get_in<int>("micro_batches", s.micro_batches, 1, 4096);
  // Bounded so that a job fits in memory: every GPU's micro-batch holds its own semaphores and
  // sender (the GPUs' own bound depends on simulation.mode: config.cpp).
  if (long{world_size} * s.micro_batches > MAX_PIPELINE_PASSES)
    throw InputError(where + ": GPUs × micro_batches is " + std::to_string(long{world_size} * s.micro_batches) +
                     ", at most " + std::to_string(MAX_PIPELINE_PASSES) +
                     " (each GPU's micro-batch holds its own SimGrid state): fewer micro-batches or GPUs");
  s.data_parallel = f.get<std::string>("data_parallel", s.data_parallel);
  s.sync_every = f.get_in<int>("sync_every", s.sync_every, 0, 4096);
  s.fwd_impact = non_negative(f, "fwd_impact", s.fwd_impact, 100);
  s.bwd_impact = non_negative(f, "bwd_impact", s.bwd_impact, 100);
  if (f.has("channels")) s.channels = parse_channels(f.raw("channels"), where + ": channels");
  p.abstract_mode = f.has("abstract");
  if (p.abstract_mode) {
    for (const char* key : {"partition", "micro_batching", "activation_bytes_per_token"})
      if (f.has(key))
        throw InputError(where + ": " + key +
                         " is for model mode, where the work comes from the model and data; this job's work is "
                         "given in time units (abstract): drop one or the other");
    JsonFields a(f.raw("abstract"), where + ": abstract");
    AbstractWork& w = p.abstract;
    w.forward = unit_time(a, "forward", w.forward);
    w.backward = unit_time(a, "backward", w.backward);
    w.transfer = unit_time(a, "transfer", w.transfer);
    w.sync = unit_time(a, "sync", w.sync);
    w.gather = unit_time(a, "gather", w.gather);
    w.optimizer = unit_time(a, "optimizer", w.optimizer);
    a.reject_unknown();
    if (w.forward + w.backward + w.transfer + w.sync + w.gather + w.optimizer == 0)
      throw InputError(where + ": abstract: every time is 0, so a step would take no time: give forward or backward");
    s.channels.bytes_per_s = ABSTRACT_BYTES_PER_UNIT;
    s.channels.latency_s = 0;
  } else {
    if (f.has("partition") && f.raw("partition").is_array()) {
      p.stage_layers = f.get<std::vector<int>>("partition", {});
      if (static_cast<int>(p.stage_layers.size()) != s.stages)
        throw InputError(where + ": partition lists " + std::to_string(p.stage_layers.size()) +
                         " stages' layer counts, stages is " + std::to_string(s.stages));
      for (std::size_t k = 0; k < p.stage_layers.size(); ++k)
        if (p.stage_layers[k] < 1)
          throw InputError(where + ": partition[" + std::to_string(k) + "] is " + std::to_string(p.stage_layers[k]) +
                           ": every stage needs at least one layer");
      p.partition = "explicit";
    } else {
      p.partition = f.get<std::string>("partition", p.partition);
      if (std::find(partition_names().begin(), partition_names().end(), p.partition) == partition_names().end())
        throw InputError(where +
                         ": partition is uniform, time, memory, balanced or a list of layer counts per "
                         "stage, got \"" +
                         p.partition + "\"");
    }
    p.micro_batching = f.get<std::string>("micro_batching", p.micro_batching);
    if (p.micro_batching != "even" && p.micro_batching != "sorted" && p.micro_batching != "kk")
      throw InputError(where +
                       ": micro_batching is even (in order), sorted (by length) or kk (balanced "
                       "workloads, VeRL's order), got \"" +
                       p.micro_batching + "\"");
    p.activation_bytes_per_token =
        f.get_in<int>("activation_bytes_per_token", static_cast<int>(p.activation_bytes_per_token), 0, 1'000'000'000);
  }
  f.reject_unknown();
  check_setup(s, where);
  return p;
}

nlohmann::json ParallelConfig::to_json() const {
  const PipelineSetup& s = setup;
  nlohmann::json weights;
  for (int k = 0; k < FLOW_CLASSES; ++k)
    weights[flow_class_names()[static_cast<std::size_t>(k)]] = s.channels.weights[static_cast<std::size_t>(k)];
  // What parse_channels takes back: with separate links, neither the receiver limit nor weights.
  nlohmann::json channels = {{"model", s.channels.model}};
  if (s.channels.model == "shared") {
    channels["receiver_limit"] = s.channels.receiver_limit;
    channels["weights"] = weights;
  }
  if (s.channels.exclusive >= 0)
    channels["exclusive"] = flow_class_names()[static_cast<std::size_t>(s.channels.exclusive)];
  nlohmann::json out = {{"stages", s.stages},
                        {"schedule", s.schedule},
                        {"micro_batches", s.micro_batches},
                        {"data_parallel", s.data_parallel},
                        {"sync_every", s.sync_every},
                        {"fwd_impact", s.fwd_impact},
                        {"bwd_impact", s.bwd_impact},
                        {"channels", channels}};
  if (abstract_mode) {
    out["abstract"] = {{"forward", abstract.forward},   {"backward", abstract.backward},
                       {"transfer", abstract.transfer}, {"sync", abstract.sync},
                       {"gather", abstract.gather},     {"optimizer", abstract.optimizer}};
  } else {
    out["partition"] = stage_layers.empty() ? nlohmann::json(partition) : nlohmann::json(stage_layers);
    out["activation_bytes_per_token"] = activation_bytes_per_token;
    out["micro_batching"] = micro_batching;
  }
  return out;
}

StepWork abstract_step(const PipelineSetup& s, const AbstractWork& w) {
  const auto M = static_cast<std::size_t>(s.micro_batches);
  GpuWork gpu;
  gpu.fwd_s.assign(M, w.forward);
  gpu.bwd_s.assign(M, w.backward);
  gpu.act_bytes.assign(M, w.transfer * ABSTRACT_BYTES_PER_UNIT);
  // `sync` and `gather` are what a GPU sends in one, so a ring of D peers moves these sizes.
  if (s.groups > 1) {
    const std::vector<StagePlans> plans = stage_plans(s);
    gpu.sync_bytes = w.sync * ABSTRACT_BYTES_PER_UNIT / sent_per_byte(plans.front().sync);
    if (s.data_parallel == "zero2")
      gpu.gather_bytes = w.gather * ABSTRACT_BYTES_PER_UNIT / sent_per_byte(plans.front().gather);
  }
  gpu.opt_s = w.optimizer;
  return StepWork(static_cast<std::size_t>(s.gpus()), gpu);
}

}  // namespace ddpsim::pipeline
