#include "model/buckets.hpp"

namespace ddpsim {

std::vector<std::vector<std::size_t>> assign_buckets(std::span<const double> bytes, double cap_bytes,
                                                     double first_cap_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::vector<std::size_t> current;
  double filled = 0;
  for (std::size_t i = bytes.size(); i-- > 0;) {
    current.push_back(i);
    filled += bytes[i];
    if (filled >= (buckets.empty() ? first_cap_bytes : cap_bytes)) {
      buckets.push_back(std::move(current));
      current.clear();
      filled = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

std::vector<Bucket> make_buckets(const PerfModel& model, double cap_bytes, double first_cap_bytes) {
  std::vector<double> bytes;
  for (const auto& layer : model.layers) bytes.push_back(double(layer.params) * model.bytes_per_param);
  std::vector<Bucket> buckets;
  double elapsed = 0;  // backward runs from the last layer to the first
  for (const auto& members : assign_buckets(bytes, cap_bytes, first_cap_bytes)) {
    Bucket b;
    for (std::size_t i : members) {
      b.bytes += bytes[i];
      elapsed += model.layers[i].bwd_fraction;
    }
    b.ready_fraction = elapsed;
    buckets.push_back(b);
  }
  buckets.back().ready_fraction = 1.0;  // rounding: the last gradients exist when backward ends
  return buckets;
}

}  // namespace ddpsim
