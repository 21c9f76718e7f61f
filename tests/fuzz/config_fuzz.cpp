// A config file and --set overrides, as `ddpsim run CONFIG --set ...` reads them: the input is
// the JSON text, then after a NUL byte one KEY=VALUE assignment per line.
#include "common/json_util.hpp"
#include "eval/config.hpp"
#include "fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input = ddpsim::fuzz::text(data, size);
  const auto nul = input.find('\0');
  ddpsim::fuzz::expect_typed_errors([&] {
    nlohmann::json doc = ddpsim::parse_json(input.substr(0, nul), "fuzz.json");
    if (nul != std::string_view::npos) {
      std::string_view rest = input.substr(nul + 1);
      while (!rest.empty()) {
        const auto end = rest.find('\n');
        ddpsim::apply_override(doc, rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
      }
    }
    ddpsim::parse_config(doc, "fuzz.json", FUZZ_SOURCE_DIR "/configs");
  });
  return 0;
}
