// DistributedSampler semantics and prefetch buffers.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "common/error.hpp"
#include "data/sampler.hpp"

using namespace ddpsim;

namespace {
std::vector<int> iota_lengths(int n) {
  std::vector<int> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 1);
  return v;
}
}  // namespace

TEST_CASE("each epoch's shards partition the dataset minus the dropped tail") {
  const auto lengths = iota_lengths(103);
  DistributedSampler sampler(lengths, 4, 7);
  CHECK(sampler.shard_size() == 25);
  std::set<std::int64_t> seen;
  for (int g = 0; g < 4; ++g)
    for (int i = 0; i < 25; ++i) {
      const Sample s = sampler.next(g);
      CHECK(s.epoch == 0);
      CHECK(s.len == lengths[static_cast<std::size_t>(s.index)]);
      CHECK(seen.insert(s.index).second);
    }
  CHECK(seen.size() == 100);
}

TEST_CASE("shard g takes every G-th index of the epoch's permutation") {
  const auto lengths = iota_lengths(12);
  DistributedSampler three(lengths, 3, 1), one(lengths, 1, 1);
  std::vector<std::int64_t> permutation;
  for (int i = 0; i < 12; ++i) permutation.push_back(one.next(0).index);
  for (int g = 0; g < 3; ++g)
    for (int i = 0; i < 4; ++i) CHECK(three.next(g).index == permutation[static_cast<std::size_t>(i * 3 + g)]);
}

TEST_CASE("epochs roll over per rank with a new permutation") {
  const auto lengths = iota_lengths(40);
  DistributedSampler sampler(lengths, 2, 3);
  std::vector<std::int64_t> first, second;
  for (int i = 0; i < 20; ++i) first.push_back(sampler.next(0).index);
  for (int i = 0; i < 20; ++i) {
    const Sample s = sampler.next(0);
    CHECK(s.epoch == 1);
    second.push_back(s.index);
  }
  CHECK(first != second);
  CHECK(sampler.drawn(0) == 40);
  CHECK(sampler.drawn(1) == 0);
  CHECK(sampler.next(1).epoch == 0);  // the other rank is still in epoch 0
}

TEST_CASE("the same seed gives the same stream, another seed another") {
  const auto lengths = iota_lengths(50);
  DistributedSampler a(lengths, 2, 9), b(lengths, 2, 9), c(lengths, 2, 10);
  bool differs = false;
  for (int i = 0; i < 60; ++i) {
    const auto x = a.next(i % 2), y = b.next(i % 2), z = c.next(i % 2);
    CHECK(x.index == y.index);
    differs |= x.index != z.index;
  }
  CHECK(differs);
}

TEST_CASE("samplers share a permutation only over the same lengths, G and seed") {
  auto lengths = iota_lengths(60);
  const auto stream = [&](int G, std::uint64_t seed) {
    DistributedSampler sampler(lengths, G, seed);
    std::vector<std::pair<std::int64_t, int>> out;
    for (int i = 0; i < 30; ++i) {
      const Sample s = sampler.next(0);
      out.emplace_back(s.index, s.len);
    }
    return out;
  };
  DistributedSampler::prepare(lengths, 2, 5);
  const auto first = stream(2, 5);
  CHECK(first == stream(2, 5));
  CHECK(first != stream(3, 5));
  // The same buffer with other contents, as a freed and reallocated dataset may be: its lengths
  // are read afresh, never the cached ones.
  for (int& len : lengths) len += 1000;
  const auto edited = stream(2, 5);
  for (std::size_t i = 0; i < first.size(); ++i) {
    CHECK(edited[i].first == first[i].first);
    CHECK(edited[i].second == first[i].second + 1000);
  }
}

TEST_CASE("a dataset smaller than G is a clear error") {
  const auto lengths = iota_lengths(3);
  CHECK_THROWS_WITH_AS(DistributedSampler(lengths, 4, 0), doctest::Contains("smaller than G=4"), InputError);
}

TEST_CASE("buffers keep arrival order and untaken samples stay") {
  const auto lengths = iota_lengths(64);
  DistributedSampler sampler(lengths, 2, 5), reference(lengths, 2, 5);
  RankBuffers buffers(sampler);
  buffers.fill_all(8);
  CHECK(buffers.buffer(0).size() == 8);
  std::vector<Sample> taken;
  buffers.take(0, 3, taken);
  buffers.fill(0, 8);
  buffers.take(0, 8, taken);
  REQUIRE(taken.size() == 11);
  for (const Sample& s : taken) CHECK(s.index == reference.next(0).index);
  CHECK_THROWS(buffers.take(0, 1, taken));
}
