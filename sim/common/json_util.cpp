#include "common/json_util.hpp"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "common/input_file.hpp"
#include "common/known_keys.hpp"

namespace ddpsim {

namespace {

// nlohmann reports a byte offset; users need a line and column.
std::string line_col(std::string_view text, std::size_t byte) {
  byte = std::min(byte, text.size());
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i + 1 < byte; ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& origin) {
  // nlohmann keeps the last of duplicate keys; a key given twice is a mistake, so the parse
  // tracks each open object's keys and stops at a repeat.
  // The depth is capped too: nlohmann copies and compares values recursively, so a document
  // nested 100,000 levels deep (a few hundred KB) would overflow the stack later on.
  std::vector<std::set<std::string>> open;
  std::string duplicate;
  bool too_deep = false;
  auto track = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using E = nlohmann::json::parse_event_t;
    if (depth > MAX_JSON_DEPTH) too_deep = true;
    // After the first repeat nlohmann drops what follows, which puts the key sets out of step:
    // the first is the one to name.
    if (too_deep || !duplicate.empty()) return false;
    if (event == E::object_start) open.emplace_back();
    if (event == E::object_end && !open.empty()) open.pop_back();
    if (event == E::key && !open.empty() && !open.back().insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return duplicate.empty();
  };
  // nlohmann reads a NUL byte as the end of the input and would ignore what follows.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos)
    throw InputError(origin + ":" + line_col(text, nul + 1) + ": invalid JSON: a NUL byte (JSON text has none)");
  try {
    auto doc = nlohmann::json::parse(text.begin(), text.end(), track);
    if (too_deep)
      throw InputError(origin + ": invalid JSON: nested deeper than " + std::to_string(MAX_JSON_DEPTH) +
                       " levels of arrays and objects");
    if (!duplicate.empty())
      throw InputError(origin + ": key \"" + duplicate + "\" appears twice in one object (give each key once)");
    return doc;
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // Keep nlohmann's reason, drop its "[json.exception.parse_error.101] parse error at ..." prefix.
    const auto colon = what.find(": ", what.find("parse error"));
    const std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
    throw InputError(origin + ":" + line_col(text, e.byte) + ": invalid JSON: " + reason);
  } catch (const nlohmann::json::out_of_range& e) {
    // A number beyond a double's range (1e999): nlohmann names the number but not where.
    std::string what = e.what();
    const auto bracket = what.find("] ");
    throw InputError(origin + ": invalid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2)) +
                     " (numbers must fit a double)");
  }
}

nlohmann::json read_json_file(const std::string& path) {
  return parse_json(read_input_file(path, "JSON file"), path);
}

InputError wrong_type(const nlohmann::json& value, const std::string& what, const std::string& expected) {
  std::string got = value.type_name();
  // The value itself where it is short enough to read in one line of the message.
  const std::string dumped = value.is_string() || value.is_null() ? "" : value.dump();
  if (!dumped.empty() && dumped.size() <= 40) got.append(" ").append(dumped);
  return InputError(what + " is " + got + ": expected " + expected);
}

FileKind ddpsim_file_kind(const nlohmann::json& doc) {
  if (!doc.is_object()) return FileKind::unknown;
  const auto has = [&](const char* key) { return doc.contains(key); };
  if (doc.value("format", nlohmann::json()) == "ddpsim-sweep/1") return FileKind::sweep_grid;
  if (has("axes") || has("zip")) return FileKind::sweep_file;
  if (has("config") && has("policies") && doc["policies"].is_object()) return FileKind::summary;
  if (has("measured") && has("model") && has("policies")) return FileKind::validation;
  if (has("forward_ms") || has("backward_ms") || has("hf_config")) return FileKind::perf_model;
  for (const char* key : {"training", "data", "platform", "simulation", "parallel"})
    if (has(key)) return FileKind::config;
  return FileKind::unknown;
}

void refuse_other_kind(const nlohmann::json& doc, const std::string& path, FileKind expected) {
  const FileKind kind = ddpsim_file_kind(doc);
  if (kind == FileKind::unknown || kind == expected) return;
  const auto name = [](FileKind k) -> std::string {
    switch (k) {
      case FileKind::config: return "a config";
      case FileKind::sweep_file: return "a sweep file";
      case FileKind::sweep_grid: return "the grid record a sweep writes into its output folder";
      case FileKind::summary: return "a run's summary.json";
      case FileKind::validation: return "a validation report";
      case FileKind::perf_model: return "a performance model";
      case FileKind::unknown: break;
    }
    return "a JSON file";
  };
  const auto use = [](FileKind k) -> std::string {
    switch (k) {
      case FileKind::config: return "`ddpsim run` runs it, and a sweep names it as its \"base\"";
      case FileKind::sweep_file: return "`ddpsim sweep` runs it";
      case FileKind::sweep_grid:
        return "it lists the cells of a sweep by hash; the sweep file that made it names their base config";
      case FileKind::summary: return "its \"config\" key holds the config that run resolved";
      case FileKind::validation: return "`ddpsim validate` wrote it";
      case FileKind::perf_model: return "a config names it as its \"model\"";
      case FileKind::unknown: break;
    }
    return "";
  };
  throw InputError(path + " is " + name(kind) + ", not " + name(expected) + ": " + use(kind));
}

std::string closest_key(std::string_view key, const std::set<std::string, std::less<>>& known) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, key.size() / 3) + 1;
  for (const auto& candidate : known) {
    const std::size_t d = edit_distance(key, candidate);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
  }
  return best;
}

