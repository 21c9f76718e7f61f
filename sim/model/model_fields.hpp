// What the model files' parsers share (perf_model.cpp: the phases and the layout;
// model_variation.cpp: how times vary around them).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "model/perf_model.hpp"

namespace ddpsim {

// Times (ms), memory (MiB) and coefficients: non-negative and bounded, so that every prediction
// a run asks for stays finite.
inline double non_negative(const JsonFields& f, const char* key, double fallback, double limit = 1e7) {
  const double v = f.get<double>(key, fallback);
  if (!(v >= 0 && v <= limit))
    throw InputError(f.where() + ": " + key + " must be a finite number ≥ 0 (at most " + nlohmann::json(limit).dump() +
                     "), got " + nlohmann::json(v).dump());
  return v;
}

// The model's "noise", "session" and "run_level" keys, read from `f` into `m`.
void parse_variation(const JsonFields& f, PerfModel& m, const std::string& origin);

}  // namespace ddpsim
