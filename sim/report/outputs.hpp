// What `ddpsim balance`, `run` and `compare` print and write: the comparison tables,
// steps.csv in the trace schema (docs/method.md, "The trace"; columns not modelled are empty) and
// summary.json ("The summary" there; keys not modelled are null).
#pragma once

#include <cmath>

#include <filesystem>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

using Metadata = std::vector<std::pair<std::string, std::string>>;

// The trace columns every writer emits, in this order; readers look columns up by name.
const std::vector<std::string>& trace_columns();
// Four more columns, written when some step accumulates gradients over micro-batches:
// micro_batches (the count), then micro_sizes, micro_max_lens and micro_tokens (real tokens),
// each a ';'-separated list in training order.
const std::vector<std::string>& micro_batch_columns();
// Packed runs add sq_tokens (Σ s², the attention pairs) and, with micro-batches,
// micro_sq_tokens. A row's fields for the four (a step of one micro-batch: count 1 and its own
// figures):
std::string micro_batch_fields(const RankStep& row);

std::string trace_csv(const std::vector<PolicyRun>& runs, const Metadata& metadata);

// The optional columns a trace carries; the same for the whole file, so known before its rows.
struct TraceColumns {
  bool allreduce = false, concurrent = false, micro = false, packed = false;
  // What the runs' rows need.
  static TraceColumns of(const std::vector<PolicyRun>& runs);
};

// trace_csv() a block of rows at a time, for runs that stream their rows instead of keeping them.
class TraceWriter {
 public:
  // Writes the metadata lines and the header.
  TraceWriter(std::ostream& out, const Metadata& metadata, TraceColumns columns);
  void write(const std::string& policy, std::span<const RankStep> rows);

 private:
  std::ostream& out_;
  TraceColumns c_;
};
// One run's figures as summary.json gives them, `first` the run its changes are against;
// `any_micro`: some run accumulates, so every run has the micro-batch figure.
nlohmann::ordered_json run_figures_json(const PolicyRun& run, const TokenSummary& s, const TokenSummary& first,
                                        bool any_micro);
bool any_micro_batched(const std::vector<TokenSummary>& summaries);
// `provenance` (Config::provenance(), or null): where the model and the network came from.
// `extra`: keys added after "policies" (compare's "replicates", a sweep cell's "gain_predictions").
std::string summary_json(const nlohmann::json& config, const std::vector<PolicyRun>& runs,
                         const std::vector<TokenSummary>& summaries, const nlohmann::json& provenance = nullptr,
                         const nlohmann::ordered_json& extra = nullptr);
// Token-level figures, one row per policy; later rows show their change against the first.
std::string balance_table(const std::vector<PolicyRun>& runs, const std::vector<TokenSummary>& summaries);
// The study's timed figures, one column per policy; with `changes`, later columns show their
// change against the first.
std::string step_table(const std::vector<PolicyRun>& runs, const std::vector<TokenSummary>& summaries, bool changes);

// One number through a printf spec ("%.4f"), for outputs and messages.
std::string format(const char* spec, double value);
// `v` as a table shows it to `digits` decimals, without the sign of a value that rounds to zero
// ("-0.00" reads as a loss where there is none).
inline double shown(double v, int digits) {
  double scale = 1;
  for (int i = 0; i < digits; ++i) scale *= 10;
  return std::abs(v) * scale < 0.5 ? 0.0 : v;
}
// A CSV field, quoted as RFC 4180 says when it holds a comma, quote or line break.
std::string csv_field(const std::string& text);

// Writes both files into `dir` (created if missing); neither appears unless both are written.
void write_outputs(const std::filesystem::path& dir, const std::vector<std::pair<std::string, std::string>>& files);
// Every file written to a temporary beside its target (folders created as needed) before any is
// renamed into place, so a failure leaves none of them, and the previous files removed first, so
// a kill between renames leaves some of the new files but none of the old; write_outputs is this
// for one folder.
void publish(const std::vector<std::pair<std::filesystem::path, std::string>>& files);
// The same, with files already streamed into AtomicFiles (a long run's steps.csv) in the set.
void publish(const std::vector<std::pair<std::filesystem::path, std::string>>& files,
             std::vector<std::unique_ptr<AtomicFile>> written);
// Before the work: refuses (UsageError) output paths that AtomicFile would refuse after it (a
// folder, a device, one of the command's inputs, a path named twice).
void check_outputs(const std::vector<std::filesystem::path>& paths);
// Refuses (UsageError naming `option`) an output path that is an existing folder.
void check_output_path(const std::filesystem::path& path, const std::string& option);

}  // namespace ddpsim
