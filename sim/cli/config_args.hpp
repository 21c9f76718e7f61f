// The options every config-driven verb shares (CONFIG, --set, --policies, --steps,
// --print-config) and the one way they turn into a validated Config.
#pragma once

#include <functional>

#include "cli/options.hpp"
#include "eval/config.hpp"

namespace ddpsim::cli {

void add_config_options(po::options_description& visible, po::options_description& hidden,
                        po::positional_options_description& positional);
// The config named on the command line (or the embedded default) with the overrides applied;
// `adjust`, if given, edits the document last, before it is validated. Its notes go to stderr
// unless `print_notes` is false (the caller then says them, from Config::notes).
Config load_config(const po::variables_map& vm, const std::function<void(nlohmann::json&)>& adjust = {},
                   bool print_notes = true);
// --print-config: prints the resolved config and returns true (the verb then does nothing
// else); an output option given with it is refused rather than silently ignored.
bool print_config(const po::variables_map& vm, const Config& config);

}  // namespace ddpsim::cli
