// The rows of synthetic one-rank profiles, as `ddptrain --profile` writes them, for the
// calibration tests.
#pragma once

#include <cstdint>

#include "report/policy_run.hpp"

namespace ddpsim::test {

// One timed step of b samples padded to L tokens: forward `fwd_ms`, backward twice that.
inline RankStep profile_row(int step, int b, int L, double fwd_ms) {
  RankStep row;
  row.step = step;
  row.batch_size = row.global_batch = b;
  row.max_len = L;
  row.padded_tokens = std::int64_t{b} * L;
  row.fwd_ms = fwd_ms;
  row.bwd_ms = 2 * fwd_ms;
  return row;
}

}  // namespace ddpsim::test
