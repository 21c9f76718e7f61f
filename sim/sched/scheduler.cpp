#include "sched/scheduler.hpp"

#include <algorithm>
#include <charconv>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "sched/policy_options.hpp"

namespace ddpsim {

std::string PolicySpec::label() const {
  std::string out = name;
  for (const auto& [key, value] : options) out += ":" + key + "=" + value;
  return out;
}

PolicySpec parse_policy_spec(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t begin = 0;;) {
    const auto end = text.find(':', begin);
    parts.push_back(text.substr(begin, end == std::string_view::npos ? end : end - begin));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  PolicySpec spec;
  spec.name = std::string(parts[0]);
  if (spec.name.empty()) throw InputError("policy \"" + std::string(text) + "\": missing policy name");
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == parts[i].size())
      throw InputError("policy \"" + std::string(text) + "\": option \"" + std::string(parts[i]) +
                       "\" must look like key=value");
    const std::string key(parts[i].substr(0, eq));
    if (spec.options.count(key))
      throw InputError("policy \"" + std::string(text) + "\": option " + key + " is given twice");
    spec.options[key] = std::string(parts[i].substr(eq + 1));
  }
  return spec;
}

std::vector<int> even_micro_sizes(int b, int count) {
  const int n = std::max(1, std::min(count, b));
  std::vector<int> sizes(static_cast<std::size_t>(n), b / n);
  for (int i = 0; i < b % n; ++i) ++sizes[static_cast<std::size_t>(i)];
  return sizes;
}

std::string PolicyOptions::text(const std::string& key, const std::string& fallback,
                                const std::vector<std::string>& choices) {
  known_.insert(key);
  std::string& values = values_[key];
  for (const auto& c : choices) values += (values.empty() ? "" : " | ") + c;
  auto it = spec_.options.find(key);
  return in_force_[key] = it == spec_.options.end() ? fallback : it->second;
}

int PolicyOptions::integer(const std::string& key, int fallback, int minimum, int maximum) {
  known_.insert(key);
  values_[key] = "integer from " + std::to_string(minimum) + " to " + std::to_string(maximum);
  auto it = spec_.options.find(key);
  if (it == spec_.options.end()) {
    in_force_[key] = std::to_string(fallback);
    return fallback;
  }
  if (spec_.quoted.count(key))
    throw InputError("policy " + spec_.label() + ": option " + key + " is an integer from " + std::to_string(minimum) +
                     " to " + std::to_string(maximum) + ", got the string \"" + it->second + "\" (write it unquoted)");
  int value = 0;
  const auto& s = it->second;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || value < minimum || value > maximum)
    throw InputError("policy " + spec_.label() + ": option " + key + " must be an integer from " +
                     std::to_string(minimum) + " to " + std::to_string(maximum) + ", got \"" + s + "\"");
  in_force_[key] = std::to_string(value);
  return value;
}

void PolicyOptions::reject_unknown() const {
  for (const auto& [key, value] : spec_.options) {
    if (known_.count(key)) continue;
    std::string message = "policy " + spec_.name + ": unknown option \"" + key + "\"";
    const std::string hint = closest_key(key, known_);
    if (!hint.empty()) message += " (did you mean \"" + hint + "\"?)";
    std::string list;
    for (const auto& k : known_) list += (list.empty() ? "" : ", ") + k;
    throw InputError(message + (list.empty() ? "; it takes no options" : "; known: " + list));
  }
}

}  // namespace ddpsim
