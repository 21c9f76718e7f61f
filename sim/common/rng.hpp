// Seeded randomness with results fixed by this code alone: std::mt19937_64 is specified
// bit for bit by the standard, but std::*_distribution and std::shuffle are not, and
// ddpsim promises byte-identical outputs for the same seed on every standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numbers>
#include <random>
#include <span>
#include <utility>

namespace ddpsim {

// A standard normal by Box–Muller from two uniforms in [0, 1) (one value per call: simplicity
// over speed), the same expression for every generator below.
inline double box_muller(double u1, double u2) {
  return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);  // 1 − u1 in (0, 1]
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  std::uint64_t bits() { return engine_(); }

  // Uniform integer in [0, n), n > 0, without modulo bias (rejection on the low range).
  std::uint64_t below(std::uint64_t n) {
    for (;;) {
      const std::uint64_t x = engine_();
      // limit = UINT64_MAX − (UINT64_MAX mod n) exceeds UINT64_MAX − n: below that, x is
      // accepted without the division that computes the limit.
      if (x <= UINT64_MAX - n || x < UINT64_MAX - UINT64_MAX % n) return x % n;
    }
  }

  // Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  double normal() {
    const double u1 = uniform();
    return box_muller(u1, uniform());
  }

  // Fisher–Yates, the same permutation for the same seed everywhere.
  template <class T>
  void shuffle(std::span<T> items) {
    // The draws do not depend on the items: a batch of them is drawn first and the items they
    // pick prefetched, so that the swaps, done in the same order, find them in cache (an epoch of
    // 3 M samples spans 12 MB).
    constexpr std::size_t BATCH = 16;
    std::size_t picked[BATCH];
    for (std::size_t i = items.size(); i > 1;) {
      const std::size_t count = std::min(BATCH, i - 1);
      for (std::size_t k = 0; k < count; ++k) {
        picked[k] = below(i - k);
        __builtin_prefetch(&items[picked[k]]);
      }
      for (std::size_t k = 0; k < count; ++k) std::swap(items[i - k - 1], items[picked[k]]);
      i -= count;
    }
  }

 private:
  std::mt19937_64 engine_;
};

// Draws keyed by a few integers (a step, a rank, …) rather than by a stream's position, so that
// an engine may draw them in any order and every policy still meets the same ones. SplitMix64,
// by hand: the standard library has no counter-based generator.
class KeyedRng {
 public:
  explicit KeyedRng(std::initializer_list<std::uint64_t> key) {
    for (const std::uint64_t k : key) state_ = mix(state_ ^ (k + 0x632be59bd9b4e019ULL));
  }
  std::uint64_t bits() { return mix(state_ += 0x9e3779b97f4a7c15ULL); }
  double uniform() { return static_cast<double>(bits() >> 11) * 0x1.0p-53; }
  double normal() {
    const double u1 = uniform();
    return box_muller(u1, uniform());
  }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t state_ = 0;
};

}  // namespace ddpsim
