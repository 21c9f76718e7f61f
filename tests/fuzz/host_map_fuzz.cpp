// A config's platform section: built-in topologies, and the rank→host map of an XML platform,
// which is loaded and route-checked (models/*.xml, relative to the models folder) for 4 ranks.
#include "common/json_util.hpp"
#include "engine/collective.hpp"
#include "engine/platform.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr int G = 4;
  ddpsim::fuzz::expect_typed_errors([&] {
    const auto platform = ddpsim::parse_platform(ddpsim::parse_json(ddpsim::fuzz::text(data, size), "p.json"),
                                                 "p.json: platform", G, FUZZ_SOURCE_DIR "/models");
    const auto nodes = ddpsim::node_of_ranks(platform, G);
    if (platform.topology == "xml")
      ddpsim::check_platform_file(platform, ddpsim::make_allreduce("ring", nodes).pairs());
  });
  return 0;
}
