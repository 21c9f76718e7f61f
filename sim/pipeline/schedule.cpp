#include "pipeline/schedule.hpp"

#include <algorithm>

#include "common/error.hpp"

namespace ddpsim::pipeline {

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = {"gpipe", "1f1b"};
  return names;
}

std::vector<Op> stage_ops(const std::string& schedule, int stages, int stage, int micro_batches) {
  std::vector<Op> ops;
  if (schedule == "gpipe") {
    for (int m = 0; m < micro_batches; ++m) ops.push_back({true, m});
    for (int m = 0; m < micro_batches; ++m) ops.push_back({false, m});
  } else if (schedule == "1f1b") {
    const int warmup = std::min(stages - stage - 1, micro_batches);
    int next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward) ops.push_back({true, next_forward});
    for (; next_forward < micro_batches; ++next_forward, ++next_backward) {
      ops.push_back({true, next_forward});
      ops.push_back({false, next_backward});
    }
    for (; next_backward < micro_batches; ++next_backward) ops.push_back({false, next_backward});
  } else {
    throw InputError("unknown pipeline schedule \"" + schedule + "\" (known: gpipe, 1f1b)");
  }
  return ops;
}

int max_in_flight(const std::vector<Op>& ops) {
  int now = 0, most = 0;
  for (const Op& op : ops) most = std::max(most, now += op.forward ? 1 : -1);
  return most;
}

}  // namespace ddpsim::pipeline
