// Largest differencing (Karmarkar–Karp) with equal part sizes, following VeRL's
// seqlen_balancing.karmarkar_karp step by step, on flat arrays and radix sorts so that one call
// at n = 16384, G = 1024 stays well under a millisecond.
#include "sched/karmarkar_karp.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace ddpsim {

namespace {

// Unsigned keys in the order of the doubles (IEEE order: flip every bit of negatives, only the
// sign bit of the rest; −0 becomes +0 so that equal weights get equal keys). Callers have
// excluded NaN.
std::uint64_t ascending_key(double x) {
  const auto bits = std::bit_cast<std::uint64_t>(x + 0.0);
  return bits >> 63 ? ~bits : bits | (std::uint64_t{1} << 63);
}

}  // namespace

void KarmarkarKarp::radix_sort(std::size_t n) {
  // A few items (a rank's micro-batches) sort faster by insertion than by 256-bucket passes;
  // both are stable, so the order is the same.
  if (n <= 32) {
    for (std::size_t i = 1; i < n; ++i) {
      const std::uint64_t key = keys_[i];
      const int item = order_[i];
      std::size_t j = i;
      for (; j > 0 && keys_[j - 1] > key; --j) {
        keys_[j] = keys_[j - 1];
        order_[j] = order_[j - 1];
      }
      keys_[j] = key;
      order_[j] = item;
    }
    return;
  }
  std::uint64_t all = ~std::uint64_t{0}, any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    all &= keys_[i];
    any |= keys_[i];
  }
  const std::uint64_t varying = all ^ any;  // a bit every key shares cannot reorder anything
  if (varying == 0) return;
  // Wider digits for many keys, where the buckets' fixed cost is small against the keys.
  if (n >= 4096) {
    radix_passes<11>(n, varying);
  } else {
    radix_passes<8>(n, varying);
  }
}

template <int DIGIT_BITS>
void KarmarkarKarp::radix_passes(std::size_t n, std::uint64_t varying) {
  constexpr std::uint64_t MASK = (std::uint64_t{1} << DIGIT_BITS) - 1;
  std::uint64_t* keys = keys_.data();
  std::uint64_t* keys_out = keys_scratch_.data();
  int* order = order_.data();
  int* order_out = order_scratch_.data();
  // Digits start at the lowest varying bit: integer weights vary in a few adjacent bits.
  for (int shift = std::countr_zero(varying); shift < 64; shift += DIGIT_BITS) {
    if (((varying >> shift) & MASK) == 0) continue;
    std::array<std::uint32_t, MASK + 1> start{};
    for (std::size_t i = 0; i < n; ++i) ++start[(keys[i] >> shift) & MASK];
    std::uint32_t sum = 0;
    for (auto& s : start) sum += std::exchange(s, sum);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t at = start[(keys[i] >> shift) & MASK]++;
      keys_out[at] = keys[i];
      order_out[at] = order[i];
    }
    std::swap(keys, keys_out);
    std::swap(order, order_out);
  }
  if (keys != keys_.data()) {
    std::swap(keys_, keys_scratch_);
    std::swap(order_, order_scratch_);
  }
}

