// `ddpsim scorecard DIR...`: every validated and registered prediction under the folders, scored
// in one Markdown table (calib/scorecard.hpp).
#include <iostream>

#include "calib/scorecard.hpp"
#include "cli/options.hpp"
#include "common/atomic_file.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim scorecard DIR... [--out FILE.md]

Reads every validation.json (ddpsim validate) and every registered prediction (ddpsim compare
--register) under the folders and prints, in Markdown, by campaign (a validation's folder above
its policy's) and compute regime: the gains compared, how many measured gains fell inside their
prediction interval (its coverage; 95% is what it states), how many predicted gains fell inside
the measured interval, the median interval width, and the mean and 95th-percentile gain
errors; then each registered prediction against its run, and those still awaiting one.

examples:
  ddpsim scorecard traces
  ddpsim scorecard traces/cpu traces/h100 --out docs/scorecard.md
)";

}  // namespace

int scorecard(const Args& args) {
  po::options_description visible("options"), hidden;
  visible.add_options()("out", po::value<std::string>(), "write the Markdown to FILE.md instead of printing it")(
      "help,h", "this help");
  hidden.add_options()("dir", po::value<std::vector<std::string>>());
  po::positional_options_description positional;
  positional.add("dir", -1);
  po::variables_map vm;
  if (!parse(args, USAGE, visible, hidden, positional, vm)) return 0;
  if (!vm.count("dir")) throw UsageError("give at least one folder to read (e.g. traces)");
  if (vm.count("out")) check_outputs({vm["out"].as<std::string>()});
  const std::string text = ddpsim::scorecard(vm["dir"].as<std::vector<std::string>>());
  if (!vm.count("out")) {
    std::cout << text;
    return 0;
  }
  write_file_atomically(vm["out"].as<std::string>(), text);
  std::cout << "wrote " << vm["out"].as<std::string>() << "\n";
  return 0;
}

}  // namespace ddpsim::cli
