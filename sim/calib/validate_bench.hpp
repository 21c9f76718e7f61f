// `ddpsim bench`'s validation row: `ddpsim validate` of a long measured run against a long
// baseline (the 95% intervals are 2,000 block-bootstrap resamples of every series), timed from
// reading the traces to the outputs' text, as the verb does it.
#pragma once

namespace ddpsim {

struct ValidateBenchResult {
  long rows = 0;  // in each of the two traces
  int steps = 0;
  double wall_s = 0;
  double target_s = 0;  // the wall time it should stay under (0: none)
  bool met() const { return target_s <= 0 || wall_s < target_s; }
};

// Two traces of the embedded default (static and minmax, G = 4) of 50,000 steps each, so
// 200,000 rows each; `scale` (--quick: 0.1) shortens them and drops the target.
ValidateBenchResult run_validate_bench(double scale);

}  // namespace ddpsim
