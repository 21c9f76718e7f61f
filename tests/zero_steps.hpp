// What the ZeRO engine tests (zero1_test, zero2_test) share: one step of four ranks alike on the
// α–β platform, with two buckets whose times are computed by hand.
#pragma once

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "alpha_beta.hpp"

namespace ddpsim::test {

// 4 ranks on the α–β platform; two buckets, ready halfway through backward and at its end.
inline EngineSetup zero_setup(const std::string& sharding, bool overlap) {
  EngineSetup s = alpha_beta_setup(4);
  s.sharding = sharding;
  s.overlap = overlap;
  s.buckets = {{40e6, 0.5}, {60e6, 1.0}};
  return s;
}

// A 4-rank ring: one pass (all-gather, reduce-scatter) or two (allreduce).
inline double ring4_ms(double bytes, int passes) {
  return ring_ms(4, bytes, passes);
}

// One step of four ranks alike, which end it together.
inline RankTiming alike_step(const EngineSetup& s, const RankWork& w) {
  const auto timing = one_step(s, std::vector<RankWork>(4, w));
  for (const RankTiming& t : timing) CHECK(t.step_ms == doctest::Approx(timing[0].step_ms));
  return timing[0];
}

}  // namespace ddpsim::test