JsonFields::JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) throw InputError(where_ + ": expected a JSON object, got " + object_.type_name());
}

bool JsonFields::has(std::string_view key) const {
  known_.emplace(key);
  return object_.contains(key);
}

const nlohmann::json& JsonFields::raw(std::string_view key) const {
  known_.emplace(key);
  auto it = object_.find(key);
  if (it == object_.end()) throw InputError(where_ + ": missing key \"" + std::string(key) + "\"");
  return *it;
}

namespace {
KnownKeysRecorder* recorder = nullptr;
}  // namespace

KnownKeysRecorder::KnownKeysRecorder(std::string origin) : origin_(std::move(origin)) {
  if (recorder) throw std::logic_error("KnownKeysRecorder: one at a time");
  recorder = this;
}

KnownKeysRecorder::~KnownKeysRecorder() { recorder = nullptr; }

void KnownKeysRecorder::add(const std::string& where, const std::set<std::string, std::less<>>& known) {
  if (where.compare(0, origin_.size(), origin_) != 0) return;  // another document: a model, a platform file
  // "ORIGIN: simulation: stragglers[2]" -> "simulation.stragglers[]"
  std::string path;
  for (std::size_t i = origin_.size(); i < where.size();) {
    if (where.compare(i, 2, ": ") == 0) {
      if (!path.empty()) path += '.';
      i += 2;
    } else if (where[i] == '[') {
      path += "[]";
      i = where.find(']', i);
      i = i == std::string::npos ? where.size() : i + 1;
    } else {
      path += where[i++];
    }
  }
  keys_[path].insert(known.begin(), known.end());
}

void JsonFields::reject_unknown(std::initializer_list<std::string_view> also_allowed) const {
  for (auto k : also_allowed) known_.emplace(k);
  if (recorder) recorder->add(where_, known_);
  for (const auto& [key, value] : object_.items()) {
    if (known_.count(key)) continue;
    std::string message = where_ + ": unknown key \"" + key + "\"";
    const std::string hint = closest_key(key, known_);
    message += hint.empty() ? " (known: " : " (did you mean \"" + hint + "\"? known: ";
    bool first = true;
    for (const auto& k : known_) {
      message += (first ? "" : ", ") + k;
      first = false;
    }
    throw InputError(message + ")");
  }
}

}  // namespace ddpsim
