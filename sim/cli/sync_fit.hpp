// calibrate --training's sync cost: how much longer a training run's ranks waited for their
// gradients than the calibrated model replays them. PyTorch DDP finalises the gradients after the
// last bucket (on a CPU, the copy out of the buckets), which a profile of forward, backward and the
// bare allreduce never times: on a 2-core Intel VM replays of its runs waited 16-31 ms a step too
// little, in every phase but that one within 10%.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/trace_reader.hpp"
#include "calib/warmup.hpp"

namespace ddpsim::cli {

struct SyncFit {
  long rank_steps = 0;  // the steps after each process's warm-up of the runs that measured their own comm wait
  int runs = 0;
  double measured_ms = 0, replayed_ms = 0;  // mean comm wait a rank-step
  std::vector<std::string> skipped;         // "RUN: why", each a run not compared
  double sync_ms() const { return rank_steps > 0 ? std::max(0.0, measured_ms - replayed_ms) : 0.0; }
};

// Replays each training run under `model` (its JSON as calibrate will write it) and compares the
// ranks' comm wait with the run's; runs with emulated ranks (their allreduce modelled, not
// measured) or a single rank are skipped. Each process's warm-up (step 0 and `warmups`' slow
// leading steps) is left out, as the training fit leaves it.
SyncFit fit_sync(const nlohmann::ordered_json& model, const std::vector<Trace>& training,
                 const std::vector<LeadingSteps>& warmups);
// The model's sync_ms and sync_source from the fit (none where it found nothing to add).
void add_sync(nlohmann::ordered_json& model, const SyncFit& fit);
// calibrate's report line ("" where no run could be compared and none was skipped).
std::string sync_report(const SyncFit& fit);

}  // namespace ddpsim::cli
