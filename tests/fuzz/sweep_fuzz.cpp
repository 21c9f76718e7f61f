// A sweep file as `ddpsim sweep SWEEP.json` reads it (grids of up to 4 cells expanded, so every
// cell's config is checked too), and the same text as the sweep.json grid `--merge` reads back.
#include "fuzz.hpp"
#include "sweep/grid.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string& path = ddpsim::fuzz::as_file(ddpsim::fuzz::text(data, size), ".json");
  ddpsim::fuzz::expect_typed_errors([&] {
    const ddpsim::SweepSpec spec = ddpsim::read_sweep(path);
    if (spec.cell_count() <= 4) ddpsim::expand(spec);
  });
  ddpsim::fuzz::expect_typed_errors([&] { ddpsim::grid_from_json(path); });
  return 0;
}
