// Boost.Program_options glue shared by the verbs: parse, print --help, reject extras.
#pragma once

#include <algorithm>
#include <cctype>
#include <iostream>

#include <boost/program_options.hpp>

#include "cli/commands.hpp"
#include "common/error.hpp"

namespace ddpsim::cli {

namespace po = boost::program_options;

// Parses `args`; returns false after printing help when --help was given.
inline bool parse(const Args& args, const std::string& usage, const po::options_description& visible,
                  const po::options_description& hidden, const po::positional_options_description& positional,
                  po::variables_map& vm) {
  po::options_description all;
  all.add(visible).add(hidden);
  po::store(po::command_line_parser(args).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << usage << "\n" << visible << "\n";
    return false;
  }
  po::notify(vm);
  // An empty path would quietly mean "here" (`--out ''` writing into the current folder).
  for (const auto& [name, value] : vm) {
    const auto* text = boost::any_cast<std::string>(&value.value());
    if (!text || !text->empty() || all.find(name, false).semantic()->max_tokens() == 0) continue;  // a flag
    std::string shown = "--" + name;
    for (unsigned i = 0; i < std::min(positional.max_total_count(), 4u); ++i)
      if (positional.name_for_position(i) == name) {
        shown = name;
        for (char& c : shown) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      }
    throw UsageError(shown + ": empty value");
  }
  return true;
}

}  // namespace ddpsim::cli
