#include "model/buckets.hpp"

namespace ddpsim {

std::vector<Bucket> make_buckets(const PerfModel& model, double cap_bytes, double first_cap_bytes) {
  std::vector<Bucket> buckets;
  Bucket current;
  double elapsed = 0;  // backward runs from the last layer to the first
  for (auto it = model.layers.rbegin(); it != model.layers.rend(); ++it) {
    elapsed += it->bwd_fraction;
    current.bytes += double(it->params) * model.bytes_per_param;
    current.ready_fraction = elapsed;
    if (current.bytes >= (buckets.empty() ? first_cap_bytes : cap_bytes)) {
      buckets.push_back(current);
      current = {};
    }
  }
  if (current.bytes > 0) buckets.push_back(current);
  buckets.back().ready_fraction = 1.0;  // rounding: the last gradients exist when backward ends
  return buckets;
}

}  // namespace ddpsim
