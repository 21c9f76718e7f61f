// ddptrain's command line: the options, read and checked before any rank starts, so that a
// mistake is one message from one process, not one per rank after a rendezvous.
#pragma once

#include <string>
#include <vector>

#include "train/trainer.hpp"

namespace ddptrain {

struct CommandLine {
  bool help = false, version = false;
  std::string help_text;     // usage and every option, for --help
  std::string write_layout;  // --write-layout FILE: write the model's layout and exit
  TrainOptions train;
  ProfileOptions profile;
  std::vector<std::string> policies;  // --policy split at commas, each item as given
  std::string bmax, backend = "auto", precision = "fp32";
  int nproc = 0, timeout_s = 120, threads = 0;
  bool profiling = false, alongside = false;  // --profile, --profile-alongside
};

// Everything that can be checked from the arguments and the environment alone; throws
// ddpsim::UsageError (or boost's po::error) naming the option.
CommandLine parse_command_line(int argc, char** argv);

// The checks and values that need the number of ranks, known once the launcher's environment
// has been read: --bmax, and a global batch that gives every rank and micro-batch a sample.
void apply_ranks(CommandLine& c, int ranks);

// The folder of one policy of an interleaved run: minmax:cost=model -> OUT/minmax-cost-model.
std::string policy_folder(const std::string& out, const std::string& policy);

}  // namespace ddptrain
