#include "model/perf_model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "common/json_util.hpp"
#include "embedded_h100_distilbert.hpp"
#include "embedded_rtx3090_distilbert.hpp"
#include "model/hf_model.hpp"
#include "model/model_fields.hpp"

namespace ddpsim {

int PerfModel::max_batch(int L) const {
  if (mem_capacity_mib <= 0) return 0;
  int lo = 0, hi = 1;
  while (hi < (1 << 24) && peak_mem_mib(hi, L) <= mem_capacity_mib) lo = hi, hi *= 2;
  while (hi - lo > 1) {  // peak memory is non-decreasing in b: the fitting b form a prefix
    const int mid = lo + (hi - lo) / 2;
    (peak_mem_mib(mid, L) <= mem_capacity_mib ? lo : hi) = mid;
  }
  return lo;
}

double level_at(const std::vector<std::pair<double, double>>& levels, long long tokens) {
  if (levels.empty()) return 1;
  const double t = static_cast<double>(std::max(tokens, 1LL));
  if (t <= levels.front().first) return levels.front().second;
  if (t >= levels.back().first) return levels.back().second;
  const auto hi = std::upper_bound(levels.begin(), levels.end(), t,
                                   [](double x, const std::pair<double, double>& p) { return x < p.first; });
  const auto lo = hi - 1;
  const double w = std::log(t / lo->first) / std::log(hi->first / lo->first);
  return std::exp(std::log(lo->second) + w * (std::log(hi->second) - std::log(lo->second)));
}

double level_at(const std::vector<SampleLevels>& by_samples, int samples, long long tokens) {
  if (by_samples.empty()) return 1;
  const int b = std::max(samples, 1);
  if (b <= by_samples.front().samples) return level_at(by_samples.front().levels, tokens);
  if (b >= by_samples.back().samples) return level_at(by_samples.back().levels, tokens);
  const auto hi =
      std::find_if(by_samples.begin(), by_samples.end(), [&](const SampleLevels& s) { return s.samples > b; });
  const auto lo = hi - 1;
  const double w = std::log(double(b) / lo->samples) / std::log(double(hi->samples) / lo->samples);
  const double a = level_at(lo->levels, tokens), c = level_at(hi->levels, tokens);
  return std::exp(std::log(a) + w * (std::log(c) - std::log(a)));
}

long long PerfModel::total_params() const {
  long long n = 0;
  for (const auto& l : layers) n += l.params;
  return n;
}

namespace {

MeasuredGrid parse_grid(const nlohmann::json& doc, const std::string& where) {
  if (!doc.is_object()) throw InputError(where + ": expected an object {\"b\", \"L\", \"ms\"}");
  JsonFields f(doc, where);
  MeasuredGrid g;
  // Sizes and lengths: integers ≥ 1 (read one by one, so that a message states that range).
  const auto axis = [&](const char* key) {
    const auto& list = f.raw(key);
    if (!list.is_array()) throw wrong_type(list, where + ": " + key, "an array of integers ≥ 1");
    std::vector<int> values;
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer() || list[i].get<long long>() < 1 || list[i].get<long long>() > 100'000'000)
        throw wrong_type(list[i], where + ": " + key + "[" + std::to_string(i) + "]", "an integer from 1 to 100000000");
      values.push_back(list[i].get<int>());
    }
    return values;
  };
  g.b = axis("b");
  g.L = axis("L");
  g.ms = f.require<std::vector<std::vector<double>>>("ms");
  f.reject_unknown();
  if (const std::string problem = g.check(); !problem.empty()) throw InputError(where + ": " + problem);
  return g;
}

std::vector<PhaseForm> form_list(const nlohmann::json& list, const std::string& where) {
  std::vector<PhaseForm> forms;
  if (list.is_array())
    for (const auto& item : list) {
      const std::string name = item.is_string() ? item.get<std::string>() : "";
      if (name != "analytic" && name != "grid" && name != "roofline") break;
      forms.push_back(phase_form(name));
    }
  if (!list.is_array() || forms.size() != list.size())
    throw InputError(where + ": supported_forms must be a list of \"analytic\", \"grid\" and \"roofline\", got " +
                     list.dump());
  return forms;
}

