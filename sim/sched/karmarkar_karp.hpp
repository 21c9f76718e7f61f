// Karmarkar–Karp largest differencing into G parts of equal item count, as VeRL's
// balance_batch partitions a global batch so that per-rank weight sums are close.
#pragma once

#include <span>
#include <vector>

namespace ddpsim {

// Splits items 0..n-1 (n = weights.size(), a multiple of G) into G parts of n/G items each.
// Returns the item indices of each part. Deterministic: equal inputs give equal outputs.
std::vector<std::vector<int>> karmarkar_karp_equal(std::span<const double> weights, int G);

}  // namespace ddpsim
