// The surface a test's training runs are read against: a known model's own phases (a perfect
// profile), so that what calibrate --training fits is the runs' doing alone.
#pragma once

#include "calib/calibrate.hpp"
#include "model/perf_model.hpp"

inline ddpsim::Calibration known_surface(const ddpsim::PerfModel& m) {
  ddpsim::Calibration c;
  c.forward.model = m.forward;
  c.backward.model = m.backward;
  return c;
}
