// What `ddpsim replay` and `validate` share (cli/trace_args.hpp): the config a trace is replayed
// under, with the network an emulated trace recorded, and the lines that say where a replay's
// model and network came from.
#include "cli/trace_args.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <iostream>

#include "calib/warmup.hpp"
#include "cli/config_args.hpp"
#include "cli/run_report.hpp"
#include "common/error.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

// Whether --model loads and charges a shape's first use (or, a spec in reduced precision, its
// intervals do); a model that does not load is left to the config's own loading to name.
bool has_first_use_cost(const std::string& model) {
  try {
    const PerfModel m = load_perf_model(model);
    return m.first_use_ms > 0 || m.first_use_unknown();
  } catch (const std::exception&) {
    return false;
  }
}

// Which of the network's keys the user gave — a config file's platform or training.overlap, or
// a --set under them: the trace's modelled allreduce leaves those alone.
struct UserNetwork {
  bool platform = false, overlap = false;
};
UserNetwork user_network(const po::variables_map& vm) {
  UserNetwork own;
  if (vm.count("set"))
    for (const auto& assignment : vm["set"].as<std::vector<std::string>>()) {
      const std::string key = assignment.substr(0, assignment.find('='));
      own.platform = own.platform || key == "platform" || key.starts_with("platform.");
      own.overlap = own.overlap || key == "training.overlap" ||
                    (key == "training" && assignment.find("\"overlap\"") != std::string::npos);
    }
  if (vm.count("config")) {
    const nlohmann::json file = read_config_json(vm["config"].as<std::string>());
    own.platform = own.platform || file.contains("platform");
    own.overlap = own.overlap ||
                  (file.contains("training") && file["training"].is_object() && file["training"].contains("overlap"));
  }
  return own;
}

// The allreduce ddptrain charged an emulated trace's ranks, as the config's platform (a pcie ring
// of two links a step, no shared root) and overlap, where the user gave neither; returns what
// the header says of it ("" when nothing was taken).
std::string take_trace_network(nlohmann::json& doc, const Trace& trace, const UserNetwork& own) {
  const std::optional<ModelledAllreduce> ring = modelled_allreduce(trace);
  if (!ring || (own.platform && own.overlap)) return "";
  std::string taken;
  if (!own.platform) {
    doc["platform"] = {{"topology", "pcie"},
                       {"link_GBps", ring->link_GBps},
                       {"latency_us", ring->step_latency_us / 2},
                       {"host_GBps", 0}};
    taken = format("a ring at %g GB/s", ring->link_GBps) + format(", %g µs a step", ring->step_latency_us);
  }
  if (!own.overlap && doc.contains("training") && doc["training"].is_object()) {
    doc["training"]["overlap"] = ring->overlap;
    taken += std::string(taken.empty() ? "" : ", ") + (ring->overlap ? "overlapped" : "no overlap");
  }
  return "the trace's modelled allreduce (ddptrain --emulate-ranks charged " + taken + "; " + trace.path +
         "'s metadata), simulated as a pcie ring without a shared root; platform keys or training.overlap "
         "given to the command override it";
}

// Refuses each --set that replay would ignore or cannot honour (what the trace fixes, the model
// --model gives, measured decision times); returns whether it sets training.world_size.
bool check_replay_sets(const po::variables_map& vm, const Trace& trace) {
  bool world_size_set = false;
  if (vm.count("set"))
    for (const auto& assignment : vm["set"].as<std::vector<std::string>>()) {
      const std::string key = assignment.substr(0, assignment.find('='));
      const auto under = [&](const char* prefix) {
        return key == prefix || key.starts_with(std::string(prefix) + ".");
      };
      if (under("model")) throw UsageError("--set " + key + ": the performance model comes from --model");
      // A whole section set at once names its keys inside the value.
      const auto sets = [&](const char* sub) {
        if (key != "training") return under((std::string("training.") + sub).c_str());
        const auto doc = nlohmann::json::parse(assignment.substr(assignment.find('=') + 1), nullptr, false);
        return doc.is_object() && doc.contains(sub);
      };
      if (sets("micro_batches"))
        throw UsageError("--set " + key + ": replay and validate simulate the micro-batches " + trace.path +
                         " recorded (its micro_batches column, or one per rank and step without it), so "
                         "training.micro_batches would have no effect");
      for (const char* fixed : {"training.steps", "training.global_batch", "training.max_length", "training.b_max",
                                "training.pad_to_multiple_of", "policies", "data"})
        if (under(fixed))
          throw UsageError("--set " + key + ": replay and validate take the steps, batches and lengths from " +
                           trace.path + ", so " + fixed + " would have no effect");
      if (key == "simulation.sched_ms" && assignment.find("measured") != std::string::npos)
        throw UsageError("--set " + assignment +
                         ": \"measured\" times the policy's decisions, and replay and "
                         "validate make none (the trace's batches are replayed): give sched_ms in ms");
      if (key == "training.world_size") world_size_set = true;
    }
  return world_size_set;
}

