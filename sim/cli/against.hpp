// `ddpsim compare --against`: the config beside variants of itself, a column each, so that a
// what-if on the setting (ZeRO-1 or DDP, NVLink or PCIe, 8 or 16 GPUs) gets the table, the
// seeds' range and the prediction interval that a policy's gain gets.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "calib/registration.hpp"
#include "cli/options.hpp"
#include "eval/config.hpp"

namespace ddpsim::cli {

// The --against values, "[LABEL:]KEY=VALUE", as columns in order of first appearance: values
// sharing a LABEL make one column; a value without one is its own column, labelled by itself.
struct AgainstColumn {
  std::string label;
  std::vector<std::string> sets;
};
std::vector<AgainstColumn> against_columns(const std::vector<std::string>& values);

// The options and the config that --against refuses (outputs of one run, a pipeline job, a
// config of several policies), before anything else is checked or run.
void check_against(const po::variables_map& vm, const Config& base);

// compare with --against given: the config's one policy under the config and under each
// variant, the changes and gains against the config's own column, and with --out DIR,
// DIR/summary.json of them; with --print-config, each column's resolved config, by label.
// --register FILE writes the prediction as registered before the runs (ddpsim validate
// --registered FILE --column LABEL scores a column's run against the base's).
int against_verb(const po::variables_map& vm, const Config& base, int replicates, const RegisteredInputs& inputs);

}  // namespace ddpsim::cli
