// `ddpsim policies`: every batch policy with its options, their defaults and the values they take,
// read from the policy factory itself (sched/policy_catalogue.hpp), so the list cannot fall behind.
#include <cstdio>
#include <iostream>

#include "cli/options.hpp"
#include "sched/policy_catalogue.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim policies

Lists every batch policy: what it does, then each option as option=default with the values it
takes. Write a policy as name[:option=value]..., e.g. minmax:cost=tokens_sq:buffer=32, in
--policies or a config's "policies" list; options left out take their defaults.
)";

}  // namespace

int policies(const Args& args) {
  po::options_description visible("options");
  visible.add_options()("help,h", "this help");
  po::variables_map vm;
  if (!parse(args, USAGE, visible, {}, {}, vm)) return 0;
  for (const PolicyInfo& p : describe_policies()) {
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