// What the trace says its gradients were, where it says (ddptrain and the tracer record it).
std::string recorded_gradients(const Config& config, const Trace& trace) {
  const auto recorded = trace.metadata.find("grad_dtype");
  if (recorded == trace.metadata.end()) return "";
  const int bytes = recorded->second == "fp32" ? 4 : recorded->second == "bf16" || recorded->second == "fp16" ? 2 : 0;
  if (bytes == config.model->bytes_per_param) return "; the trace recorded " + recorded->second;
  return "; the trace recorded " + recorded->second + ", which --set training.grad_dtype=" + recorded->second +
         " would replay";
}

// How the traced run synchronised and sharded its optimizer (ddptrain records the one, a
// StepTracer given them both): the simulation's unless the config says otherwise, which is then
// a what-if, said as one. A partition is taken only where the simulation runs ZeRO-1.
void recorded_sharding(nlohmann::json& training, const Trace& trace, const std::string& config_name) {
  for (const std::string key : {"data_parallel", "zero_partition"}) {
    const auto recorded = trace.metadata.find(key);
    if (recorded == trace.metadata.end()) continue;
    const nlohmann::json dp = training.value("data_parallel", nlohmann::json("ddp"));
    if (key == "zero_partition" && dp != "zero1") continue;
    if (!training.contains(key)) {
      training[key] = recorded->second;
      continue;
    }
    if (training[key] != recorded->second)
      std::cerr << "note: " << trace.path << " recorded " << key << " " << recorded->second << "; " << config_name
                << " (or its --set) simulates " << training[key].dump() << " in its place\n";
  }
}

// A trace of packed sequences is replayed packed unless the config says otherwise, which is then
// refused: its rows record no padding to replay.
void recorded_attention(nlohmann::json& training, const Trace& trace) {
  if (!training.contains("attention") && !trace.runs.empty() && trace.runs.front().packed)
    training["attention"] = "packed";
}

// A model's load error is --model's (--set model is refused before): said so.
Config load_with_model_errors(const po::variables_map& vm, const std::function<void(nlohmann::json&)>& adjust) {
  try {
    return load_config(vm, adjust);
  } catch (const InputError& e) {
    const std::string what = e.what(), tag = ": model: ";
    const auto at = what.find(tag);
    if (at == std::string::npos) throw;
    std::string rest = what.substr(at + tag.size());
    if (rest.starts_with("model \"")) rest.erase(0, 6);  // the loader's own "model \"NAME\"": --model says it
    throw InputError("--model " + rest);
  }
}

// What a config written for `ddpsim run` sizes that the trace fixes: a note that it is not used
// (the embedded default's own sizes are no one's mistake).
void note_unused_sizes(const nlohmann::json& training, const po::variables_map& vm, const std::string& config_name,
                       const Trace& trace) {
  if (!vm.count("config")) return;
  std::string unused;
  for (const char* key : {"steps", "global_batch", "max_length", "b_max", "pad_to_multiple_of"})
    if (training.contains(key)) unused += (unused.empty() ? "training." : ", training.") + std::string(key);
  if (!unused.empty())
    std::cerr << "note: " << config_name << " sets " << unused << "; the steps, batches and lengths come from "
              << trace.path << ", so " << (unused.find(',') == std::string::npos ? "it is" : "they are")
              << " not used\n";
}

// The trace's ranks, its longest sample and its steps: what the config is sized to.
struct TraceSize {
  int G = 0;
  int longest = 2;
  long steps = 1;  // stragglers are checked against the trace's step numbers
};

