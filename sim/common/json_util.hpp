// Strict JSON input: parse errors name file, line and column; objects are read through
// JsonFields, which rejects unknown keys and suggests the closest known one.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace ddpsim {

// Reads and parses a JSON file; throws InputError "FILE:LINE:COL: reason".
nlohmann::json read_json_file(const std::string& path);
// How deep arrays and objects may nest in any JSON ddpsim reads (configs need five levels).
constexpr int MAX_JSON_DEPTH = 64;
// Parses JSON text; `origin` names it in errors.
nlohmann::json parse_json(std::string_view text, const std::string& origin);

// One of ddpsim's JSON files, recognised by its keys: a file given where another was expected
// (a summary.json as a config, sweep.json as a sweep file) is then named as what it is.
enum class FileKind { unknown, config, sweep_file, sweep_grid, summary, validation, perf_model };
FileKind ddpsim_file_kind(const nlohmann::json& doc);

// Throws "PATH is a KIND, not EXPECTED: what to do with it" when `doc` is recognisably another
// of ddpsim's files than `expected`; an unrecognised document is left to the reader's own checks.
void refuse_other_kind(const nlohmann::json& doc, const std::string& path, FileKind expected);

// The known key closest to `key` by edit distance, or "" when none is close.
std::string closest_key(std::string_view key, const std::set<std::string, std::less<>>& known);

// "WHAT is TYPE [VALUE]: expected EXPECTED".
InputError wrong_type(const nlohmann::json& value, const std::string& what, const std::string& expected);

template <class T>
struct is_vector : std::false_type {};
template <class U>
struct is_vector<std::vector<U>> : std::true_type {};

// " (written without a decimal point or exponent)" when `value` is a whole number written as a
// float (1e7, 4.0), which JSON keeps apart from integers: the message then says what to change.
inline std::string integer_spelling(const nlohmann::json& value) {
  if (!value.is_number_float()) return "";
  const double v = value.get<double>();
  return std::isfinite(v) && v == std::floor(v) ? " (written without a decimal point or exponent)" : "";
}

// `value` as a T, exactly: no narrowing, no bool, float or null read as a number, every number
// finite. `what` ("config.json: training: key \"steps\"") names it in the message.
template <class T>
T convert(const nlohmann::json& value, const std::string& what) {
  auto wrong = [&](const std::string& expected) { return wrong_type(value, what, expected); };
  if constexpr (is_vector<T>::value) {
    if (!value.is_array()) throw wrong("an array");
    T out;
    for (std::size_t i = 0; i < value.size(); ++i)
      out.push_back(convert<typename T::value_type>(value[i], what + "[" + std::to_string(i) + "]"));
    return out;
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) throw wrong("true or false");
    return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    const std::string range = "an integer from " + std::to_string(std::numeric_limits<T>::min()) + " to " +
                              std::to_string(std::numeric_limits<T>::max());
    if (value.is_number_unsigned()) {
      const auto v = value.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw wrong(range);
      return static_cast<T>(v);
    }
    if (value.is_number_integer()) {
      const auto v = value.get<std::int64_t>();
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
        throw wrong(range);
      return static_cast<T>(v);
    }
    throw wrong(range + integer_spelling(value));
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!value.is_number() || !std::isfinite(value.get<double>())) throw wrong("a finite number");
    return value.get<T>();
  } else {
    static_assert(std::is_same_v<T, std::string>, "JsonFields reads booleans, numbers, strings and arrays of them");
    if (!value.is_string()) throw wrong("a string");
    return value.get<std::string>();
  }
}

// An integer in [lo, hi], exactly (as convert<T>, with the range in the message).
template <class T>
T convert_in(const nlohmann::json& value, const std::string& what, T lo, T hi) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  const bool integer =
      value.is_number_integer() &&
      (!value.is_number_unsigned() ||
       value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
  const std::int64_t v = integer ? value.get<std::int64_t>() : 0;
  if (!integer || v < static_cast<std::int64_t>(lo) || v > static_cast<std::int64_t>(hi))
    throw wrong_type(value, what,
                     "an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + integer_spelling(value));
  return static_cast<T>(v);
}

// Typed, checked access to one JSON object; `where` ("config.json: training") prefixes errors.
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string where);

  bool has(std::string_view key) const;
  const nlohmann::json& raw(std::string_view key) const;

  // A key given as null is an error like any other wrong type: null is not "the default".
  template <class T>
  T get(std::string_view key, T fallback) const {
    known_.emplace(key);
    auto it = object_.find(key);
    if (it == object_.end()) return fallback;
    return convert<T>(*it, where_ + ": key \"" + std::string(key) + "\"");
  }
  template <class T>
  T require(std::string_view key) const {
    known_.emplace(key);
    auto it = object_.find(key);
    if (it == object_.end()) throw InputError(where_ + ": missing key \"" + std::string(key) + "\"");
    return convert<T>(*it, where_ + ": key \"" + std::string(key) + "\"");
  }
  // An integer in [lo, hi]; a wrong type and a value out of range get one message naming the range.
  template <class T>
  T get_in(std::string_view key, T fallback, T lo, T hi) const {
    known_.emplace(key);
    auto it = object_.find(key);
    return it == object_.end() ? fallback : convert_in(*it, where_ + ": key \"" + std::string(key) + "\"", lo, hi);
  }
  template <class T>
  T require_in(std::string_view key, T lo, T hi) const {
    return convert_in(raw(key), where_ + ": key \"" + std::string(key) + "\"", lo, hi);
  }
  // Throws for any key that no get/require/has asked about (and none of `also_allowed`).
  void reject_unknown(std::initializer_list<std::string_view> also_allowed = {}) const;

  const std::string& where() const { return where_; }

 private:
  const nlohmann::json& object_;
  std::string where_;
  mutable std::set<std::string, std::less<>> known_;
};

}  // namespace ddpsim
