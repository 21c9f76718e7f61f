// Boost.Program_options glue shared by the verbs: parse, print --help, reject extras.
#pragma once

#include <iostream>

#include <boost/program_options.hpp>

#include "cli/commands.hpp"

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
  return true;
}

}  // namespace ddpsim::cli