TraceSize trace_size(const Trace& trace) {
  TraceSize size{trace.runs.front().G};
  for (const auto& run : trace.runs)
    for (const auto& r : run.rows)
      size.longest = std::max(size.longest, r.max_len), size.steps = std::max(size.steps, r.step + 1L);
  return size;
}

// The config document made to replay the trace: its model, its sizes, its sharding where the
// config gives none; false where the training section is not an object (the parser names it).
bool fit_to_trace(nlohmann::json& doc, const po::variables_map& vm, const Trace& trace, const std::string& config_name,
                  bool world_size_set) {
  const std::string model = vm["model"].as<std::string>();
  if (doc.contains("parallel"))
    throw InputError(config_name +
                     ": parallel: replay and validate simulate the DDP steps a trace recorded; a "
                     "pipeline job runs with ddpsim run (leave the parallel section out here)");
  // A path is taken from the current folder; a bare word is left for the model loader to name.
  const bool path = model.find('/') != std::string::npos || model.ends_with(".json");
  doc["model"] = is_builtin_model(model) || !path ? model : std::filesystem::absolute(model).string();
  doc["policies"] = nlohmann::json::array({"static"});  // valid for any G; the trace's plans are replayed
  doc.erase("data");
  if (doc.contains("training") && !doc["training"].is_object()) return false;
  if (!doc.contains("training")) doc["training"] = nlohmann::json::object();
  auto& training = doc["training"];
  note_unused_sizes(training, vm, config_name, trace);
  const auto simulation = doc.value("simulation", nlohmann::json::object());
  if (simulation.is_object() && simulation.value("sched_ms", nlohmann::json()) == "measured")
    throw InputError(config_name +
                     ": simulation.sched_ms \"measured\" times the policy's decisions, and replay "
                     "and validate make none (the trace's batches are replayed): give sched_ms in ms, or leave it out");
  training.erase("b_max");
  training.erase("pad_to_multiple_of");
  recorded_sharding(training, trace, config_name);
  recorded_attention(training, trace);
  const TraceSize size = trace_size(trace);
  // A config file's own world size is checked against the trace after, as a --set one is.
  if (!world_size_set && !(vm.count("config") && training.contains("world_size"))) training["world_size"] = size.G;
  const auto& ranks = training["world_size"];  // config_for_trace's check names a --set that differs
  // A batch the micro-batches fit: replay names a count the trace did not record, with the trace.
  const auto& micro = training.contains("micro_batches") ? training["micro_batches"] : nlohmann::json(1);
  const long long per_rank = micro.is_number_integer() ? std::clamp<long long>(micro.get<long long>(), 1, 10000) : 1;
  training["global_batch"] =
      (ranks.is_number_integer() && ranks.get<long long>() >= 1 ? ranks.get<long long>() : size.G) * per_rank;
  training["max_length"] = size.longest;
  training["steps"] = size.steps;
  // Ranks that took turns in one process met each shape once between them (said only where
  // the model has a first-use cost: the config would note that the setting does nothing).
  const auto emulated = trace.metadata.find("emulated_ranks");
  if (emulated != trace.metadata.end() && emulated->second != "0" && emulated->second != "1" &&
      simulation.is_object() && !simulation.contains("first_use") && has_first_use_cost(model))
    doc["simulation"]["first_use"] = "shared";
  return true;
}

}  // namespace

int parse_warmup(const std::string& option, const std::string& text) {
  if (text == "auto") return AUTO_WARMUP;
  std::size_t used = 0;
  int warmup = -1;
  try {
    warmup = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || warmup < 0)
    throw UsageError(option + " is a number of steps ≥ 0 or auto, got \"" + text + "\"");
  return warmup;
}

