// The policies a name selects: one table that the factory, its messages and `ddpsim policies`
// all read, so a new policy is listed wherever policies are named once it is registered there.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sched/scheduler.hpp"

namespace ddpsim {

class PolicyOptions;

struct PolicyEntry {
  const char* name;
  const char* summary;  // one line: what the policy does
  std::unique_ptr<Scheduler> (*make)(const StepShape& shape, PolicyOptions& options);
};
std::span<const PolicyEntry> policy_table();

struct PolicyOptionInfo {
  std::string key, default_value, values;  // values: "exact | enumerate", "integer from 1 to 64", or ""
};
struct PolicyInfo {
  std::string name, summary;
  std::vector<PolicyOptionInfo> options;
};
// Every policy with each option it reads, at its default: found by building the policy at the
// default StepShape, so the list is what the parser itself accepts.
std::vector<PolicyInfo> describe_policies();

}  // namespace ddpsim