std::span<const int> KarmarkarKarp::partition(std::span<const double> weights, int G, bool equal_size) {
  const int n = static_cast<int>(weights.size());
  if (G < 1 || (equal_size && n % G != 0))
    throw InputError("kk: " + std::to_string(n) + " items cannot form G=" + std::to_string(G) +
                     " parts of equal count");
  if (!equal_size && n < G)
    throw InputError("kk: " + std::to_string(n) + " items cannot fill " + std::to_string(G) + " parts");
  result_.clear();
  sizes_.assign(static_cast<std::size_t>(G), 0);
  if (n == 0) return result_;
  for (auto* v : {&keys_, &keys_scratch_}) v->resize(static_cast<std::size_t>(std::max(n, G)));
  for (auto* v : {&order_, &order_scratch_}) v->resize(static_cast<std::size_t>(std::max(n, G)));

  // Items by (weight, index), like VeRL's sorted((seqlen, i)): the sort is stable.
  for (int i = 0; i < n; ++i) {
    const double w = weights[static_cast<std::size_t>(i)];
    if (!std::isfinite(w)) throw InputError("kk: the weight of item " + std::to_string(i) + " is not a finite number");
    keys_[static_cast<std::size_t>(i)] = ascending_key(w);
    order_[static_cast<std::size_t>(i)] = i;
  }
  radix_sort(static_cast<std::size_t>(n));

  // State s owns parts [s·G, (s+1)·G), sorted largest first. With equal counts, state s starts
  // with the G items at sorted positions [s·G, (s+1)·G), one per part; with free counts, with
  // the item at sorted position s alone in its first part.
  const int states = equal_size ? n / G : n;
  constexpr Part EMPTY{};
  parts_.assign(static_cast<std::size_t>(states) * G, EMPTY);
  next_.assign(static_cast<std::size_t>(n), -1);
  auto part = [&](int s, int i) -> Part& { return parts_[static_cast<std::size_t>(s) * G + i]; };
  auto single = [&](int item) { return Part{weights[static_cast<std::size_t>(item)], item, item, 1}; };
  for (int s = 0; s < states; ++s) {
    if (!equal_size) {
      part(s, 0) = single(order_[static_cast<std::size_t>(s)]);
      continue;
    }
    for (int i = 0; i < G; ++i) part(s, i) = single(order_[static_cast<std::size_t>(s * G + (G - 1 - i))]);
  }
  // VeRL's Set order: by sum, then item count, then item list, which distinct first items decide.
  auto larger = [](const Part& x, const Part& y) {
    if (x.sum != y.sum) return x.sum > y.sum;
    return x.count != y.count ? x.count > y.count : x.head > y.head;
  };
  auto spread = [&](int s) { return part(s, 0).sum - part(s, G - 1).sum; };
  // Heap order (a below b): the largest spread on top, then the state whose largest part is larger.
  auto below = [&](int a, int b) {
    return spread(a) != spread(b) ? spread(a) < spread(b) : larger(part(b, 0), part(a, 0));
  };
  heap_.resize(static_cast<std::size_t>(states));
  for (int s = 0; s < states; ++s) heap_[static_cast<std::size_t>(s)] = s;
  std::make_heap(heap_.begin(), heap_.end(), below);

  merged_.resize(static_cast<std::size_t>(G));
  const auto g = static_cast<std::size_t>(G);
  while (heap_.size() > 1) {
    std::pop_heap(heap_.begin(), heap_.end(), below);
    const int a = heap_.back();
    heap_.pop_back();
    std::pop_heap(heap_.begin(), heap_.end(), below);
    const int b = heap_.back();
    // Largest differencing: a's largest part takes b's smallest, and so on; b's items follow a's.
    for (int i = 0; i < G; ++i) {
      const Part& x = part(a, i);
      const Part& y = part(b, G - 1 - i);
      if (x.count == 0 || y.count == 0) {
        merged_[static_cast<std::size_t>(i)] = x.count == 0 ? y : x;
        continue;
      }
      next_[static_cast<std::size_t>(x.tail)] = y.head;
      merged_[static_cast<std::size_t>(i)] = {x.sum + y.sum, x.head, y.tail, x.count + y.count};
    }
    // Largest first: by sum, then item count (equal throughout with equal counts), then first
    // item. Stable passes, the minor key first; complemented keys sort descending. Empty parts
    // (first item −1) tie only with each other.
    for (std::size_t i = 0; i < g; ++i) {
      keys_[i] = ~static_cast<std::uint64_t>(static_cast<std::uint32_t>(merged_[i].head + 1));
      order_[i] = static_cast<int>(i);
    }
    radix_sort(g);
    if (!equal_size) {
      for (std::size_t i = 0; i < g; ++i)
        keys_[i] = ~static_cast<std::uint64_t>(merged_[static_cast<std::size_t>(order_[i])].count);
      radix_sort(g);
    }
    for (std::size_t i = 0; i < g; ++i) keys_[i] = ~ascending_key(merged_[static_cast<std::size_t>(order_[i])].sum);
    radix_sort(g);
    for (std::size_t i = 0; i < g; ++i) part(a, static_cast<int>(i)) = merged_[static_cast<std::size_t>(order_[i])];
    heap_.back() = a;
    std::push_heap(heap_.begin(), heap_.end(), below);
  }

  for (int i = 0; i < G; ++i) {
    const Part& p = part(heap_.front(), i);
    if (p.count == 0)
      throw InputError("kk: part " + std::to_string(i) + " of " + std::to_string(G) + " came out empty");
    for (int item = p.head; item != -1; item = next_[static_cast<std::size_t>(item)]) result_.push_back(item);
    sizes_[static_cast<std::size_t>(i)] = p.count;
  }
  return result_;
}

}  // namespace ddpsim
