#include "calib/allgather_fit.hpp"

#include <cmath>
#include <cstdio>
#include <map>

#include "common/error.hpp"
#include "common/split.hpp"

namespace ddpsim {

namespace {

// "S:ms,S:ms,...": total bytes gathered and the median time of each size.
std::map<double, double> read_timings(const Trace& t, const std::string& text) {
  std::map<double, double> out;
  for (const std::string& item : split_commas(text)) {
    const auto colon = item.find(':');
    char* end = nullptr;
    const double bytes = colon == std::string::npos ? NAN : std::strtod(item.c_str(), &end);
    const bool bytes_ok = end == item.c_str() + colon;
    const double ms = bytes_ok ? std::strtod(item.c_str() + colon + 1, &end) : NAN;
    if (!bytes_ok || *end != '\0' || !(bytes >= 1 && bytes <= 1e15) || !(ms > 0 && ms <= 1e9))
      throw InputError(t.path + ": metadata allgather=" + printable(text) +
                       ": expected BYTES:MS pairs (bytes gathered, positive milliseconds) separated by commas");
    out[bytes] = ms;
  }
  return out;
}

}  // namespace

AllgatherFit fit_allgather(const std::vector<Trace>& traces, const Calibration& c, double parameter_bytes) {
  AllgatherFit fit;
  if (!c.has_allreduce || !(c.allreduce_link_GBps > 0) || parameter_bytes <= 0) return fit;
  for (const Trace& t : traces) {
    const auto it = t.metadata.find("allgather");
    if (it == t.metadata.end() || it->second.empty()) continue;
    const std::map<double, double> timings = read_timings(t, it->second);
    // The size nearest what ZeRO gathers, by ratio: the ring's time is close to a line there.
    auto nearest = timings.begin();
    for (auto i = timings.begin(); i != timings.end(); ++i)
      if (std::abs(std::log(i->first / parameter_bytes)) < std::abs(std::log(nearest->first / parameter_bytes)))
        nearest = i;
    const int G = c.allreduce_ranks;
    fit.fitted = true;
    fit.trace = t.path;
    fit.parameter_bytes = parameter_bytes;
    fit.bytes = nearest->first;
    fit.measured_ms = nearest->second;
    fit.ring_ms =
        (G - 1) * (c.allreduce_step_latency_us * 1e-3 + nearest->first / G / (c.allreduce_link_GBps * 1e9) * 1e3);
    fit.factor = std::min(100.0, std::max(1.0, fit.measured_ms / fit.ring_ms));
    fit.sizes = static_cast<int>(timings.size());
    return fit;
  }
  return fit;
}

void add_allgather(nlohmann::ordered_json& model, const AllgatherFit& fit) {
  if (!fit.fitted) return;
  model["allgather_factor"] = fit.factor;
  model["calibration"]["fit"]["allgather"] = {{"trace", fit.trace},     {"parameter_bytes", fit.parameter_bytes},
                                              {"bytes", fit.bytes},     {"measured_ms", fit.measured_ms},
                                              {"ring_ms", fit.ring_ms}, {"sizes", fit.sizes}};
}

std::string allgather_report(const AllgatherFit& fit) {
  if (!fit.fitted) return "";
  char line[400];
  std::snprintf(line, sizeof line,
                "  all-gather %.4g ms for %.0f bytes (the profiled size nearest the model's %.0f bytes of parameters) "
                "against the fitted ring's %.4g ms: ×%.3f (allgather_factor%s), which scales ZeRO's parameter "
                "all-gather\n",
                fit.measured_ms, fit.bytes, fit.parameter_bytes, fit.ring_ms, fit.factor,
                fit.measured_ms < fit.ring_ms ? "; faster than the ring, kept at 1" : "");
  return line;
}

}  // namespace ddpsim
