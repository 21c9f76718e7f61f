// What `ddpsim replay` and `validate` share: their options, the config a trace is replayed
// under, and the lines that say where a replay's model and network came from.
#pragma once

#include <initializer_list>
#include <string>

#include "calib/trace_reader.hpp"
#include "cli/options.hpp"
#include "eval/config.hpp"

namespace ddpsim::cli {

// The config of load_config() with --model in force (a model file is taken from the current
// folder, not the config's) and the trace's world size and step count, so that rank_speed and
// stragglers are checked against its ranks and steps. What the trace fixes itself (steps,
// batches, micro-batches, lengths, policies, data) cannot be set: replay would ignore it.
// A --warmup or --training-warmup value: a number of steps ≥ 0, or auto (AUTO_WARMUP).
int parse_warmup(const std::string& option, const std::string& text);

Config config_for_trace(const po::variables_map& vm, const Trace& trace);

void add_replay_options(po::options_description& visible, po::options_description& hidden,
                        po::positional_options_description& positional);

// The share of the traces' rank-steps whose shape lies beyond the model's measured range, and
// the note saying so ("" when none does): a replay there is the model's extrapolation.
struct Extrapolation {
  double pct = 0;
  std::string text;  // the sentence, kept with the outputs' provenance
  std::string note() const { return text.empty() ? "" : "note: " + text + "\n\n"; }
};
Extrapolation extrapolation(const PerfModel& model, std::initializer_list<const Trace*> traces);

// Where the model's figures and the network's came from: a prediction is only as good as them,
// and a model calibrated with an allreduce profile brings its own network; then the gradients
// in force, beside the dtype the trace recorded where it did.
std::string platform_line(const Config& config, const Trace& trace);

// Where the trace names the model it trained ("# model=") and the performance model was
// calibrated on traces of others: a sentence saying so, since its times are another model's
// (a tiny model's run against a small model's surface is off by an order of magnitude); else "".
std::string trained_other_model(const PerfModel& model, const Trace& trace);

// Why `trace`'s times are another machine's than `model`'s, where its "# cpu=" or "# blas=" is
// none of the model's calibration traces' (ddptrain and ddpsim.torch write both on a CPU); "" else.
std::string ran_on_other_machine(const PerfModel& model, const Trace& trace);

}  // namespace ddpsim::cli
