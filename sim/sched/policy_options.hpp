// Typed access to a policy's string options with the same strictness as config keys:
// every option a policy does not read is an error that suggests the closest known one.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "sched/scheduler.hpp"

namespace ddpsim {

class PolicyOptions {
 public:
  explicit PolicyOptions(const PolicySpec& spec) : spec_(spec) {}

  // `choices` are the values the policy accepts, as `ddpsim policies` lists them; the policy
  // still checks the value itself, with a message of its own.
  std::string text(const std::string& key, const std::string& fallback, const std::vector<std::string>& choices = {});
  // The option as an integer in [minimum, maximum] (the maximum keeps memory and time bounded).
  int integer(const std::string& key, int fallback, int minimum, int maximum = 1000000);
  void reject_unknown() const;
  // Says how an option's default follows the step's shape ("twice max_length"), in values().
  void note_default(const std::string& key, const std::string& how) { values_[key] += "; default " + how; }
  // Every option read so far at the value in force: the given one (integers normalised) or the default.
  const std::map<std::string, std::string>& in_force() const { return in_force_; }
  // Every option read so far with the values it takes ("exact | enumerate", "integer from 1 to 64").
  const std::map<std::string, std::string>& values() const { return values_; }

 private:
  const PolicySpec& spec_;
  std::set<std::string, std::less<>> known_;
  std::map<std::string, std::string> in_force_;
  std::map<std::string, std::string> values_;
};

}  // namespace ddpsim
