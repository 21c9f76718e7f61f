// Largest differencing (Karmarkar–Karp) with equal part sizes, following VeRL's
// seqlen_balancing.karmarkar_karp step by step, on flat arrays and radix sorts so that one call
// at n = 16384, G = 1024 stays well under a millisecond.
#include "sched/karmarkar_karp.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace ddpsim {

namespace {

// 1.5·2^52: see weight_keys.
constexpr double SHIFT = 0x1.8p52;

template <class T>
void grow(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

// The bits in which keys[0, n) differ: a bit they all share cannot reorder anything.
std::uint64_t varying_bits(const std::vector<std::uint64_t>& keys, std::size_t n) {
  std::uint64_t all = ~std::uint64_t{0}, any = 0;
  for (std::size_t i = 0; i < n; ++i) {
    all &= keys[i];
    any |= keys[i];
  }
  return all ^ any;
}

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
  const std::uint64_t varying = varying_bits(keys_, n);
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
  sizes_.assign(static_cast<std::size_t>(G), 0);
  if (n == 0) return {};
  // Scratch only grows: calls of other sizes in between (a rank's micro-batches) keep it.
  const auto most = static_cast<std::size_t>(std::max(n, G));
  for (auto* v : {&keys_, &keys_scratch_}) grow(*v, most);
  for (auto* v : {&order_, &order_scratch_}) grow(*v, most);
  grow(result_, static_cast<std::size_t>(n));  // every place gets an item below
  grow(rank_, static_cast<std::size_t>(n));
  grow(next_, static_cast<std::size_t>(n));
  grow(merged_, static_cast<std::size_t>(G));
  grow(key32_, static_cast<std::size_t>(G));

  weight_keys(weights);
  const bool ranked = equal_size && sort_and_rank(n, G);
  if (!ranked) radix_sort(static_cast<std::size_t>(n));

  // State s owns parts [s·G, (s+1)·G), sorted largest first. With equal counts, state s starts
  // with the G items at sorted positions [s·G, (s+1)·G), one per part; with free counts, with
  // the item at sorted position s alone in its first part.
  const int states = equal_size ? n / G : n;
  constexpr Part EMPTY{};
  equal_ = equal_size;
  grow(parts_, static_cast<std::size_t>(states) * G);
  if (equal_size) {
    count_.assign(static_cast<std::size_t>(states), 1);
  } else {
    std::fill_n(parts_.begin(), static_cast<std::ptrdiff_t>(states) * G, EMPTY);  // else all set below
    count_.assign(static_cast<std::size_t>(states) * G, 0);
    merged_count_.resize(static_cast<std::size_t>(G));
  }
  auto part = [&](int s, int i) -> Part& { return parts_[static_cast<std::size_t>(s) * G + i]; };
  for (int s = 0; s < states; ++s) {
    if (!equal_size) {
      const int item = order_[static_cast<std::size_t>(s)];
      part(s, 0) = {weights[static_cast<std::size_t>(item)], item, item};
      count_[static_cast<std::size_t>(s) * G] = 1;
      continue;
    }
    for (int i = 0; i < G; ++i) {
      // Whole weights come back from their sorted keys, in order, rather than item by item.
      const auto at = static_cast<std::size_t>(s * G + (G - 1 - i));
      const int item = order_[at];
      const double w = whole_sums_ ? std::bit_cast<double>(keys_[at]) - SHIFT : weights[static_cast<std::size_t>(item)];
      part(s, i) = {w, item, item};
      if (!ranked) rank_[static_cast<std::size_t>(item)] = s;
    }
  }
  if (equal_size && !ranked) rank_heads(n, states);
  // VeRL's Set order: by sum, then item count, then item list, which distinct first items decide.
  auto largest_larger = [&](int s, int t) {
    const Part &x = part(s, 0), &y = part(t, 0);
    if (x.sum != y.sum) return x.sum > y.sum;
    const auto gs = static_cast<std::size_t>(G);
    const int cx = count(static_cast<std::size_t>(s), 0, gs), cy = count(static_cast<std::size_t>(t), 0, gs);
    return cx != cy ? cx > cy : x.head > y.head;
  };
  auto spread = [&](int s) { return part(s, 0).sum - part(s, G - 1).sum; };
  // Heap order (a below b): the largest spread on top, then the state whose largest part is larger.
  auto below = [&](int a, int b) { return spread(a) != spread(b) ? spread(a) < spread(b) : largest_larger(b, a); };
  heap_.resize(static_cast<std::size_t>(states));
  for (int s = 0; s < states; ++s) heap_[static_cast<std::size_t>(s)] = s;
  std::make_heap(heap_.begin(), heap_.end(), below);

  while (heap_.size() > 1) {
    std::pop_heap(heap_.begin(), heap_.end(), below);
    const int a = heap_.back();
    heap_.pop_back();
    std::pop_heap(heap_.begin(), heap_.end(), below);
    const int b = heap_.back();
    // Largest differencing: a's largest part takes b's smallest, and so on; b's items follow a's.
    // Then largest first: by sum, then item count, then first item.
    if (equal_size) {
      merge_equal(a, b, static_cast<std::size_t>(G));
      count_[static_cast<std::size_t>(a)] += count_[static_cast<std::size_t>(b)];
    } else {
      merge_free(a, b, static_cast<std::size_t>(G));
    }
    heap_.back() = a;
    std::push_heap(heap_.begin(), heap_.end(), below);
  }

  write_result(heap_.front(), G);
  return {result_.data(), static_cast<std::size_t>(n)};
}

void KarmarkarKarp::weight_keys(std::span<const double> weights) {
  // Items by (weight, index), like VeRL's sorted((seqlen, i)): the sort is stable. Whole weights
  // (token counts) have whole sums, exact in a double below 2^53, whose keys need fewer radix
  // passes than a double's. Adding 1.5·2^52 to a whole w below 2^51 in magnitude leaves
  // 2^51 + w in the mantissa: the sum's bits are an integer key in the order of w, and
  // subtracting it back gives w exactly only if w is whole. One pass, no conversions.
  // Below 2^53 / n in magnitude, every sum of weights is exact: one comparison an item where a
  // running minimum and maximum would chain each item on the one before.
  const int n = static_cast<int>(weights.size());
  const double bound = std::min(0x1p51, 0x1p53 / n);
  bool whole = true;
  for (int i = 0; i < n; ++i) {
    const double w = weights[static_cast<std::size_t>(i)], shifted = w + SHIFT;
    whole &= (std::fabs(w) < bound) & (shifted - SHIFT == w);  // false for NaN and infinities
    keys_[static_cast<std::size_t>(i)] = std::bit_cast<std::uint64_t>(shifted);
    order_[static_cast<std::size_t>(i)] = i;
  }
  whole_sums_ = whole;
  if (!whole_sums_)
    for (int i = 0; i < n; ++i) {
      const double w = weights[static_cast<std::size_t>(i)];
      if (!std::isfinite(w))
        throw InputError("kk: the weight of item " + std::to_string(i) + " is not a finite number");
      keys_[static_cast<std::size_t>(i)] = ascending_key(w);
    }
}

bool KarmarkarKarp::sort_and_rank(int n, int G) {
  const std::uint64_t varying = varying_bits(keys_, static_cast<std::size_t>(n));
  const int shift = varying ? std::countr_zero(varying) : 0, width = varying ? std::bit_width(varying) - shift : 0;
  if (width > 12 || n >= (1 << 21)) return false;
  const std::uint64_t mask = (std::uint64_t{1} << width) - 1;
  counts_.assign(std::size_t{1} << width, 0);
  for (int i = 0; i < n; ++i) ++counts_[(keys_[static_cast<std::size_t>(i)] >> shift) & mask];
  std::uint32_t end = 0;
  for (auto& c : counts_) c = end += c;
  // Items from the last: each bucket fills from its end, so equal keys keep index order, and an
  // item's state (its place over G, by a multiply: exact below 2^21 places and ranks) has seen
  // exactly its items of higher index.
  const std::uint64_t reciprocal =
      ((std::uint64_t{1} << 42) + static_cast<std::uint64_t>(G) - 1) / static_cast<std::uint64_t>(G);
  heads_seen_.assign(static_cast<std::size_t>(n / G), 0);
  for (int i = n - 1; i >= 0; --i) {
    const std::uint64_t key = keys_[static_cast<std::size_t>(i)];
    const std::uint32_t at = --counts_[(key >> shift) & mask];
    order_scratch_[at] = i;
    keys_scratch_[at] = key;
    rank_[static_cast<std::size_t>(i)] = heads_seen_[(std::uint64_t{at} * reciprocal) >> 42]++;
  }
  std::swap(order_, order_scratch_);
  std::swap(keys_, keys_scratch_);
  return true;
}

void KarmarkarKarp::write_result(int final_state, int G) {
  // The parts' lists walked side by side, 64 at a time: each step's loads are independent of
  // one another (one list after the other waits on each load in turn), and the block's share
  // of the result stays in the L1 cache.
  int at = 0;
  for (int i = 0; i < G; ++i) {
    const Part& p = parts_[static_cast<std::size_t>(final_state) * G + i];
    const int items =
        count(static_cast<std::size_t>(final_state), static_cast<std::size_t>(i), static_cast<std::size_t>(G));
    if (items == 0) throw InputError("kk: part " + std::to_string(i) + " of " + std::to_string(G) + " came out empty");
    sizes_[static_cast<std::size_t>(i)] = items;
    order_[static_cast<std::size_t>(i)] = at;  // where the part starts in the result
    order_scratch_[static_cast<std::size_t>(i)] = p.head;
    at += items;
  }
  constexpr int BLOCK = 64;
  for (int first = 0; first < G; first += BLOCK) {
    const int last = std::min(G, first + BLOCK);
    const int longest = *std::max_element(sizes_.begin() + first, sizes_.begin() + last);
    for (int t = 0; t < longest; ++t)
      for (auto i = static_cast<std::size_t>(first); i < static_cast<std::size_t>(last); ++i) {
        if (t >= sizes_[i]) continue;
        int& item = order_scratch_[i];
        result_[static_cast<std::size_t>(order_[i] + t)] = item;
        if (t + 1 < sizes_[i]) item = next_[static_cast<std::size_t>(item)];
      }
  }
}

void KarmarkarKarp::merge_equal(int a, int b, std::size_t G) {
  Part* pa = &parts_[static_cast<std::size_t>(a) * G];
  const Part* pb = &parts_[static_cast<std::size_t>(b) * G];
  // Merged parts go straight to their first item's rank (state a's first items throughout),
  // which is the order of the last key; a stable sort by sum then leaves ties in it.
  for (std::size_t i = 0; i < G; ++i) {
    const Part& x = pa[i];
    const Part& y = pb[G - 1 - i];
    next_[static_cast<std::size_t>(x.tail)] = y.head;
    merged_[static_cast<std::size_t>(rank_[static_cast<std::size_t>(x.head)])] = {x.sum + y.sum, x.head, y.tail};
  }
  // Every merged sum lies in [a's smallest + b's smallest, a's largest + b's largest]; whole sums
  // in a range of a few times G are counted into place in one pass.
  const double top = pa[0].sum + pb[0].sum, range = top - (pa[G - 1].sum + pb[G - 1].sum);
  if (whole_sums_ && range < 4.0 * static_cast<double>(G)) {
    // A stable counting sort in LANES contiguous runs, each counting into its own table and
    // scattered side by side: the range is often a handful of values, and one table's counters
    // would then wait on one another's increments.
    constexpr std::size_t LANES = 4;
    const auto buckets = static_cast<std::size_t>(range) + 1, run = (G + LANES - 1) / LANES;
    std::uint32_t* key = key32_.data();
    for (std::size_t i = 0; i < G; ++i) key[i] = static_cast<std::uint32_t>(top - merged_[i].sum);
    counts_.assign(LANES * buckets, 0);
    for (std::size_t j = 0; j < run; ++j)
      for (std::size_t lane = 0; lane < LANES; ++lane) {
        const std::size_t i = lane * run + j;
        if (i < G) ++counts_[lane * buckets + key[i]];
      }
    std::uint32_t sum = 0;
    for (std::size_t k = 0; k < buckets; ++k)
      for (std::size_t lane = 0; lane < LANES; ++lane) sum += std::exchange(counts_[lane * buckets + k], sum);
    for (std::size_t j = 0; j < run; ++j)
      for (std::size_t lane = 0; lane < LANES; ++lane) {
        const std::size_t i = lane * run + j;
        if (i < G) pa[counts_[lane * buckets + key[i]]++] = merged_[i];
      }
    return;
  }
  for (std::size_t i = 0; i < G; ++i) {
    order_[i] = static_cast<int>(i);
    keys_[i] = whole_sums_ ? static_cast<std::uint64_t>(top - merged_[i].sum) : ~ascending_key(merged_[i].sum);
  }
  radix_sort(G);
  for (std::size_t i = 0; i < G; ++i) pa[i] = merged_[static_cast<std::size_t>(order_[i])];
}

void KarmarkarKarp::merge_free(int a, int b, std::size_t G) {
  Part* pa = &parts_[static_cast<std::size_t>(a) * G];
  const Part* pb = &parts_[static_cast<std::size_t>(b) * G];
  int* ca = &count_[static_cast<std::size_t>(a) * G];
  const int* cb = &count_[static_cast<std::size_t>(b) * G];
  for (std::size_t i = 0; i < G; ++i) {
    const std::size_t j = G - 1 - i;
    merged_count_[i] = ca[i] + cb[j];
    if (ca[i] == 0 || cb[j] == 0) {
      merged_[i] = ca[i] == 0 ? pb[j] : pa[i];
      continue;
    }
    next_[static_cast<std::size_t>(pa[i].tail)] = pb[j].head;
    merged_[i] = {pa[i].sum + pb[j].sum, pa[i].head, pb[j].tail};
  }
  // Stable passes, the minor key first; complemented keys sort descending. Empty parts (first
  // item −1) tie only with each other.
  for (std::size_t i = 0; i < G; ++i) {
    keys_[i] = ~static_cast<std::uint64_t>(static_cast<std::uint32_t>(merged_[i].head + 1));
    order_[i] = static_cast<int>(i);
  }
  radix_sort(G);
  for (std::size_t i = 0; i < G; ++i)
    keys_[i] = ~static_cast<std::uint64_t>(merged_count_[static_cast<std::size_t>(order_[i])]);
  radix_sort(G);
  for (std::size_t i = 0; i < G; ++i) keys_[i] = ~ascending_key(merged_[static_cast<std::size_t>(order_[i])].sum);
  radix_sort(G);
  for (std::size_t i = 0; i < G; ++i) {
    pa[i] = merged_[static_cast<std::size_t>(order_[i])];
    ca[i] = merged_count_[static_cast<std::size_t>(order_[i])];
  }
}

void KarmarkarKarp::rank_heads(int n, int states) {
  // rank_[item] holds the item's state; it becomes the number of its state's items above it.
  heads_seen_.assign(static_cast<std::size_t>(states), 0);
  for (int item = n - 1; item >= 0; --item) {
    int& r = rank_[static_cast<std::size_t>(item)];
    r = heads_seen_[static_cast<std::size_t>(r)]++;
  }
}

}  // namespace ddpsim
