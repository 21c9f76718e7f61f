// Strict JSON input: parse errors name file, line and column; objects are read through
// JsonFields, which rejects unknown keys and suggests the closest known one.
#pragma once

#include <initializer_list>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace ddpsim {

// Reads and parses a JSON file; throws InputError "FILE:LINE:COL: reason".
nlohmann::json read_json_file(const std::string& path);
// Parses JSON text; `origin` names it in errors.
nlohmann::json parse_json(std::string_view text, const std::string& origin);

// The known key closest to `key` by edit distance, or "" when none is close.
std::string closest_key(std::string_view key, const std::set<std::string, std::less<>>& known);

// Typed, checked access to one JSON object; `where` ("config.json: training") prefixes errors.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string where);

  bool has(std::string_view key) const;
  const nlohmann::json& raw(std::string_view key) const;

  template <class T>
  T get(std::string_view key, T fallback) const {
    known_.emplace(key);
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return fallback;
    return convert<T>(key, *it);
  }
  template <class T>
  T require(std::string_view key) const {
    known_.emplace(key);
    auto it = object_.find(key);
    if (it == object_.end()) throw InputError(where_ + ": missing key \"" + std::string(key) + "\"");
    return convert<T>(key, *it);
  }
  // Throws for any key that no get/require/has asked about (and none of `also_allowed`).
  void reject_unknown(std::initializer_list<std::string_view> also_allowed = {}) const;

  const std::string& where() const { return where_; }

 private:
  template <class T>
  T convert(std::string_view key, const nlohmann::json& value) const {
    try {
      return value.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw InputError(where_ + ": key \"" + std::string(key) + "\" has the wrong type (" + value.type_name() +
                       "): expected " + expected_name<T>());
    }
  }
  template <class T>
  static const char* expected_name();

  const nlohmann::json& object_;
  std::string where_;
  mutable std::set<std::string, std::less<>> known_;
};

template <class T>
const char* JsonFields::expected_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "a boolean";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else
    return "another type";
}

}  // namespace ddpsim
