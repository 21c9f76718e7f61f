// PyTorch DistributedSampler semantics over a dataset of lengths, plus the per-rank prefetch
// buffers the schedulers read. Epoch e shuffles all N indices with seed + e, drops the tail
// so every shard has N/G samples (drop_last), and shard g takes every G-th index from g.
// Ranks consume at their own pace, so each rank rolls over into its next epoch on its own.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

namespace ddpsim {

// One sample as the schedulers see it: where it came from and how long it is.
struct Sample {
  std::int64_t index = 0;  // dataset index
  std::int32_t epoch = 0;  // epoch of the rank's shard it was drawn in
  std::int32_t len = 0;    // tokens incl. [CLS]/[SEP], truncated
};

class DistributedSampler {
 public:
  // `lengths` must outlive the sampler. Throws InputError when N < G or N ≥ 2^31.
  DistributedSampler(std::span<const int> lengths, int G, std::uint64_t seed);

  Sample next(int rank);
  // Computes epoch 0's shards into this process's cache, which every sampler over the same
  // lengths, G and seed reads: a sweep warms it before forking the cells that share them.
  static void prepare(std::span<const int> lengths, int G, std::uint64_t seed);
  int ranks() const { return G_; }
  // Samples handed to rank g so far, over all epochs.
  std::int64_t drawn(int rank) const;
  std::int64_t shard_size() const { return shard_size_; }

 private:
  // A drawn sample of an epoch's shard, with its length beside it: ranks read their shards in
  // order, not the dataset at random.
  struct Slot {
    std::int32_t index;
    std::int32_t len;
  };
  using Shards = std::shared_ptr<const std::vector<Slot>>;
  const std::vector<Slot>& permutation(std::int32_t epoch);
  static Shards shuffled(std::span<const int> lengths, int G, std::uint64_t seed, std::int64_t shard_size);

  std::span<const int> lengths_;
  int G_;
  std::uint64_t seed_;
  std::int64_t shard_size_;
  struct Cursor {
    std::int32_t epoch = 0;
    std::int64_t position = 0;  // within the shard
  };
  std::vector<Cursor> cursors_;
  // Epoch → its shards one after the other (shard g at [g·shard_size, (g+1)·shard_size)), so a
  // rank reads its own samples in order; computed once, dropped when no rank needs it.
  std::map<std::int32_t, Shards> permutations_;
};

// Each rank's next samples in arrival order: the sampler feeds the back, schedulers take
// from the front (any sample they do not take stays for a later step).
class RankBuffers {
 public:
  explicit RankBuffers(DistributedSampler& sampler);

  int ranks() const { return static_cast<int>(buffers_.size()); }
  // Tops rank g's buffer up to `count` samples.
  void fill(int g, std::size_t count);
  void fill_all(std::size_t count);
  std::span<const Sample> buffer(int g) const {
    const Buffer& b = buffers_[static_cast<std::size_t>(g)];
    return std::span<const Sample>(b.items).subspan(b.head);
  }
  // The lengths of buffer(g), alone: what cost curves read, a quarter of the bytes.
  std::span<const std::int32_t> lengths(int g) const {
    const Buffer& b = buffers_[static_cast<std::size_t>(g)];
    return std::span<const std::int32_t>(b.lengths).subspan(b.head);
  }
  // Moves the first n samples of rank g's buffer to `out` (appending); n ≤ buffer size.
  void take(int g, std::size_t n, std::vector<Sample>& out);

 private:
  DistributedSampler& sampler_;
  // Contiguous, not a deque: policies scan every buffer each step (G·K samples at G = 1024).
  // Taken samples stay behind `head` until a fill finds as many dead as live ones.
  struct Buffer {
    std::vector<Sample> items;
    std::vector<std::int32_t> lengths;  // items[i].len
    std::size_t head = 0;
  };
  std::vector<Buffer> buffers_;
};

}  // namespace ddpsim