PhaseModel parse_phase(const nlohmann::json& doc, const std::string& where) {
  if (!doc.is_object())
    throw InputError(where + ": expected an object {\"a\", \"beta\", \"gamma\"} (ms), optionally with a \"grid\"");
  JsonFields f(doc, where);
  PhaseModel p;
  for (const char* key : {"a", "beta", "gamma"})
    if (!f.has(key))
      throw InputError(where + ": missing \"" + key +
                       "\" (the analytic form a + beta·b·L + gamma·b·L² needs all three, in ms; 0 for a term "
                       "the device does not show)");
  p.analytic.a_ms = non_negative(f, "a", 0);
  p.analytic.beta_ms = non_negative(f, "beta", 0);
  p.analytic.gamma_ms = non_negative(f, "gamma", 0);
  if (f.has("grid")) p.grid = parse_grid(f.raw("grid"), where + ": grid");
  if (f.has("roofline")) {
    JsonFields r(f.raw("roofline"), where + ": roofline");
    for (const char* key : {"floor", "a", "beta", "gamma"})
      if (!r.has(key))
        throw InputError(r.where() + ": missing \"" + key +
                         "\" (max(floor, a + beta·b·L + gamma·b·L²) needs all four, in ms)");
    p.roofline.floor_ms = non_negative(r, "floor", 0);
    p.roofline.compute = {non_negative(r, "a", 0), non_negative(r, "beta", 0), non_negative(r, "gamma", 0)};
    p.has_roofline = true;
    r.reject_unknown();
  }
  const auto form = f.get<std::string>("form", "analytic");
  if (form != "analytic" && form != "grid" && form != "roofline")
    throw InputError(where + ": form must be \"analytic\", \"grid\" or \"roofline\", got \"" + form + "\"");
  p.use = phase_form(form);
  if (p.use_grid() && p.grid.empty()) throw InputError(where + ": form \"grid\" needs a \"grid\" object");
  if (p.use == PhaseForm::roofline && !p.has_roofline)
    throw InputError(where + ": form \"roofline\" needs a \"roofline\" object {\"floor\", \"a\", \"beta\", \"gamma\"}");
  f.reject_unknown();
  return p;
}

// A window of `tokens` keys in a `share` of the attention; the phases' analytic and roofline
// forms take it (a measured grid holds its own).
void set_window(PerfModel& m, const nlohmann::json& doc, const std::string& where) {
  JsonFields w(doc, where);
  if (!w.has("tokens") || !w.has("share"))
    throw InputError(where + ": expected {\"tokens\": keys a token attends to, \"share\": windowed layers / layers}");
  m.attention_window.tokens = w.require_in<long long>("tokens", 1, 100'000'000);
  m.attention_window.share = non_negative(w, "share", 0, 1);
  w.reject_unknown();
  for (PhaseModel* p : {&m.forward, &m.backward}) p->analytic.window = p->roofline.compute.window = m.attention_window;
}

// The network the model's allreduce was measured on: its keys are checked where the config
// parses a platform, with the config's own rules.
void read_platform(const nlohmann::json& platform, const std::string& origin, PerfModel& m) {
  JsonFields pf(platform, origin + ": platform");
  for (const char* key : {"topology", "link_GBps", "latency_us", "host_GBps"})
    if (pf.has(key)) m.platform[key] = pf.raw(key);
  m.platform_source = pf.require<std::string>("source");
  pf.reject_unknown();
}

// Provenance only: a calibration section that does not hold what calibrate writes names nothing.
// The values of one metadata key over the traces a model was calibrated on.
std::set<std::string> calibrated_metadata(const nlohmann::json& doc, const char* key) {
  std::set<std::string> values;
  const auto traces = doc.contains("calibration") && doc["calibration"].is_object()
                          ? doc["calibration"].value("traces", nlohmann::json::array())
                          : nlohmann::json::array();
  for (const auto& t : traces.is_array() ? traces : nlohmann::json::array())
    if (t.is_object() && t.contains("metadata") && t["metadata"].is_object() && t["metadata"].contains(key) &&
        t["metadata"][key].is_string())
      values.insert(t["metadata"][key].get<std::string>());
  return values;
}

std::string read_precision(const JsonFields& f, const std::string& origin) {
  const auto precision = f.get<std::string>("precision", "");
  for (const char* known : {"", "fp32", "tf32", "bf16", "fp16", "fp8"})
    if (precision == known) return precision;
  throw InputError(origin + ": precision is \"fp32\", \"tf32\", \"bf16\", \"fp16\" or \"fp8\", got \"" + precision +
                   "\"");
}

