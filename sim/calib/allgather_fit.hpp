// ZeRO's parameter all-gather as the collective library ran it (the "# allgather=S:ms,..."
// timings of a several-rank ddptrain --profile) against the ring all-gather the allreduce fit
// implies. ddptrain's over Gloo on a CPU took 1.7 times that ring (traces/cpu/prereg12): the
// factor the simulation scales its parameter all-gather by (PerfModel::allgather_factor).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/calibrate.hpp"
#include "calib/trace_reader.hpp"

namespace ddpsim {

struct AllgatherFit {
  bool fitted = false;
  std::string trace;           // where the timings came from
  double parameter_bytes = 0;  // what ZeRO gathers: the model's parameters at the gradient dtype's size
  double bytes = 0;            // the profiled size nearest it
  double measured_ms = 0, ring_ms = 0;
  double factor = 1;  // measured over ring, at least 1
  int sizes = 0;      // sizes profiled
};

// From the first trace with all-gather timings; none without them or without an allreduce fit
// that resolves a bandwidth. Throws InputError naming the trace for malformed timings.
AllgatherFit fit_allgather(const std::vector<Trace>& traces, const Calibration& c, double parameter_bytes);
// The model's allgather_factor and its calibration record, where fitted.
void add_allgather(nlohmann::ordered_json& model, const AllgatherFit& fit);
std::string allgather_report(const AllgatherFit& fit);

}  // namespace ddpsim
