#include "pipeline/partition.hpp"

#include <algorithm>
#include <functional>

#include "common/error.hpp"

namespace ddpsim::pipeline {

namespace {

int layers(const PartitionProblem& p) {
  return static_cast<int>(p.layers.size());
}

int end_of(const PartitionProblem& p, const Partition& first, int stage) {
  return stage_end(first, stage, layers(p));
}

double range_time(const PartitionProblem& p, int from, int to) {
  double t = 0;
  for (int i = from; i < to; ++i) t += p.layers[static_cast<std::size_t>(i)].time;
  return t;
}

double range_memory(const PartitionProblem& p, int stage, int from, int to) {
  double state = 0, activations = 0;
  for (int i = from; i < to; ++i) {
    state += p.layers[static_cast<std::size_t>(i)].state_bytes;
    activations += p.layers[static_cast<std::size_t>(i)].activation_bytes;
  }
  return state + p.in_flight[static_cast<std::size_t>(stage)] * activations;
}

// The contiguous partition minimising the largest cost(stage, from, to); ties go to the
// earliest boundaries.
Partition min_max(const PartitionProblem& p, const std::function<double(int, int, int)>& cost) {
  const int S = p.stages(), n = layers(p);
  constexpr double INF = std::numeric_limits<double>::infinity();
  // best[s][j]: the least largest cost of stages 0..s-1 over layers [0, j); from[s][j] its last boundary.
  std::vector<std::vector<double>> best(static_cast<std::size_t>(S) + 1, std::vector<double>(n + 1, INF));
  std::vector<std::vector<int>> from(static_cast<std::size_t>(S) + 1, std::vector<int>(n + 1, 0));
  best[0][0] = 0;
  for (int s = 1; s <= S; ++s)
    for (int j = s; j <= n - (S - s); ++j)
      for (int i = s - 1; i < j; ++i) {
        const double v =
            std::max(best[static_cast<std::size_t>(s) - 1][static_cast<std::size_t>(i)], cost(s - 1, i, j));
        if (v < best[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)]) {
          best[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] = v;
          from[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)] = i;
        }
      }
  Partition first(static_cast<std::size_t>(S));
  for (int s = S, j = n; s >= 1; --s) {
    j = from[static_cast<std::size_t>(s)][static_cast<std::size_t>(j)];
    first[static_cast<std::size_t>(s) - 1] = j;
  }
  return first;
}

std::vector<double> times_slowest_first(const PartitionProblem& p, const Partition& first) {
  std::vector<double> t;
  for (int s = 0; s < p.stages(); ++s) t.push_back(stage_time(p, first, s));
  std::sort(t.begin(), t.end(), std::greater<>());
  return t;
}

Partition balanced(const PartitionProblem& p) {
  const Partition by_time = min_max(p, [&](int, int i, int j) { return range_time(p, i, j); });
  const double memory_bound = max_stage_memory(p, by_time);
  Partition current = min_max(p, [&](int s, int i, int j) { return range_memory(p, s, i, j); });
  auto fits = [&](const Partition& q) {
    for (int s = 0; s < p.stages(); ++s) {
      if (end_of(p, q, s) <= q[static_cast<std::size_t>(s)]) return false;  // a stage without layers
      const double m = stage_memory(p, q, s);
      if (m > p.capacity_bytes) return false;
    }
    return max_stage_memory(p, q) <= memory_bound;
  };
  for (bool moved = true; moved;) {
    moved = false;
    int slowest = 0;
    for (int s = 1; s < p.stages(); ++s)
      if (stage_time(p, current, s) > stage_time(p, current, slowest)) slowest = s;
    // Its last layer to the next stage, or its first to the previous one: the lighter neighbour first.
    std::vector<Partition> moves;
    const auto sl = static_cast<std::size_t>(slowest);
    if (slowest + 1 < p.stages()) {
      Partition q = current;
      --q[sl + 1];
      moves.push_back(q);
    }
    if (slowest > 0) {
      Partition q = current;
      ++q[sl];
      moves.push_back(q);
    }
    if (moves.size() == 2 && stage_time(p, current, slowest - 1) < stage_time(p, current, slowest + 1))
      std::swap(moves[0], moves[1]);
    const auto before = times_slowest_first(p, current);
    for (const Partition& q : moves)
      if (fits(q) && times_slowest_first(p, q) < before) {
        current = q;
        moved = true;
        break;
      }
  }
  return current;
}

}  // namespace

int stage_end(const Partition& first, int stage, int layers) {
  return stage + 1 < static_cast<int>(first.size()) ? first[static_cast<std::size_t>(stage) + 1] : layers;
}

std::vector<int> layers_per_stage(const Partition& first, int layers) {
  std::vector<int> counts;
  for (int s = 0; s < static_cast<int>(first.size()); ++s)
    counts.push_back(stage_end(first, s, layers) - first[static_cast<std::size_t>(s)]);
  return counts;
}

double stage_time(const PartitionProblem& p, const Partition& first, int stage) {
  return range_time(p, first[static_cast<std::size_t>(stage)], end_of(p, first, stage));
}

double stage_memory(const PartitionProblem& p, const Partition& first, int stage) {
  return range_memory(p, stage, first[static_cast<std::size_t>(stage)], end_of(p, first, stage));
}

double max_stage_time(const PartitionProblem& p, const Partition& first) {
  double most = 0;
  for (int s = 0; s < p.stages(); ++s) most = std::max(most, stage_time(p, first, s));
  return most;
}

double max_stage_memory(const PartitionProblem& p, const Partition& first) {
  double most = 0;
  for (int s = 0; s < p.stages(); ++s) most = std::max(most, stage_memory(p, first, s));
  return most;
}

const std::vector<std::string>& partition_names() {
  static const std::vector<std::string> names = {"uniform", "time", "memory", "balanced"};
  return names;
}

Partition make_partition(const std::string& name, const PartitionProblem& p) {
  const int S = p.stages(), n = layers(p);
  if (S < 1 || n < S)
    throw InputError("partition: " + std::to_string(n) + " layers cannot fill " + std::to_string(S) +
                     " stages (each stage needs at least one layer)");
  Partition first;
  if (name == "uniform") {
    for (int s = 0, at = 0; s < S; ++s) {
      first.push_back(at);
      at += n / S + (s < n % S ? 1 : 0);
    }
  } else if (name == "time") {
    first = min_max(p, [&](int, int i, int j) { return range_time(p, i, j); });
  } else if (name == "memory") {
    first = min_max(p, [&](int s, int i, int j) { return range_memory(p, s, i, j); });
  } else if (name == "balanced") {
    first = balanced(p);
  } else {
    throw InputError("unknown partition \"" + name + "\" (known: uniform, time, memory, balanced)");
  }
  for (int s = 0; s < S; ++s)
    if (const double m = stage_memory(p, first, s); m > p.capacity_bytes)
      throw InputError("partition " + name + ": stage " + std::to_string(s) + " needs " +
                       std::to_string(m / (1 << 20)) + " MiB, more than the device's " +
                       std::to_string(p.capacity_bytes / (1 << 20)) + " MiB");
  return first;
}

}  // namespace ddpsim::pipeline
