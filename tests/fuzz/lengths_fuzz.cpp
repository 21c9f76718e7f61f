// Length inputs of a config's data section: a histogram JSON (ddpsim lengths' output) when the
// first byte is even, a length-per-line trace when odd; either drawn into a dataset.
#include "common/json_util.hpp"
#include "data/lengths.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::string_view body = ddpsim::fuzz::text(data + 1, size - 1);
  ddpsim::fuzz::expect_typed_errors([&] {
    if (data[0] % 2 == 0) {
      const auto histogram = ddpsim::histogram_from_json(ddpsim::parse_json(body, "h.json"), "h.json");
      ddpsim::histogram_source(histogram, 128)->dataset(3);
    } else {
      ddpsim::trace_source(ddpsim::fuzz::as_file(body, ".lengths"), 128)->dataset(3);
    }
  });
  return 0;
}