Config config_for_trace(const po::variables_map& vm, const Trace& trace) {
  const int G = trace.runs.front().G;
  const bool world_size_set = check_replay_sets(vm, trace);
  const std::string config_name = vm.count("config") ? vm["config"].as<std::string>() : "the config";
  const UserNetwork own = user_network(vm);
  std::string network;
  Config config = load_with_model_errors(vm, [&](nlohmann::json& doc) {
    if (fit_to_trace(doc, vm, trace, config_name, world_size_set)) network = take_trace_network(doc, trace, own);
  });
  if (!network.empty()) config.platform_source = network;
  if (config.training.world_size != G)
    throw InputError(trace.path + ": the trace has " + std::to_string(G) + " ranks, " +
                     (world_size_set ? "--set training.world_size" : config_name + "'s training.world_size") +
                     " says " + std::to_string(config.training.world_size));
  for (const char* key : {"global_batch", "steps", "max_length", "b_max", "micro_batches", "pad_to_multiple_of"})
    config.resolved["training"].erase(key);
  config.resolved.erase("policies");
  config.resolved.erase("data");
  return config;
}

void add_replay_options(po::options_description& visible, po::options_description& hidden,
                        po::positional_options_description& positional) {
  visible.add_options()("model", po::value<std::string>()->required(), "performance model JSON (or a built-in name)")(
      "set", po::value<std::vector<std::string>>()->composing(), "KEY=VALUE: override a config value (repeatable)")(
      "out", po::value<std::string>(), "output folder")("help,h", "this help");
  hidden.add_options()("config", po::value<std::string>());
  positional.add("config", 1);
}

Extrapolation extrapolation(const PerfModel& model, std::initializer_list<const Trace*> traces) {
  const auto [b_max, L_max] = model.measured_reach();
  long total = 0, beyond = 0;
  int b = 0, L = 0;
  for (const Trace* trace : traces) {
    if (!trace) continue;  // no baseline
    for (const auto& run : trace->runs)
      for (const auto& row : run.rows) {
        ++total;
        b = std::max(b, row.batch_size), L = std::max(L, row.max_len);
        if (b_max > 0 && (row.batch_size > b_max || row.max_len > L_max)) ++beyond;
      }
  }
  Extrapolation e;
  if (beyond == 0) return e;
  e.pct = 100.0 * static_cast<double>(beyond) / static_cast<double>(total);
  char share[96];
  std::snprintf(share, sizeof share, " (%.1f%% of the measured rank-steps)", e.pct);
  e.text = model.extrapolation_note(b, L) + share;
  return e;
}

std::string platform_line(const Config& config, const Trace& trace) {
  return "model source: " + config.model->source +
         (config.model->fit_warning.empty() ? "" : "\nwarning: this model " + config.model->fit_warning) +
         "\nplatform: " + config.platform.to_json().dump() + "\n  from: " +
         (config.platform_source.empty() ? std::string("the config and its --set (or their defaults); the model "
                                                       "carries none")
                                         : config.platform_source) +
         "\ngradients: " + config.gradients() + recorded_gradients(config, trace) + "\n" +
         (config.training.data_parallel == "ddp" ? ""
                                                 : data_parallel_line(config, config_buckets(config).size()) + "\n");
}

namespace {

// The calibration traces' values of a metadata key, each quoted: "a", "b".
std::string quoted(const std::set<std::string>& values) {
  std::string text;
  for (const std::string& v : values) text += (text.empty() ? "\"" : ", \"") + v + "\"";
  return text;
}

}  // namespace

std::string trained_other_model(const PerfModel& model, const Trace& trace) {
  const auto trained = trace.metadata.find("model");
  if (trained == trace.metadata.end() || model.calibrated_on.empty() || model.calibrated_on.contains(trained->second))
    return "";
  return trace.path + " trained model \"" + trained->second + "\", but " + model.name +
         " was calibrated on traces of " + quoted(model.calibrated_on) + ": its times are another model's";
}

std::string ran_on_other_machine(const PerfModel& model, const Trace& trace) {
  std::string differs;
  for (const auto& [key, calibrated] : {std::pair{"cpu", &model.calibrated_cpus}, {"blas", &model.calibrated_blas}}) {
    const auto ran = trace.metadata.find(key);
    if (ran == trace.metadata.end() || calibrated->empty() || calibrated->contains(ran->second)) continue;
    differs +=
        std::string(differs.empty() ? "" : "; ") + key + " \"" + ran->second + "\" against " + quoted(*calibrated);
  }
  return differs.empty() ? ""
                         : trace.path + " ran on another machine than the traces model \"" + model.name +
                               "\" was calibrated on (" + differs + "): its times are another machine's";
}

}  // namespace ddpsim::cli
