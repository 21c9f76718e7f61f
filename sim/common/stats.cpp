#include "common/stats.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include <boost/math/distributions/students_t.hpp>

namespace ddpsim {

double mean(std::span<const double> values) {
  if (values.empty()) return 0.0;
  double sum = 0.0;
  for (double v : values) sum += v;
  return sum / static_cast<double>(values.size());
}

double population_std(std::span<const double> values) {
  if (values.empty()) return 0.0;
  const double m = mean(values);
  double sq = 0.0;
  for (double v : values) sq += (v - m) * (v - m);
  return std::sqrt(sq / static_cast<double>(values.size()));
}

double percentile(std::span<const double> values, double q) {
  std::vector<double> scratch(values.begin(), values.end());
  return percentile_in_place(scratch, q);
}

double percentile_in_place(std::span<double> values, double q) {
  if (values.empty()) return 0.0;
  const double rank = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const std::size_t hi = std::min(lo + 1, values.size() - 1);
  // The lo-th smallest by selection, and the hi-th as the smallest of what lies above it: the
  // values a full sort would put there, in linear time.
  std::nth_element(values.begin(), values.begin() + static_cast<long>(lo), values.end());
  const double at_lo = values[lo];
  const double at_hi = hi == lo ? at_lo : *std::min_element(values.begin() + static_cast<long>(hi), values.end());
  return at_lo + (rank - static_cast<double>(lo)) * (at_hi - at_lo);
}

double t95(double df) {
  return boost::math::quantile(boost::math::students_t(df), 0.975);
}

}  // namespace ddpsim
