// The checks parse_command_line runs, in its order; apart so that the option definitions and
// the rules between options can each be read in one sitting.
#pragma once

#include <string>
#include <vector>

#include <boost/program_options/variables_map.hpp>

#include "train/command_line.hpp"

namespace ddptrain {

// The --profile-* lists as written ("auto" or numbers), read only once the mode is known.
struct ProfileText {
  std::string batches = "auto", lengths = "auto", warmup = "auto", bytes = "auto";
};

// Written on the command line, not a default.
bool given(const boost::program_options::variables_map& vm, const char* name);

// Every numeric option in its range, before anything starts: an option out of range is a usage
// error naming it and the range, never a value quietly read as another (0 steps, a negative cap).
void check_ranges(const TrainOptions& o, const boost::program_options::variables_map& vm);

// An option the run would not read is a mistake the user should hear of, not a silent no-op.
void refuse_unused(const boost::program_options::variables_map& vm);

// --policy A,B,...: the policies to train in turn, one step each, in one process (each with its
// own model, optimizer, sampler and dropout stream, writing OUT/<policy>/), so that a machine
// that drifts in speed over minutes gives every policy the same minutes. Each item as given.
std::vector<std::string> split_policies(const std::string& text);

// The options that exclude or need each other, the --profile-* lists, and the output folders.
void check_modes(CommandLine& c, const boost::program_options::variables_map& vm, const ProfileText& grid);

}  // namespace ddptrain
