// The default dataset: SST-2 train lengths, compiled in so the default job needs no file.
#include "common/json_util.hpp"
#include "data/lengths.hpp"
#include "embedded_sst2_train_lengths.hpp"

namespace ddpsim {

const LengthHistogram& sst2_train_histogram() {
  static const LengthHistogram histogram = histogram_from_json(
      parse_json(embedded::sst2_train_lengths, "embedded sst2-train-lengths.json"), "embedded sst2-train-lengths.json");
  return histogram;
}

}  // namespace ddpsim
