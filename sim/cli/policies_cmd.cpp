// `ddpsim policies`: every batch policy with its options, their defaults and the values they take,
// read from the policy factory itself (sched/policy_catalogue.hpp), so the list cannot fall behind.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/options.hpp"
#include "sched/policy_catalogue.hpp"
#include "sched/scheduler.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim policies [NAME...]

Lists every batch policy (or those named): what it does, then each option as option=default
with the values it takes. Write a policy as name[:option=value]..., e.g.
minmax:cost=tokens_sq:buffer=32, in --policies or a config's "policies" list; options left out
take their defaults.
)";

}  // namespace

int policies(const Args& args) {
  po::options_description visible("options");
  visible.add_options()("help,h", "this help");
  po::options_description hidden;
  hidden.add_options()("name", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("name", -1);
  po::variables_map vm;
  if (!parse(args, USAGE, visible, hidden, positional, vm)) return 0;
  const auto named = vm.count("name") ? vm["name"].as<std::vector<std::string>>() : std::vector<std::string>{};
  for (const std::string& name : named) require_known_policy(name);
  for (const PolicyInfo& p : describe_policies()) {
    if (!named.empty() && std::find(named.begin(), named.end(), p.name) == named.end()) continue;
    std::printf("%-14s%s\n", p.name.c_str(), p.summary.c_str());
    for (const PolicyOptionInfo& o : p.options) {
      const std::string setting = o.key + "=" + o.default_value;
      std::printf("    %-24s%s\n", setting.c_str(), o.values.c_str());
    }
  }
  std::printf("\nexample: ddpsim compare --policies static,minmax:cost=tokens_sq:buffer=32,kk\n");
  return 0;
}

}  // namespace ddpsim::cli
