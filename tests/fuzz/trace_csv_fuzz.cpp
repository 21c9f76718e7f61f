// Trace CSVs (steps.csv of ddpsim and ddptrain), as calibrate, replay and validate read them.
#include "calib/trace_reader.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = ddpsim::fuzz::as_file(ddpsim::fuzz::text(data, size), ".csv");
  ddpsim::fuzz::expect_typed_errors([&] { ddpsim::read_trace(path); });
  return 0;
}