void read_memory(const nlohmann::json& doc, const std::string& origin, PerfModel& m) {
  JsonFields mem(doc, origin + ": memory_mib");
  m.mem_m0_mib = non_negative(mem, "m0", 0);
  m.mem_mu_mib = non_negative(mem, "mu", 0);
  m.mem_nu_mib = non_negative(mem, "nu", 0);
  m.mem_capacity_mib = non_negative(mem, "capacity", 0);
  mem.reject_unknown();
}

}  // namespace

PerfModel parse_perf_model(const nlohmann::json& doc, const std::string& origin) {
  if (!doc.is_object()) throw InputError(origin + ": a performance model is a JSON object");
  JsonFields f(doc, origin);
  PerfModel m;
  m.origin = origin;
  m.name = f.require<std::string>("name");
  m.gpu = f.get<std::string>("gpu", "");
  m.source = f.require<std::string>("source");
  m.forward = parse_phase(f.raw("forward_ms"), origin + ": forward_ms");
  m.backward = parse_phase(f.raw("backward_ms"), origin + ": backward_ms");
  m.optimizer_ms = non_negative(f, "optimizer_ms", 0);
  m.optimizer_update_share = non_negative(f, "optimizer_update_share", 1, 1);
  m.first_use_ms = non_negative(f, "first_use_ms", 0);
  m.sync_ms = non_negative(f, "sync_ms", 0, 1e5);
  m.sync_source = f.get<std::string>("sync_source", "");
  m.precision = read_precision(f, origin);
  // Slow-down factors: one message for every value out of [1, 100], negative or not.
  const auto slowdown = [&](const char* key, const char* meaning) {
    const double v = f.get<double>(key, 1);
    if (!(v >= 1 && v <= 100))
      throw InputError(origin + ": " + key + " must be in [1, 100] (1: " + meaning + "), got " + f.raw(key).dump());
    return v;
  };
  m.comm_slowdown = slowdown("comm_slowdown", "compute is not slowed by communication");
  m.allreduce_slowdown = slowdown("allreduce_slowdown", "communication is not slowed by compute");
  m.allgather_factor = slowdown("allgather_factor", "the all-gather takes the simulated ring's time");
  if (f.has("fit_quality")) {
    JsonFields q(f.raw("fit_quality"), origin + ": fit_quality");
    m.fit_heldout_mape = non_negative(q, "heldout_mape", 0, 100);
    m.fit_warning = q.get<std::string>("warning", "");
    if (q.has("supported_forms")) m.supported_forms = form_list(q.raw("supported_forms"), origin + ": fit_quality");
    q.reject_unknown();
  }
  parse_variation(f, m, origin);
  if (f.has("memory_mib")) read_memory(f.raw("memory_mib"), origin, m);
  m.bytes_per_param = f.get_in<int>("gradient_bytes_per_param", 4, 1, 16);
  if (f.has("attention_window")) set_window(m, f.raw("attention_window"), origin + ": attention_window");
  const auto& layers = f.raw("layers");
  if (!layers.is_array() || layers.empty())
    throw InputError(origin + ": layers must be a non-empty array of {name, params, bwd_fraction}");
  double fraction_sum = 0;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    JsonFields l(layers[i], origin + ": layers[" + std::to_string(i) + "]");
    LayerSpec spec;
    spec.name = l.require<std::string>("name");
    // Timelines and bucket reports name layers: each needs a name of its own.
    if (spec.name.empty()) throw InputError(l.where() + ": name is empty");
    for (const auto& earlier : m.layers)
      if (earlier.name == spec.name)
        throw InputError(l.where() + ": name \"" + spec.name + "\" is given to two layers");
    spec.params = l.require_in<long long>("params", 1, 10'000'000'000'000);
    spec.bwd_fraction = non_negative(l, "bwd_fraction", 0);
    l.reject_unknown();
    fraction_sum += spec.bwd_fraction;
    m.layers.push_back(std::move(spec));
  }
  if (!(fraction_sum > 0)) throw InputError(origin + ": layers: the bwd_fraction values must not all be 0");
  for (auto& l : m.layers) l.bwd_fraction /= fraction_sum;  // relative weights; normalised here
  if (f.has("platform")) read_platform(f.raw("platform"), origin, m);
  f.reject_unknown({"$comment", "calibration"});  // calibration: provenance written by ddpsim calibrate
  m.calibrated_on = calibrated_metadata(doc, "model");
  m.calibrated_cpus = calibrated_metadata(doc, "cpu");
  m.calibrated_blas = calibrated_metadata(doc, "blas");
  return m;
}

