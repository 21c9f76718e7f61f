#include "sched/policy_catalogue.hpp"

#include "sched/policy_options.hpp"

namespace ddpsim {

const std::vector<std::string>& policy_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const PolicyEntry& p : policy_table()) out.push_back(p.name);
    return out;
  }();
  return names;
}

std::vector<PolicyInfo> describe_policies() {
  std::vector<PolicyInfo> out;
  for (const PolicyEntry& entry : policy_table()) {
    const PolicySpec spec{entry.name, {}, {}};
    PolicyOptions options(spec);
    entry.make(StepShape{}, options);  // the default shape: every option read at its default
    PolicyInfo info{entry.name, entry.summary, {}};
    for (const auto& [key, value] : options.in_force()) {
      const auto values = options.values().find(key);
      info.options.push_back({key, value, values == options.values().end() ? "" : values->second});
    }
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace ddpsim
