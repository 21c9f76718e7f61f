// Performance model JSON (calibrate's output, models/*.json), then the predictions a run asks
// of it, so that an accepted model never yields a NaN, an infinity or undefined behaviour. The
// same text is also read as a Hugging Face config.json and derived into a model on a preset.
#include <cmath>

#include "common/json_util.hpp"
#include "fuzz.hpp"
#include "model/hf_model.hpp"
#include "model/perf_model.hpp"

namespace {
void check_predictions(const ddpsim::PerfModel& model) {
  for (const int b : {1, 7, 64})
    for (const int L : {1, 33, 512}) {
      const double t = model.compute_ms(b, L), m = model.peak_mem_mib(b, L);
      if (!std::isfinite(t) || t < 0 || !std::isfinite(m)) {
        std::fprintf(stderr, "accepted model predicts compute %g ms, memory %g MiB at b=%d L=%d\n", t, m, b, L);
        std::abort();
      }
    }
  model.max_batch(128);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ddpsim::fuzz::expect_typed_errors([&] {
    check_predictions(ddpsim::parse_perf_model(ddpsim::parse_json(ddpsim::fuzz::text(data, size), "m.json"), "m.json"));
  });
  ddpsim::fuzz::expect_typed_errors([&] {
    const auto spec = ddpsim::transformer_from_hf_config(
        ddpsim::parse_json(ddpsim::fuzz::text(data, size), "config.json"), "config.json");
    check_predictions(
        ddpsim::parse_perf_model(ddpsim::derived_model_json(spec, "fuzz", "h100-sxm", "bf16", {}), "derived"));
  });
  return 0;
}