const std::vector<std::string>& builtin_model_names() {
  static const std::vector<std::string> names = {"rtx3090-distilbert", "h100-distilbert"};
  return names;
}

bool is_builtin_model(const std::string& name) {
  const auto& names = builtin_model_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string_view builtin_model_text(const std::string& name) {
  if (name == "rtx3090-distilbert") return embedded::rtx3090_distilbert;
  if (name == "h100-distilbert") return embedded::h100_distilbert;
  return {};
}

PerfModel load_perf_model(const std::string& name_or_path) {
  if (is_builtin_model(name_or_path))
    return parse_perf_model(parse_json(builtin_model_text(name_or_path), "built-in " + name_or_path),
                            "built-in " + name_or_path);
  if (name_or_path.find('/') == std::string::npos && name_or_path.find(".json") == std::string::npos)
    throw InputError("model \"" + name_or_path +
                     "\": not a built-in model (rtx3090-distilbert, h100-distilbert) nor a .json file path");
  const nlohmann::json doc = read_json_file(name_or_path);
  refuse_other_kind(doc, name_or_path, FileKind::perf_model);
  if (doc.is_object() && doc.contains("hf_config")) return derive_perf_model(doc, name_or_path);
  if (doc.is_object() && !doc.contains("forward_ms") && (doc.contains("dtype") || doc.contains("efficiency")))
    throw InputError(name_or_path +
                     ": a model spec (gpu, dtype, efficiency) needs \"hf_config\", the Hugging Face "
                     "config.json it derives the model from (or, for a calibrated model, forward_ms and backward_ms)");
  return parse_perf_model(doc, name_or_path);
}

PerfModel derive_perf_model(const nlohmann::json& doc, const std::string& origin) {
  JsonFields f(doc, origin);
  std::filesystem::path config = f.require<std::string>("hf_config");
  if (config.empty())
    throw InputError(origin + ": \"hf_config\" is empty: expected the path of a Hugging Face config.json");
  if (config.is_relative()) config = (std::filesystem::path(origin).parent_path() / config).lexically_normal();
  const std::string gpu = f.require<std::string>("gpu");
  const std::string dtype = f.get<std::string>("dtype", "bf16");
  DerivationOptions options;
  options.efficiency = f.get<double>("efficiency", options.efficiency);
  options.fused_attention = f.get<bool>("fused_attention", false);
  options.checkpointing = f.get<bool>("activation_checkpointing", false);
  const std::string name = f.get<std::string>("name", std::filesystem::path(origin).stem().string());
  // Interference factors no spec gives: the user's own figure (from a profile of another model,
  // say), checked and stated as given.
  std::vector<std::pair<std::string, nlohmann::json>> given;
  for (const char* key : {"comm_slowdown", "allreduce_slowdown", "allgather_factor", "optimizer_update_share"})
    if (f.has(key)) given.emplace_back(key, f.raw(key));
  f.reject_unknown({"$comment"});
  const TransformerSpec spec = transformer_from_hf_config(read_json_file(config.string()), config.string());
  nlohmann::json model;
  try {
    model = derived_model_json(spec, name, gpu, dtype, options);
  } catch (const InputError& e) {
    throw InputError(origin + ": " + e.what());
  }
  for (const auto& [key, value] : given) model[key] = value;
  PerfModel perf = parse_perf_model(model, origin);
  perf.position_table = spec.position_table;
  for (const auto& [key, factor] : {std::pair{"comm_slowdown", perf.comm_slowdown},
                                    {"allreduce_slowdown", perf.allreduce_slowdown},
                                    {"allgather_factor", perf.allgather_factor},
                                    {"optimizer_update_share", perf.optimizer_update_share}})
    if (factor != 1) {
      std::ostringstream text;
      text << "; " << key << " " << factor << " as the spec gives it";
      perf.source += text.str();
    }
  return perf;
}

double PerfModel::untrained_doublings(int samples) const {
  const auto [low, high] = steps_samples;
  if (low == 0 || samples < 1 || (samples >= low && samples <= high)) return 0;
  return std::log2(double(samples) / double(samples < low ? low : high));
}

namespace {

// A table's level as one figure: the geometric mean of its bins' factors.
double table_level(const SampleLevels& s) {
  double logs = 0;
  for (const auto& [tokens, factor] : s.levels) logs += std::log(factor);
  return s.levels.empty() ? 1.0 : std::exp(logs / double(s.levels.size()));
}

// Two ranks of one core each on an AMD EPYC VM. Below: pre-runs at 4, 8 and 16 samples a
// rank-step (traces/cpu/prereg23) ran 4 at ×1.39 over the profile's surface and 8 at ×0.92,
// ×1.51 a halving. Above: from pre-runs of 8 samples only (prereg22), 16 samples' step ran
// 11-15% over the registered one, its forward and backward ×1.15.
constexpr double kUntrainedBelowLog = 0.41, kUntrainedAboveLog = 0.14;

std::string times(double log_factor) {
  char text[24];
  std::snprintf(text, sizeof text, "×%.2f", std::exp(log_factor));
  return text;
}

}  // namespace

PerfModel::SizeSteps PerfModel::untrained_size_steps() const {
  // A doubling's change between two neighbouring tables (0 where there are not two).
  const auto change = [&](std::size_t i) {
    if (samples_levels.size() < 2) return 0.0;
    const SampleLevels &a = samples_levels[i], &b = samples_levels[i + 1];
    return std::abs(std::log(table_level(b) / table_level(a))) / std::log2(double(b.samples) / double(a.samples));
  };
  // Below the sizes trained, the smallest two tables are the nearest evidence; above, the largest
  // two. The project's figures stay the least: a flat stretch says nothing of the sizes beyond it.
  const double below = change(0), above = samples_levels.size() < 2 ? 0.0 : change(samples_levels.size() - 2);
  SizeSteps s{std::max(below, kUntrainedBelowLog), std::max(above, kUntrainedAboveLog), ""};
  s.source = "this project's CPU runs on an AMD EPYC VM: 4 samples a rank-step ×1.51 over 8, 16 ×1.15 over 8";
  if (below > kUntrainedBelowLog) s.source += "; below, " + name + "'s own smallest two sizes, " + times(below);
  if (above > kUntrainedAboveLog) s.source += "; above, " + name + "'s own largest two sizes, " + times(above);
  return s;
}

std::string PerfModel::training_samples_note(int samples) const {
  const double k = untrained_doublings(samples);
  if (k == 0) return "";
  const auto [low, high] = steps_samples;
  const SizeSteps step = untrained_size_steps();
  const std::string measured = low == high ? std::to_string(low) : std::to_string(low) + " to " + std::to_string(high);
  return "model " + name + "'s training runs held " + measured + " samples a (micro-)batch, this config's " +
         std::to_string(samples) + ": the runs' level at " + std::to_string(samples) +
         " is not measured (on a CPU, training at a size its pre-runs never held ran 18-23% off the profile); "
         "a prediction interval's \"untrained batch size\" term takes its level " +
         times(k < 0 ? step.below : step.above) + (k < 0 ? " a halving below" : " a doubling above") + " them" +
         (std::abs(k) == 1 ? "" : ", " + times(std::abs(k) * (k < 0 ? step.below : step.above)) + " here") + " (" +
         step.source + "); calibrate --training with runs at this batch size";
}

std::pair<int, int> PerfModel::measured_reach() const {
  std::pair<int, int> reach{0, 0};
  for (const PhaseModel* phase : {&forward, &backward})
    if (phase->use_grid() && !phase->grid.empty())
      reach = {std::max(reach.first, phase->grid.b.back()), std::max(reach.second, phase->grid.L.back())};
  return reach;
}

std::string PerfModel::extrapolation_note(int b, int L, bool even_share) const {
  const auto [b_max, L_max] = measured_reach();
  if (b_max == 0 || (b <= b_max && L <= L_max)) return "";
  const std::string shape = "b = " + std::to_string(b) + ", L = " + std::to_string(L);
  return "model " + name + " was measured up to b = " + std::to_string(b_max) + ", L = " + std::to_string(L_max) +
         (even_share ? "; a rank's even share of the batch at the data's longest length, " + shape +
                           ", lies beyond (a policy that sizes its own batches may go further)"
                     : "; shapes up to " + shape + " lie beyond") +
         ", where its times are extrapolated by the analytic form (calibrate on a profile that reaches them: "
         "ddptrain --profile --profile-batches ... --profile-lengths ...)";
}

}  // namespace ddpsim
