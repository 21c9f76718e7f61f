#include "eval/config.hpp"

#include <filesystem>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "embedded_default_config.hpp"

namespace ddpsim {

namespace fs = std::filesystem;

StepShape Config::shape() const {
  StepShape s;
  s.G = training.world_size;
  s.B = training.global_batch;
  s.max_length = training.max_length;
  s.b_max = training.b_max;
  s.seed = training.seed;
  return s;
}

nlohmann::json default_config_json() {
  return parse_json(embedded::default_config, "embedded default config");
}

nlohmann::json read_config_json(const std::string& path) {
  return path.empty() ? default_config_json() : read_json_file(path);
}

void apply_override(nlohmann::json& doc, std::string_view assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    throw UsageError("--set \"" + std::string(assignment) + "\": expected key=value, e.g. training.global_batch=64");
  const std::string key(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  nlohmann::json value = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;
  nlohmann::json* node = &doc;
  std::size_t begin = 0;
  for (;;) {
    const auto dot = key.find('.', begin);
    const std::string part = key.substr(begin, dot == std::string::npos ? dot : dot - begin);
    if (part.empty()) throw UsageError("--set " + key + ": empty key segment");
    if (!node->is_object()) throw UsageError("--set " + key + ": \"" + part + "\" is inside a non-object value");
    node = &(*node)[part];
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  *node = std::move(value);
}

namespace {

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
  }
  if (d.source == "tsv") d.vocab = resolve(f.require<std::string>("vocab"), base_dir);
  if (d.source == "lognormal") {
    d.mean = f.get<double>("mean", d.mean);
    d.std = f.get<double>("std", d.std);
    d.min = f.get<int>("min", d.min);
    d.max = f.get<int>("max", d.max);
    d.samples = f.get<std::int64_t>("samples", d.samples);
  }
  if (d.source != "sst2" && d.source != "histogram" && d.source != "trace" && d.source != "tsv" &&
      d.source != "lognormal")
    throw InputError(where + ": unknown source \"" + d.source + "\" (known: sst2, histogram, trace, tsv, lognormal)");
  f.reject_unknown();
  return d;
}

TrainingConfig parse_training(const nlohmann::json& doc, const std::string& where) {
  JsonFields f(doc, where);
  TrainingConfig t;
  t.world_size = f.get<int>("world_size", t.world_size);
  t.global_batch = f.get<int>("global_batch", t.global_batch);
  t.steps = f.get<int>("steps", t.steps);
  t.max_length = f.get<int>("max_length", t.max_length);
  t.seed = f.get<std::uint64_t>("seed", t.seed);
  if (f.has("b_max")) {
    const auto& b = f.raw("b_max");
    if (b.is_number_integer()) {
      const int cap = b.get<int>();
      if (cap > 0) t.b_max.assign(static_cast<std::size_t>(std::max(t.world_size, 0)), cap);
    } else {
      t.b_max = f.get<std::vector<int>>("b_max", {});
    }
  }
  f.reject_unknown();
  auto positive = [&](const char* key, long long v) {
    if (v < 1) throw InputError(where + ": " + key + " must be ≥ 1, got " + std::to_string(v));
  };
  positive("world_size", t.world_size);
  positive("global_batch", t.global_batch);
  positive("steps", t.steps);
  if (t.max_length < 2)
    throw InputError(where + ": max_length must be ≥ 2 ([CLS] and [SEP]), got " + std::to_string(t.max_length));
  for (int cap : t.b_max) positive("b_max", cap);
  return t;
}

PolicySpec parse_policy(const nlohmann::json& item, const std::string& where) {
  if (item.is_string()) return parse_policy_spec(item.get<std::string>());
  if (!item.is_object()) throw InputError(where + ": a policy is a string like \"minmax:cost=tokens\" or an object");
  PolicySpec spec;
  for (const auto& [key, value] : item.items()) {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (key == "name")
      spec.name = text;
    else
      spec.options[key] = text;
  }
  if (spec.name.empty()) throw InputError(where + ": policy object needs a \"name\"");
  return spec;
}

}  // namespace

Config parse_config(const nlohmann::json& doc, const std::string& origin, const std::string& base_dir) {
  JsonFields top(doc, origin);
  Config c;
  c.origin = origin;
  if (top.has("data")) c.data = parse_data(top.raw("data"), origin + ": data", base_dir);
  if (top.has("training")) c.training = parse_training(top.raw("training"), origin + ": training");
  if (top.has("policies")) {
    const auto& list = top.raw("policies");
    if (!list.is_array() || list.empty())
      throw InputError(origin + ": policies must be a non-empty array of policy names or objects");
    for (std::size_t i = 0; i < list.size(); ++i)
      c.policies.push_back(parse_policy(list[i], origin + ": policies[" + std::to_string(i) + "]"));
  } else {
    c.policies.push_back(parse_policy_spec("static"));
  }
  top.reject_unknown();
  if (!c.training.b_max.empty() && static_cast<int>(c.training.b_max.size()) != c.training.world_size)
    throw InputError(origin + ": training.b_max lists " + std::to_string(c.training.b_max.size()) +
                     " ranks, world_size is " + std::to_string(c.training.world_size));

  nlohmann::json data = {{"source", c.data.source}};
  if (!c.data.path.empty()) data["path"] = c.data.path;
  if (!c.data.vocab.empty()) data["vocab"] = c.data.vocab;
  if (c.data.source == "lognormal")
    data.update({{"mean", c.data.mean},
                 {"std", c.data.std},
                 {"min", c.data.min},
                 {"max", c.data.max},
                 {"samples", c.data.samples}});
  nlohmann::json policies = nlohmann::json::array();
  for (const auto& p : c.policies) policies.push_back(p.label());
  c.resolved = {{"data", data},
                {"training",
                 {{"world_size", c.training.world_size},
                  {"global_batch", c.training.global_batch},
                  {"steps", c.training.steps},
                  {"max_length", c.training.max_length},
                  {"seed", c.training.seed},
                  {"b_max", c.training.b_max}}},
                {"policies", policies}};
  return c;
}

std::unique_ptr<LengthSource> make_length_source(const DataConfig& d, int max_length) {
  if (d.source == "sst2") return histogram_source(sst2_train_histogram(), max_length);
  if (d.source == "histogram") return histogram_source(histogram_from_json(read_json_file(d.path), d.path), max_length);
  if (d.source == "trace") return trace_source(d.path, max_length);
  if (d.source == "tsv") return tsv_source(d.path, d.vocab, max_length);
  return lognormal_source(d.mean, d.std, d.min, d.max, d.samples, max_length);
}

}  // namespace ddpsim
