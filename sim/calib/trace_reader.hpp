// Reads trace CSVs (docs/method.md, "The trace") as written by ddpsim and ddptrain: `# key=value` metadata
// lines, a header, columns by name (order free, extra columns allowed), empty fields for
// missing measurements. Every malformed field is an InputError "FILE:LINE: column C: reason".
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/policy_run.hpp"

namespace ddpsim {

struct Trace {
  std::string path;
  std::string hash;  // FNV-1a 64 of the file's bytes, hex: names the exact file a model came from
  std::map<std::string, std::string> metadata;
  std::vector<std::string> columns;
  // One run per policy in file order; rows step-major then rank, every rank of a step present.
  std::vector<PolicyRun> runs;
  long rows = 0;
};

// `required` lists columns that must exist (step, rank, batch_size, max_len are always required).
// A trace whose (step, rank) pairs repeat without a policy column is refused: runs are mixed.
Trace read_trace(const std::string& path, const std::vector<std::string>& required = {});

}  // namespace ddpsim
