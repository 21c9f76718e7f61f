#include "data/sampler.hpp"

#include <algorithm>
#include <deque>
#include <mutex>
#include <numeric>
#include <string>

#include "common/error.hpp"
#include "common/rng.hpp"

namespace ddpsim {

DistributedSampler::DistributedSampler(std::span<const int> lengths, int G, std::uint64_t seed)
    : lengths_(lengths), G_(G), seed_(seed), cursors_(static_cast<std::size_t>(std::max(G, 0))) {
  if (G < 1) throw InputError("sampler: world size G must be ≥ 1, got " + std::to_string(G));
  shard_size_ = static_cast<std::int64_t>(lengths.size()) / G;
  if (lengths.size() > static_cast<std::size_t>(INT32_MAX))
    throw InputError("sampler: dataset of " + std::to_string(lengths.size()) + " samples exceeds 2^31 - 1");
  if (shard_size_ < 1)
    throw InputError("sampler: dataset of " + std::to_string(lengths.size()) +
                     " samples is smaller than G=" + std::to_string(G) + " ranks");
}

// Epochs' shards shared by the samplers of a process: a run's policies, its noise-off replay and
// a sweep's cells draw the same permutation, which costs more than a small cell's simulation.
DistributedSampler::Shards DistributedSampler::shuffled(std::span<const int> lengths, int G, std::uint64_t seed,
                                                        std::int64_t shard_size) {
  struct Entry {
    std::vector<int> lengths;  // a copy: a freed and reallocated dataset may reuse the address
    std::uint64_t seed;
    int G;
    Shards shards;
  };
  static std::mutex mutex;
  static std::deque<Entry> cache;  // newest last; a few entries, a few epochs' worth of memory
  {
    const std::lock_guard lock(mutex);
    for (const Entry& e : cache)
      if (e.seed == seed && e.G == G && std::ranges::equal(e.lengths, lengths)) return e.shards;
  }
  // 32-bit indices: the same permutation in half the bytes, which the shuffle's swaps hit at random.
  std::vector<std::int32_t> order(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  Rng rng(seed);
  rng.shuffle(std::span<std::int32_t>(order));
  // A transpose (rank g's samples sit G apart in `order`), in tiles that stay in cache.
  constexpr std::int64_t TILE = 64;
  auto shards = std::make_shared<std::vector<Slot>>(static_cast<std::size_t>(shard_size * G));
  for (std::int64_t p0 = 0; p0 < shard_size; p0 += TILE)
    for (std::int64_t g0 = 0; g0 < G; g0 += TILE)
      for (std::int64_t position = p0; position < std::min(p0 + TILE, shard_size); ++position)
        for (std::int64_t g = g0; g < std::min<std::int64_t>(g0 + TILE, G); ++g) {
          const std::int32_t index = order[static_cast<std::size_t>(position * G + g)];
          (*shards)[static_cast<std::size_t>(g * shard_size + position)] = {index,
                                                                            lengths[static_cast<std::size_t>(index)]};
        }
  // A dataset too large for the bound is never kept: its samplers hold their epochs alone, as
  // before the cache, and drop them when done.
  constexpr std::size_t ENTRIES = 8, BYTES = std::size_t{64} << 20;
  if (lengths.size() * (sizeof(int) + sizeof(Slot)) > BYTES) return shards;
  const std::lock_guard lock(mutex);
  const auto footprint = [](const Entry& e) {
    return e.lengths.size() * sizeof(int) + e.shards->size() * sizeof(Slot);
  };
  cache.push_back({{lengths.begin(), lengths.end()}, seed, G, shards});
  std::size_t bytes = 0;
  for (const Entry& e : cache) bytes += footprint(e);
  while (cache.size() > ENTRIES || bytes > BYTES) {
    bytes -= footprint(cache.front());
    cache.pop_front();
  }
  return shards;
}

void DistributedSampler::prepare(std::span<const int> lengths, int G, std::uint64_t seed) {
  const DistributedSampler sampler(lengths, G, seed);  // its checks
  shuffled(lengths, G, seed, sampler.shard_size_);
}

const std::vector<DistributedSampler::Slot>& DistributedSampler::permutation(std::int32_t epoch) {
  auto it = permutations_.find(epoch);
  if (it != permutations_.end()) return *it->second;
  const std::int32_t oldest =
      std::min_element(cursors_.begin(), cursors_.end(), [](auto& a, auto& b) { return a.epoch < b.epoch; })->epoch;
  permutations_.erase(permutations_.begin(), permutations_.lower_bound(oldest));
  return *permutations_.emplace(epoch, shuffled(lengths_, G_, seed_ + static_cast<std::uint64_t>(epoch), shard_size_))
              .first->second;
}

Sample DistributedSampler::next(int rank) {
  Cursor& cursor = cursors_[static_cast<std::size_t>(rank)];
  if (cursor.position == shard_size_) {
    ++cursor.epoch;
    cursor.position = 0;
  }
  const Slot slot = permutation(cursor.epoch)[static_cast<std::size_t>(rank * shard_size_ + cursor.position)];
  ++cursor.position;
  return {slot.index, cursor.epoch, slot.len};
}

std::int64_t DistributedSampler::drawn(int rank) const {
  const Cursor& cursor = cursors_[static_cast<std::size_t>(rank)];
  return std::int64_t{cursor.epoch} * shard_size_ + cursor.position;
}

RankBuffers::RankBuffers(DistributedSampler& sampler)
    : sampler_(sampler), buffers_(static_cast<std::size_t>(sampler.ranks())) {}

void RankBuffers::fill(int g, std::size_t count) {
  Buffer& b = buffers_[static_cast<std::size_t>(g)];
  if (b.head > 0 && b.head >= b.items.size() - b.head) {
    b.items.erase(b.items.begin(), b.items.begin() + static_cast<std::ptrdiff_t>(b.head));
    b.lengths.erase(b.lengths.begin(), b.lengths.begin() + static_cast<std::ptrdiff_t>(b.head));
    b.head = 0;
  }
  while (b.items.size() - b.head < count) {
    b.items.push_back(sampler_.next(g));
    b.lengths.push_back(b.items.back().len);
  }
}

void RankBuffers::fill_all(std::size_t count) {
  for (int g = 0; g < ranks(); ++g) fill(g, count);
}

void RankBuffers::take(int g, std::size_t n, std::vector<Sample>& out) {
  Buffer& b = buffers_[static_cast<std::size_t>(g)];
  const std::size_t held = b.items.size() - b.head;
  if (n > held)
    throw std::logic_error("RankBuffers::take: rank " + std::to_string(g) + " asked for " + std::to_string(n) +
                           " samples, buffer holds " + std::to_string(held));
  const auto first = b.items.begin() + static_cast<std::ptrdiff_t>(b.head);
  out.insert(out.end(), first, first + static_cast<std::ptrdiff_t>(n));
  b.head += n;
}

}  // namespace ddpsim
