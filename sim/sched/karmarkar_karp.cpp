#include "sched/karmarkar_karp.hpp"

#include <algorithm>
#include <string>

#include <boost/sort/spreadsort/float_sort.hpp>

#include "common/error.hpp"

namespace ddpsim {

std::span<const int> KarmarkarKarp::partition(std::span<const double> weights, int G) {
  const int n = static_cast<int>(weights.size());
  if (G < 1 || n % G != 0)
    throw InputError("kk: " + std::to_string(n) + " items cannot form G=" + std::to_string(G) +
                     " parts of equal count");
  const int states = n / G;
  order_.resize(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) order_[static_cast<std::size_t>(i)] = {weights[static_cast<std::size_t>(i)], i};
  // Boost's radix-based float_sort: a comparison sort of 16k items costs more than all the merges.
  boost::sort::spreadsort::float_sort(
      order_.begin(), order_.end(),
      [](const std::pair<double, int>& x, unsigned offset) {
        return boost::sort::spreadsort::float_mem_cast<double, std::int64_t>(x.first) >> offset;
      },
      [](const std::pair<double, int>& x, const std::pair<double, int>& y) { return x.first < y.first; });

  // State s owns parts [s·G, (s+1)·G), sorted by sum, largest first. Initially each state
  // holds G consecutive items of the sorted order, one per part.
  parts_.resize(static_cast<std::size_t>(n));
  next_.assign(static_cast<std::size_t>(n), -1);
  for (int s = 0; s < states; ++s)
    for (int i = 0; i < G; ++i) {
      const auto [weight, item] = order_[static_cast<std::size_t>(s * G + (G - 1 - i))];
      parts_[static_cast<std::size_t>(s * G + i)] = {weight, item, item};
    }
  auto part = [&](int s, int i) -> Part& { return parts_[static_cast<std::size_t>(s) * G + i]; };
  auto spread = [&](int s) { return part(s, 0).sum - part(s, G - 1).sum; };
  // Heap order: largest spread on top; ties by largest part, then lower state id.
  auto below = [&](int a, int b) {
    if (spread(a) != spread(b)) return spread(a) < spread(b);
    if (part(a, 0).sum != part(b, 0).sum) return part(a, 0).sum < part(b, 0).sum;
    return a > b;
  };
  heap_.resize(static_cast<std::size_t>(states));
  for (int s = 0; s < states; ++s) heap_[static_cast<std::size_t>(s)] = s;
  std::make_heap(heap_.begin(), heap_.end(), below);

  merged_.resize(static_cast<std::size_t>(G));
  while (heap_.size() > 1) {
    std::pop_heap(heap_.begin(), heap_.end(), below);
    const int a = heap_.back();
    heap_.pop_back();
    std::pop_heap(heap_.begin(), heap_.end(), below);
    const int b = heap_.back();
    // Largest differencing: a's largest part takes b's smallest, and so on.
    for (int i = 0; i < G; ++i) {
      const Part& x = part(a, i);
      const Part& y = part(b, G - 1 - i);
      next_[static_cast<std::size_t>(x.tail)] = y.head;
      merged_[static_cast<std::size_t>(i)] = {x.sum + y.sum, x.head, y.tail};
    }
    std::sort(merged_.begin(), merged_.end(),
              [](const Part& x, const Part& y) { return x.sum != y.sum ? x.sum > y.sum : x.head < y.head; });
    std::copy(merged_.begin(), merged_.end(), parts_.begin() + static_cast<std::ptrdiff_t>(a) * G);
    heap_.back() = a;
    std::push_heap(heap_.begin(), heap_.end(), below);
  }

  result_.clear();
  for (int i = 0; i < G; ++i)
    for (int item = part(heap_.front(), i).head; item != -1; item = next_[static_cast<std::size_t>(item)])
      result_.push_back(item);
  return result_;
}

}  // namespace ddpsim
