// Karmarkar–Karp largest differencing into G parts, as VeRL's seqlen_balancing does it: with
// equal item counts to split a global batch over ranks (balance_batch), with free counts to
// cut one rank's batch into micro-batches (rearrange_micro_batches).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ddpsim {

// Keeps its scratch memory between calls (a global batch at G = 1024 is 16k items), so reuse
// one instance per policy.
class KarmarkarKarp {
 public:
  // Splits items 0..n-1 (n = weights.size(), a multiple of G, else InputError; weights finite,
  // else InputError) into G parts of n/G items. Returns the item indices part by part: part g is
  // [g·n/G, (g+1)·n/G). Parts come largest weight sum first. Ties break as in VeRL's
  // karmarkar_karp(equal_size=True): items by (weight, index); parts, and states of equal spread,
  // by sum, then item count, then first item (higher first). So integer weights give VeRL's
  // output item for item.
  //
  // With equal_size false, parts may hold any number of items (at least one each; n ≥ G, else
  // InputError), as in VeRL's karmarkar_karp(equal_size=False); part_sizes() then tells where
  // each part ends.
  std::span<const int> partition(std::span<const double> weights, int G, bool equal_size = true);
  // Items per part of the last partition, in the order partition() returned them.
  std::span<const int> part_sizes() const { return sizes_; }

 private:
  // A part under construction: its weight sum and its items as a linked list through next_,
  // so merging two parts is O(1). 16 bytes: its item count lives in count_.
  struct Part {
    double sum = 0.0;
    int head = -1;
    int tail = -1;
  };
  // Items in part i of state s: with equal counts the same in every part of a state (count_[s]),
  // with free counts count_[s·G + i] (0: empty). Counts only break ties between states of
  // unequal depth.
  int count(std::size_t s, std::size_t i, std::size_t G) const { return equal_ ? count_[s] : count_[s * G + i]; }

  // Stable LSD radix sort of order_[0, n) by keys_[0, n) (the keys move along). Comparison
  // sorts of the 16k items and of every merged state cost several times the merges themselves.
  void radix_sort(std::size_t n);
  template <int DIGIT_BITS>
  void radix_passes(std::size_t n, std::uint64_t varying);
  // With equal counts, ties in sum break by first item, and a state's parts keep its own first
  // items: rank_[item] becomes the item's place among its state's items, highest first.
  void rank_heads(int n, int states);
  // With equal counts and keys varying in at most 12 bits (token counts), sorts order_ by
  // (key, index) in one counting pass that also ranks each state's first items (rank_heads);
  // false where it does not apply.
  bool sort_and_rank(int n, int G);
  // keys_[0, n) := the weights' keys, order_ := 0..n-1; sets whole_sums_.
  void weight_keys(std::span<const double> weights);
  // result_ and sizes_ from the last state's parts and next_.
  void write_result(int final_state, int G);
  // State a absorbs state b (parts_, next_), its parts left largest first; with equal counts
  // and with free ones (parts may be empty).
  void merge_equal(int a, int b, std::size_t G);
  void merge_free(int a, int b, std::size_t G);

  std::vector<std::uint64_t> keys_, keys_scratch_;
  std::vector<int> order_, order_scratch_;
  std::vector<Part> parts_;
  std::vector<Part> merged_;
  std::vector<int> count_, merged_count_;
  bool equal_ = true;  // the last partition's equal_size
  std::vector<int> next_;
  std::vector<int> rank_, heads_seen_;
  std::vector<std::uint32_t> counts_, key32_;
  bool whole_sums_ = false;  // every weight whole: sums are exact integers
  std::vector<int> heap_;
  std::vector<int> result_;
  std::vector<int> sizes_;
};

}  // namespace ddpsim
