// Performance model JSON (calibrate's output, models/*.json), then the predictions a run asks
// of it, so that an accepted model never yields a NaN, an infinity or undefined behaviour.
#include <cmath>

#include "common/json_util.hpp"
#include "fuzz.hpp"
#include "model/perf_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ddpsim::fuzz::expect_typed_errors([&] {
    const auto model = ddpsim::parse_perf_model(ddpsim::parse_json(ddpsim::fuzz::text(data, size), "m.json"), "m.json");
    for (const int b : {1, 7, 64})
      for (const int L : {1, 33, 512}) {
        const double t = model.compute_ms(b, L), m = model.peak_mem_mib(b, L);
        if (!std::isfinite(t) || t < 0 || !std::isfinite(m)) {
          std::fprintf(stderr, "accepted model predicts compute %g ms, memory %g MiB at b=%d L=%d\n", t, m, b, L);
          std::abort();
        }
      }
    model.max_batch(128);
  });
  return 0;
}
