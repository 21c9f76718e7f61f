// Karmarkar–Karp largest differencing into G parts of equal item count, as VeRL's
// balance_batch partitions a global batch so that per-rank weight sums are close.
#pragma once

#include <span>
#include <vector>

namespace ddpsim {

// Keeps its scratch memory between calls (a global batch at G = 1024 is 16k items), so reuse
// one instance per policy.
class KarmarkarKarp {
 public:
  // Splits items 0..n-1 (n = weights.size(), a multiple of G, else InputError) into G parts of
  // n/G items. Returns the item indices part by part: part g is [g·n/G, (g+1)·n/G). Parts come
  // largest weight sum first. Deterministic: equal inputs give equal outputs.
  std::span<const int> partition(std::span<const double> weights, int G);

 private:
  // A part under construction: its weight sum and its items as a linked list through next_,
  // so merging two parts is O(1).
  struct Part {
    double sum = 0.0;
    int head = -1;
    int tail = -1;
  };

  std::vector<std::pair<double, int>> order_;
  std::vector<Part> parts_;
  std::vector<Part> merged_;
  std::vector<int> next_;
  std::vector<int> heap_;
  std::vector<int> result_;
};

}  // namespace ddpsim
