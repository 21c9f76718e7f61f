// The ddpsim verbs. Each takes its own arguments (argv after the verb), returns the exit
// code, and throws InputError / UsageError for main to report.
#pragma once

#include <string>
#include <vector>

namespace ddpsim::cli {

using Args = std::vector<std::string>;

int balance(const Args& args);
int run(const Args& args);
int compare(const Args& args);
int sweep(const Args& args);
int calibrate(const Args& args);
int replay(const Args& args);
int validate(const Args& args);
int scorecard(const Args& args);
int bench(const Args& args);
int lengths(const Args& args);
int policies(const Args& args);

}  // namespace ddpsim::cli
