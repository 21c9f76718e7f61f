// The figures of a registration, checked before any of them is scored: a prediction.json edited
// by hand or cut short is refused naming its key, never half-reported and then failed.
#include "calib/registration_schema.hpp"

#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {

// A registration's keys are written as a dotted path in errors, a key quoted where it holds a dot,
// colon, equals sign or space ("predicted.policies.\"minmax:cost=tokens\".gain").
class Where {
 public:
  Where(std::string file, std::string path) : file_(std::move(file)), path_(std::move(path)) {}

  Where operator/(const std::string& key) const {
    const bool plain = key.find_first_of(".:= ") == std::string::npos;
    return {file_, path_ + (path_.empty() ? "" : ".") + (plain ? key : "\"" + key + "\"")};
  }
  std::string text() const { return path_.empty() ? file_ : file_ + ": key " + path_; }

  const nlohmann::json& at(const nlohmann::json& doc, const std::string& key) const {
    if (!doc.is_object()) throw wrong_type(doc, text(), "an object");
    if (!doc.contains(key))
      throw InputError((*this / key).text() + " is missing (a registration is written by ddpsim compare --register)");
    return doc[key];
  }

 private:
  std::string file_, path_;
};

template <class T>
T read(const nlohmann::json& doc, const Where& where, const std::string& key) {
  return convert<T>(where.at(doc, key), (where / key).text());
}

// [low, high] with low <= high: an interval as compare --register writes it.
std::vector<double> interval(const nlohmann::json& doc, const Where& where, const std::string& key) {
  const auto bounds = read<std::vector<double>>(doc, where, key);
  if (bounds.size() != 2 || bounds[0] > bounds[1])
    throw InputError((where / key).text() + ": expected [low, high] with low <= high");
  return bounds;
}

void check_gain(const nlohmann::json& gain, const Where& where) {
  const double g = read<double>(gain, where, "gain_pct");
  interval(gain, where, "seeds_interval");
  const auto prediction = interval(gain, where, "prediction_interval");
  read<std::string>(gain, where, "mostly");
  if (gain.contains("regime")) read<std::string>(gain, where, "regime");
  if (gain.contains("per_sample")) read<bool>(gain, where, "per_sample");
  // compare widens the interval around the gain: a gain outside its own was edited since.
  if (g < prediction[0] || g > prediction[1])
    throw InputError((where / "gain_pct").text() + " is " + format("%g", g) +
                     ", outside its own prediction_interval: the file was edited since it was registered");
}

void check_setting(const nlohmann::json& doc, const Where& where) {
  const auto& setting = where.at(doc, "setting");
  const Where s = where / "setting";
  for (const char* key : {"world_size", "global_batch", "max_length", "seed", "steps", "pad_to_multiple_of"})
    if (const auto& value = s.at(setting, key); !value.is_number_unsigned())
      throw wrong_type(value, (s / key).text(), "a whole number, as compare --register writes it");
  read<std::string>(setting, s, "attention");
  if (read<std::vector<std::string>>(setting, s, "policies").empty())
    throw InputError((s / "policies").text() + ": expected the registered policies, the baseline first");
}

}  // namespace

void check_registration_figures(const nlohmann::json& doc, const std::string& file) {
  const Where root(file, "");
  check_setting(doc, root);
  const auto policies = doc["setting"]["policies"].get<std::vector<std::string>>();
  const Where config = root / "config";
  const auto& cfg = root.at(doc, "config");
  if (!root.at(cfg, "file").is_null()) read<std::string>(cfg, config, "file");
  if (cfg.contains("set"))
    for (const std::string& assignment : read<std::vector<std::string>>(cfg, config, "set"))
      if (assignment.find('=') == std::string::npos)
        throw InputError((config / "set").text() + ": \"" + assignment + "\" is not KEY=VALUE");
  const Where predicted = root / "predicted";
  const auto& figures = root.at(doc, "predicted");
  std::vector<std::string> labels = policies;  // what predicted's figures are keyed by, the baseline first
  const bool columns = doc["setting"].contains("columns");
  if (columns) {
    const Where setting = root / "setting" / "columns";
    const auto& by_column = doc["setting"]["columns"];
    if (!by_column.is_object() || by_column.size() < 2)
      throw InputError(setting.text() + ": expected the base column and one or more against it");
    // JSON objects keep no order: the base column is the one predicted.baseline names.
    if (policies.size() != 1)
      throw InputError((root / "setting" / "policies").text() + ": configs against each other run one policy, not " +
                       std::to_string(policies.size()));
    labels = {read<std::string>(figures, predicted, "baseline")};
    if (!by_column.contains(labels.front()))
      throw InputError((predicted / "baseline").text() + " is \"" + labels.front() + "\", not a column of " +
                       setting.text());
    for (const auto& [label, want] : by_column.items()) {
      for (const char* key : {"world_size", "global_batch", "seed", "steps", "max_length", "pad_to_multiple_of"})
        if (const auto& value = (setting / label).at(want, key); !value.is_number_unsigned())
          throw wrong_type(value, (setting / label / key).text(), "a whole number, as compare --register writes it");
      for (const char* key : {"attention", "data_parallel"}) read<std::string>(want, setting / label, key);
      if (want.contains("zero_partition")) read<std::string>(want, setting / label, "zero_partition");
      if (label != labels.front()) labels.push_back(label);
    }
  }
  if (figures.contains("baseline") && read<std::string>(figures, predicted, "baseline") != labels.front())
    throw InputError((predicted / "baseline").text() + " is \"" + figures["baseline"].get<std::string>() +
                     "\", not the first registered " + (columns ? "column" : "policy") + " \"" + labels.front() + "\"");
  const Where each = predicted / (columns ? "columns" : "policies");
  const auto& by_label = predicted.at(figures, columns ? "columns" : "policies");
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const Where p = each / labels[i];
    const auto& own = each.at(by_label, labels[i]);
    read<double>(p.at(own, "mean_max_step_ms"), p / "mean_max_step_ms", "mean");
    // Registered before step times had an interval, or before the tail was scored: optional.
    if (own.contains("step")) interval(own["step"], p / "step", "prediction_interval_ms");
    if (own.contains("p95_max_step_ms")) read<double>(own["p95_max_step_ms"], p / "p95_max_step_ms", "mean");
    if (i > 0) check_gain(p.at(own, "gain"), p / "gain");
  }
}

}  // namespace ddpsim
