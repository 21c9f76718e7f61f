// Policy strings ("minmax:cost=tokens_sq:buffer=32") built for a shape and run for two steps:
// the first two bytes choose G (1..16) and B (1..128), the rest is the policy.
#include "data/lengths.hpp"
#include "fuzz.hpp"
#include "report/policy_run.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  static const std::vector<int> dataset = ddpsim::histogram_source(ddpsim::sst2_train_histogram(), 66)->dataset(7);
  ddpsim::StepShape shape;
  shape.G = 1 + data[0] % 16;
  shape.B = 1 + data[1] % 128;
  shape.max_length = 66;
  ddpsim::fuzz::expect_typed_errors([&] {
    const auto spec = ddpsim::parse_policy_spec(ddpsim::fuzz::text(data + 2, size - 2));
    ddpsim::run_policy(spec, shape, 2, dataset);
  });
  return 0;
}
