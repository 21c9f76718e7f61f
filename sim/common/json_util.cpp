#include "common/json_util.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <vector>

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
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    std::string what = e.what();
    // Keep nlohmann's reason, drop its "[json.exception.parse_error.101] parse error at ..." prefix.
    const auto colon = what.find(": ", what.find("parse error"));
    const std::string reason = colon == std::string::npos ? what : what.substr(colon + 2);
    throw InputError(origin + ":" + line_col(text, e.byte) + ": invalid JSON: " + reason);
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
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

void JsonFields::reject_unknown(std::initializer_list<std::string_view> also_allowed) const {
  for (auto k : also_allowed) known_.emplace(k);
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
