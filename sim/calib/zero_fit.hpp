// What a ZeRO step takes from a profile beyond DDP's. Its parameter all-gather as the training
// framework ran it (the "# allgather=S:ms,..." timings of a several-rank ddptrain --profile: the
// collective and the copies into place) against the ring all-gather the allreduce fit implies:
// ddptrain's over Gloo on a CPU took 1.7 times that ring (traces/cpu/prereg12), the factor the
// simulation scales its parameter all-gather by (PerfModel::allgather_factor). And the share of
// the optimizer's time its update takes, the part ZeRO divides over the ranks
// (PerfModel::optimizer_update_share): on a CPU the shard's step took 0.59 of DDP's optimizer.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "calib/calibrate.hpp"
#include "calib/trace_reader.hpp"

namespace ddpsim {

struct AllgatherTimings {
  std::string trace;
  std::map<double, double> ms;  // bytes gathered in all -> median ms
};

// The first trace's timings that has some; throws InputError naming the trace for malformed ones
// (read before the fit, which takes a while on large traces).
std::optional<AllgatherTimings> allgather_timings(const std::vector<Trace>& traces);

struct AllgatherFit {
  bool timed = false, fitted = false;
  std::string trace;
  std::string why_not;         // timed but not fitted: the reason
  double parameter_bytes = 0;  // what ZeRO gathers: the model's parameters at the gradient dtype's size
  double bytes = 0;            // the profiled size nearest it, where the factor is taken
  double measured_ms = 0, ring_ms = 0;
  double factor = 1;  // measured over ring there, in [1, 100]
  struct Size {
    double bytes, measured_ms, ring_ms;
  };
  std::vector<Size> sizes;  // every profiled size, for the record
};

AllgatherFit fit_allgather(const std::optional<AllgatherTimings>& timings, const Calibration& c,
                           double parameter_bytes);
// The model's allgather_factor and its calibration record, where fitted.
void add_allgather(nlohmann::ordered_json& model, const AllgatherFit& fit);
std::string allgather_report(const AllgatherFit& fit);

// The median "# optimizer_update_share=" of the traces that give one (in [0, 1]); NaN where none
// does. Throws InputError naming the trace for a value outside [0, 1].
double optimizer_update_share(const std::vector<Trace>& traces);
// The model's optimizer_update_share and its report line, where a trace gave one.
void add_update_share(nlohmann::ordered_json& model, double share);
std::string update_share_report(double share);

}  // namespace ddpsim
