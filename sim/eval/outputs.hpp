// What `ddpsim balance` prints and writes: the comparison table, steps.csv in the trace
// schema (design.md §3.1, timing columns empty) and summary.json (§3.2, timing keys null).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "eval/balance.hpp"
#include "eval/config.hpp"

namespace ddpsim {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// The trace columns every writer emits, in this order; readers look columns up by name.
const std::vector<std::string>& trace_columns();

std::string balance_trace_csv(const std::vector<PolicyRun>& runs, const Metadata& metadata);
std::string balance_summary_json(const Config& config, const std::vector<PolicyRun>& runs,
                                 const std::vector<TokenSummary>& summaries);
// One column per policy; the second and later columns show their change against the first.
std::string balance_table(const std::vector<PolicyRun>& runs, const std::vector<TokenSummary>& summaries);

// Writes both files into `dir` (created if missing); neither appears unless both are written.
void write_outputs(const std::filesystem::path& dir, const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace ddpsim
