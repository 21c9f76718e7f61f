// ddpsim: evaluates per-step batch schedulers for synchronous data-parallel training offline.
// Dispatches to a verb; every error ends as one line on stderr and exit 1 (input) or 2 (usage).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <utility>

#include <boost/program_options/errors.hpp>

#include "cli/commands.hpp"
#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "ddpsim_version.hpp"

namespace {

constexpr const char* USAGE = R"(ddpsim — what-if evaluation of batch schedulers for data-parallel (DDP) training

usage: ddpsim <command> [options]        ddpsim <command> --help  explains one command
       ddpsim --version                  names this build

commands:
  run [CONFIG]              simulate DDP training steps on SimGrid (compute from a performance
                            model, bucketed allreduce overlapping backward); no CONFIG = the
                            study's setting on 4x RTX 3090 over PCIe
  compare [CONFIG] --policies a,b,...
                            the same, one column per policy with changes against the first
  sweep SWEEP.json --out DIR [--jobs N] [--shard I/N]
                            what-if grids over config keys: every cell in parallel worker
                            processes, resumable, sharded for cluster array jobs; results.csv
  calibrate TRACE... --out MODEL.json
                            fit a performance model to profiled traces (ddptrain's)
  replay TRACE --model M    simulate exactly the batches a trace recorded
  validate --measured TRACE --model M [--baseline STATIC_TRACE]
                            predicted vs measured step time, and the policy's gain
  scorecard DIR...          every validated and registered prediction under the folders:
                            coverage of the prediction intervals, widths and errors
  balance [CONFIG]          run batch policies over N steps and compare the per-rank padded
                            tokens (the study's proxy for step time); no CONFIG = the study's
                            setting: SST-2 lengths, G=4 ranks, B=48, K=64, 800 steps
  bench [--json]            scheduler decision latency (G = 4 … 1024) and simulator speed
  lengths TSV --vocab V --out HIST.json
                            tokenize a GLUE TSV (BERT uncased WordPiece), write a length histogram
  policies [NAME...]        every batch policy (or those named), its options, defaults, values

exit codes: 0 success, 1 bad input (file, key, value), 2 bad usage
)";

// The verbs in the order --help lists them.
using Verb = int (*)(const ddpsim::cli::Args&);
const std::pair<const char*, Verb> VERBS[] = {{"run", ddpsim::cli::run},
                                              {"compare", ddpsim::cli::compare},
                                              {"sweep", ddpsim::cli::sweep},
                                              {"calibrate", ddpsim::cli::calibrate},
                                              {"replay", ddpsim::cli::replay},
                                              {"validate", ddpsim::cli::validate},
                                              {"scorecard", ddpsim::cli::scorecard},
                                              {"balance", ddpsim::cli::balance},
                                              {"bench", ddpsim::cli::bench},
                                              {"lengths", ddpsim::cli::lengths},
                                              {"policies", ddpsim::cli::policies}};

std::string verb_names() {
  std::string names;
  for (const auto& entry : VERBS) {
    if (!names.empty()) names += ", ";
    names += entry.first;
  }
  return names;
}

// A report lost to a full disk (> /dev/full) is a failure, not a success.
int flushed(const std::string& verb, int code) {
  std::cout.flush();
  if (std::fflush(stdout) == 0 && !std::ferror(stdout) && std::cout) return code;
  std::cerr << "ddpsim " << verb << ": cannot write to standard output (" << std::strerror(errno) << ")\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "ddpsim: missing command (" << verb_names() << "; see ddpsim --help)\n";
    return 2;
  }
  const bool help = !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help");
  // `ddpsim help COMMAND` is that command's --help; anything else after --help or --version is a mistake.
  if (help && argc >= 3) {
    for (const auto& [name, run] : VERBS)
      if (!std::strcmp(argv[2], name) && argc == 3) return flushed(name, run({"--help"}));
    const bool known = std::any_of(std::begin(VERBS), std::end(VERBS),
                                   [&](const auto& verb) { return !std::strcmp(argv[2], verb.first); });
    if (!known)
      std::cerr << "ddpsim: help: unknown command \"" << argv[2] << "\" (commands: " << verb_names() << ")\n";
    else
      std::cerr << "ddpsim: help " << argv[2] << " takes nothing after it, got \"" << argv[3]
                << "\" (the command's options: ddpsim " << argv[2] << " --help)\n";
    return 2;
  }
  if ((help || !std::strcmp(argv[1], "--version")) && argc > 2) {
    std::cerr << "ddpsim: " << argv[1] << " takes nothing after it, got \"" << argv[2]
              << "\" (commands: " << verb_names() << "; a command's help: ddpsim COMMAND --help)\n";
    return 2;
  }
  if (help) {
    std::cout << USAGE;
    return flushed("--help", 0);
  }
  if (!std::strcmp(argv[1], "--version")) {
    std::cout << "ddpsim " << DDPSIM_VERSION_STRING << "\n";
    return flushed("--version", 0);
  }
  const std::string verb = argv[1];
  ddpsim::install_interrupt_handler(("ddpsim " + verb.substr(0, 32)).c_str());
  const ddpsim::cli::Args args(argv + 2, argv + argc);
  try {
    for (const auto& [name, run] : VERBS)
      if (verb == name) return flushed(verb, run(args));
    std::cerr << "ddpsim: unknown command \"" << verb << "\" (commands: " << verb_names() << "; see ddpsim --help)\n";
    return 2;
  } catch (const ddpsim::UsageError& e) {
    std::cerr << "ddpsim " << verb << ": " << e.what() << " (see ddpsim " << verb << " --help)\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "ddpsim " << verb << ": " << e.what() << " (see ddpsim " << verb << " --help)\n";
    return 2;
  } catch (const ddpsim::InputError& e) {
    std::cerr << "ddpsim " << verb << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ddpsim " << verb << ": internal error: " << e.what() << "\n";
    return 1;
  }
}
