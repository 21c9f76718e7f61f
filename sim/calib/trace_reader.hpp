// Reads trace CSVs (docs/method.md, "The trace") as written by ddpsim and ddptrain: `# key=value` metadata
// lines, a header, columns by name (order free, extra columns allowed), empty fields for
// missing measurements. Every malformed field is an InputError "FILE:LINE: column C: reason".
#pragma once

#include <map>
#include <optional>
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

// The allreduce ddptrain charged its emulated ranks (metadata "allreduce=modelled: ring alpha-beta
// over X GB/s, Y us per step, ... (no overlap)"): the network a replay of the trace simulates,
// as a pcie ring of two links a step without a shared root. Empty for a trace that measured its
// own allreduce, or records none.
struct ModelledAllreduce {
  double link_GBps = 0, step_latency_us = 0;
  bool overlap = false;
};
std::optional<ModelledAllreduce> modelled_allreduce(const Trace& trace);

// `required` lists columns that must exist (step, rank, batch_size, max_len are always required).
// A trace whose (step, rank) pairs repeat without a policy column is refused: runs are mixed.
Trace read_trace(const std::string& path, const std::vector<std::string>& required = {});

// How a model's source names its traces: each path past the folders all of them share, so that
// ddptrain's DIR/POLICY/steps.csv stay told apart; a lone trace keeps its own folder.
std::string trace_names(const std::vector<Trace>& traces);

}  // namespace ddpsim
