#include "sched/verl_balance.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <numeric>
#include <string>
#include <utility>

#include "common/error.hpp"

namespace ddpsim {

namespace {

// Ascending in, VeRL's part[::2] + part[1::2][::-1] out: the lightest at both ends.
std::vector<int> light_heavy_light(const std::vector<int>& ascending) {
  std::vector<int> out, odd;
  for (std::size_t i = 0; i < ascending.size(); ++i) (i % 2 ? odd : out).push_back(ascending[i]);
  out.insert(out.end(), odd.rbegin(), odd.rend());
  return out;
}

struct MicroBatch {
  std::vector<int> items;  // positions in `lengths`, ascending
  double workload = 0;
};

}  // namespace

VerlPlan verl_balance(std::span<const int> lengths, int G, const VerlOptions& o, KarmarkarKarp& kk) {
  const std::size_t n = lengths.size(), ranks = static_cast<std::size_t>(G), per_rank = n / ranks;
  std::vector<double> workload(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (lengths[i] > o.max_token_len)
      throw InputError("verl: a sample of " + std::to_string(lengths[i]) +
                       " tokens exceeds max_token_len=" + std::to_string(o.max_token_len));
    workload[i] = double(o.linear) * lengths[i] + double(o.quadratic) * lengths[i] * lengths[i];
  }
  auto by_workload = [&](int a, int b) {
    return std::pair(workload[static_cast<std::size_t>(a)], a) < std::pair(workload[static_cast<std::size_t>(b)], b);
  };

  // _balance_batch: equal-count parts, each ordered by (workload, index) and then light, heavy, light.
  std::vector<std::vector<int>> parts(ranks);
  const std::span<const int> split = o.balance ? kk.partition(workload, G) : std::span<const int>{};
  for (std::size_t g = 0; g < ranks; ++g) {
    auto& part = parts[g];
    for (std::size_t i = g * per_rank; i < (g + 1) * per_rank; ++i)
      part.push_back(o.balance ? split[i] : static_cast<int>(i));
    if (!o.balance) continue;
    std::sort(part.begin(), part.end(), by_workload);
    part = light_heavy_light(part);
  }

  // rearrange_micro_batches with same_micro_num_in_dp: one count for all ranks, the largest wanted.
  std::size_t count = 1;
  for (const auto& part : parts) {
    std::int64_t tokens = 0;
    for (int i : part) tokens += lengths[static_cast<std::size_t>(i)];
    const auto wanted = static_cast<std::size_t>((tokens + o.max_token_len - 1) / o.max_token_len);
    count = std::max(count, std::min(part.size(), wanted));
  }

  VerlPlan plan(ranks);
  std::vector<double> local;
  for (std::size_t g = 0; g < ranks; ++g) {
    const auto& part = parts[g];
    local.resize(part.size());
    for (std::size_t i = 0; i < part.size(); ++i) local[i] = workload[static_cast<std::size_t>(part[i])];
    for (const auto& items : balanced_micro_batches(local, static_cast<int>(count), o.micro_balance, kk)) {
      plan[g].emplace_back();
      for (int i : items) plan[g].back().push_back(part[static_cast<std::size_t>(i)]);
    }
  }
  return plan;
}

std::vector<std::vector<int>> balanced_micro_batches(std::span<const double> workload, int count,
                                                     bool light_heavy_light, KarmarkarKarp& kk) {
  // One micro-batch holds every item, in the ascending order the loop below would sort them
  // into: no differencing needed (VeRL's default token cap gives one per rank at G = 1024).
  if (count == 1 && !workload.empty() &&
      std::all_of(workload.begin(), workload.end(), [](double w) { return std::isfinite(w); })) {
    std::vector<std::vector<int>> out(1, std::vector<int>(workload.size()));
    std::iota(out[0].begin(), out[0].end(), 0);
    return out;
  }
  const std::span<const int> items = kk.partition(workload, count, false);
  std::vector<MicroBatch> micro;
  std::size_t begin = 0;
  for (const int size : kk.part_sizes()) {
    MicroBatch mb;
    for (std::size_t i = begin; i < begin + static_cast<std::size_t>(size); ++i) mb.items.push_back(items[i]);
    begin += static_cast<std::size_t>(size);
    std::sort(mb.items.begin(), mb.items.end());
    for (int i : mb.items) mb.workload += workload[static_cast<std::size_t>(i)];
    micro.push_back(std::move(mb));
  }
  if (light_heavy_light) {
    std::sort(micro.begin(), micro.end(), [](const MicroBatch& a, const MicroBatch& b) {
      return std::pair(a.workload, a.items.front()) > std::pair(b.workload, b.items.front());
    });
    // idx[::2][::-1] + idx[1::2]: the lighter micro-batches at both ends.
    std::vector<MicroBatch> ordered, odd;
    for (std::size_t m = 0; m < micro.size(); ++m) (m % 2 ? odd : ordered).push_back(std::move(micro[m]));
    std::reverse(ordered.begin(), ordered.end());
    std::move(odd.begin(), odd.end(), std::back_inserter(ordered));
    micro = std::move(ordered);
  }
  std::vector<std::vector<int>> out;
  for (auto& mb : micro) out.push_back(std::move(mb.items));
  return out;
}

}  // namespace ddpsim
