#include "calib/zero_fit.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "common/error.hpp"
#include "common/split.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

// "S:ms,S:ms,...": total bytes gathered and the median time of each size.
std::map<double, double> read_timings(const Trace& t, const std::string& text) {
  std::map<double, double> out;
  for (const std::string& item : split_commas(text)) {
    const auto colon = item.find(':');
    char* end = nullptr;
    const double bytes = colon == std::string::npos ? NAN : std::strtod(item.c_str(), &end);
    const bool bytes_ok = colon != std::string::npos && end == item.c_str() + colon;
    const double ms = bytes_ok ? std::strtod(item.c_str() + colon + 1, &end) : NAN;
    if (!bytes_ok || *end != '\0' || !(bytes >= 1 && bytes <= 1e15) || !(ms > 0 && ms <= 1e9))
      throw InputError(t.path + ": metadata allgather=" + printable(text) +
                       ": expected BYTES:MS pairs (bytes gathered, positive milliseconds) separated by commas");
    if (!out.emplace(bytes, ms).second)
      throw InputError(t.path + ": metadata allgather=" + printable(text) + ": " + item.substr(0, colon) +
                       " bytes timed twice");
  }
  return out;
}

}  // namespace

std::optional<AllgatherTimings> allgather_timings(const std::vector<Trace>& traces) {
  for (const Trace& t : traces) {
    const auto it = t.metadata.find("allgather");
    if (it != t.metadata.end() && !it->second.empty()) return AllgatherTimings{t.path, read_timings(t, it->second)};
  }
  return std::nullopt;
}

AllgatherFit fit_allgather(const std::optional<AllgatherTimings>& timings, const Calibration& c,
                           double parameter_bytes) {
  AllgatherFit fit;
  if (!timings) return fit;
  fit.timed = true;
  fit.trace = timings->trace;
  if (!c.has_allreduce || !(c.allreduce_link_GBps > 0)) {
    fit.why_not = "the allreduce fit resolved no link bandwidth to time the ring with";
    return fit;
  }
  if (!(parameter_bytes > 0)) {
    fit.why_not = "the base model's layout has no parameters";
    return fit;
  }
  const int G = c.allreduce_ranks;
  const auto ring_ms = [&](double bytes) {
    return (G - 1) * (c.allreduce_step_latency_us * 1e-3 + bytes / G / (c.allreduce_link_GBps * 1e9) * 1e3);
  };
  // The size nearest what ZeRO gathers, by ratio: the factor is taken there, one size's ratio
  // (the sizes' ratios spread: at small ones the latency's fit decides).
  auto nearest = timings->ms.begin();
  for (auto i = timings->ms.begin(); i != timings->ms.end(); ++i) {
    fit.sizes.push_back({i->first, i->second, ring_ms(i->first)});
    if (std::abs(std::log(i->first / parameter_bytes)) < std::abs(std::log(nearest->first / parameter_bytes)))
      nearest = i;
  }
  fit.fitted = true;
  fit.parameter_bytes = parameter_bytes;
  fit.bytes = nearest->first;
  fit.measured_ms = nearest->second;
  fit.ring_ms = ring_ms(nearest->first);
  fit.factor = std::min(100.0, std::max(1.0, fit.measured_ms / fit.ring_ms));
  return fit;
}

void add_allgather(nlohmann::ordered_json& model, const AllgatherFit& fit) {
  if (!fit.fitted) return;
  model["allgather_factor"] = fit.factor;
  nlohmann::ordered_json sizes = nlohmann::ordered_json::array();
  for (const auto& s : fit.sizes)
    sizes.push_back({{"bytes", s.bytes}, {"measured_ms", s.measured_ms}, {"ring_ms", s.ring_ms}});
  model["calibration"]["fit"]["allgather"] = {{"trace", fit.trace},     {"parameter_bytes", fit.parameter_bytes},
                                              {"bytes", fit.bytes},     {"measured_ms", fit.measured_ms},
                                              {"ring_ms", fit.ring_ms}, {"sizes", sizes}};
}

std::string allgather_report(const AllgatherFit& fit) {
  if (!fit.timed) return "";
  if (!fit.fitted) return "  all-gather timed in " + fit.trace + ", no allgather_factor: " + fit.why_not + "\n";
  const double ratio = fit.measured_ms / fit.ring_ms;
  char line[512];
  std::snprintf(line, sizeof line,
                "  all-gather %.4g ms for %.0f bytes (the profiled size nearest the model's %.0f bytes of parameters) "
                "against the fitted ring's %.4g ms: ×%.3f (allgather_factor%s), which scales ZeRO's parameter "
                "all-gather; at each size",
                fit.measured_ms, fit.bytes, fit.parameter_bytes, fit.ring_ms, fit.factor,
                ratio < 1     ? "; faster than the ring, kept at 1"
                : ratio > 100 ? "; capped at 100"
                              : "");
  std::string out = line;
  for (const auto& s : fit.sizes) {
    std::snprintf(line, sizeof line, "%s %.0f ×%.2f", &s == &fit.sizes.front() ? "" : ",", s.bytes,
                  s.measured_ms / s.ring_ms);
    out += line;
  }
  return out + "\n";
}

double optimizer_update_share(const std::vector<Trace>& traces) {
  std::vector<double> shares;
  for (const Trace& t : traces) {
    const auto it = t.metadata.find("optimizer_update_share");
    if (it == t.metadata.end()) continue;
    char* end = nullptr;
    const double share = std::strtod(it->second.c_str(), &end);
    if (it->second.empty() || *end != '\0' || !(share >= 0 && share <= 1))
      throw InputError(t.path + ": metadata optimizer_update_share=" + printable(it->second) +
                       ": expected the update's share of the optimizer's time, from 0 to 1");
    shares.push_back(share);
  }
  return shares.empty() ? NAN : percentile(shares, 50);
}

void add_update_share(nlohmann::ordered_json& model, double share) {
  if (!std::isnan(share)) model["optimizer_update_share"] = share;
}

std::string update_share_report(double share) {
  if (std::isnan(share)) return "";
  char line[240];
  std::snprintf(line, sizeof line,
                "  optimizer: the update %.1f%% of it (optimizer_update_share), the part ZeRO divides over the "
                "ranks; the copy out of DDP's buckets and clearing the gradients the rest\n",
                100 * share);
  return line;
}

}  // namespace ddpsim
