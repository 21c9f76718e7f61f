#include "data/sampler.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "common/error.hpp"
#include "common/rng.hpp"

namespace ddpsim {

DistributedSampler::DistributedSampler(std::span<const int> lengths, int G, std::uint64_t seed)
    : lengths_(lengths), G_(G), seed_(seed), cursors_(static_cast<std::size_t>(std::max(G, 0))) {
  if (G < 1) throw InputError("sampler: world size G must be ≥ 1, got " + std::to_string(G));
  shard_size_ = static_cast<std::int64_t>(lengths.size()) / G;
  if (shard_size_ < 1)
    throw InputError("sampler: dataset of " + std::to_string(lengths.size()) +
                     " samples is smaller than G=" + std::to_string(G) + " ranks");
}

const std::vector<std::int64_t>& DistributedSampler::permutation(std::int32_t epoch) {
  auto it = permutations_.find(epoch);
  if (it != permutations_.end()) return it->second;
  const std::int32_t oldest =
      std::min_element(cursors_.begin(), cursors_.end(), [](auto& a, auto& b) { return a.epoch < b.epoch; })->epoch;
  permutations_.erase(permutations_.begin(), permutations_.lower_bound(oldest));
  std::vector<std::int64_t> order(lengths_.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  Rng rng(seed_ + static_cast<std::uint64_t>(epoch));
  rng.shuffle(std::span<std::int64_t>(order));
  return permutations_.emplace(epoch, std::move(order)).first->second;
}

Sample DistributedSampler::next(int rank) {
  Cursor& cursor = cursors_[static_cast<std::size_t>(rank)];
  if (cursor.position == shard_size_) {
    ++cursor.epoch;
    cursor.position = 0;
  }
  const auto& order = permutation(cursor.epoch);
  const std::int64_t index = order[static_cast<std::size_t>(cursor.position * G_ + rank)];
  ++cursor.position;
  return {index, cursor.epoch, lengths_[static_cast<std::size_t>(index)]};
}

std::int64_t DistributedSampler::drawn(int rank) const {
  const Cursor& cursor = cursors_[static_cast<std::size_t>(rank)];
  return std::int64_t{cursor.epoch} * shard_size_ + cursor.position;
}

RankBuffers::RankBuffers(DistributedSampler& sampler)
    : sampler_(sampler), buffers_(static_cast<std::size_t>(sampler.ranks())) {}

void RankBuffers::fill(int g, std::size_t count) {
  auto& buffer = buffers_[static_cast<std::size_t>(g)];
  while (buffer.size() < count) buffer.push_back(sampler_.next(g));
}

void RankBuffers::fill_all(std::size_t count) {
  // Rank by rank within each round, not rank after rank: the ranks' next samples sit side by
  // side in the epoch's permutation, so a round reads it in order (at G = 1024 rank after rank
  // missed the cache on every sample). Each rank draws the same samples either way.
  for (bool short_of_count = true; short_of_count;) {
    short_of_count = false;
    for (int g = 0; g < ranks(); ++g) {
      auto& buffer = buffers_[static_cast<std::size_t>(g)];
      if (buffer.size() < count) buffer.push_back(sampler_.next(g));
      short_of_count |= buffer.size() < count;
    }
  }
}

void RankBuffers::take(int g, std::size_t n, std::vector<Sample>& out) {
  auto& buffer = buffers_[static_cast<std::size_t>(g)];
  if (n > buffer.size())
    throw std::logic_error("RankBuffers::take: rank " + std::to_string(g) + " asked for " + std::to_string(n) +
                           " samples, buffer holds " + std::to_string(buffer.size()));
  out.insert(out.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
  buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace ddpsim
