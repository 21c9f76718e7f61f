// PyTorch DDP's gradient bucketing: parameters in reverse registration order fill buckets of
// about `cap` bytes (the first one `first_cap`, so communication starts early); a bucket can
// be reduced once backward has produced all its gradients.
#pragma once

#include <span>
#include <vector>

#include "model/perf_model.hpp"

namespace ddpsim {

struct Bucket {
  double bytes = 0;
  double ready_fraction = 0;  // share of backward elapsed when its last gradient exists
};

// DDP's assignment rule, shared by the simulator and the trainer: given each tensor's bytes in
// registration order, the tensor indices of each bucket in reduction order (the first bucket
// holds the last tensors). A bucket closes once it reaches its cap, so one big tensor (the
// word embeddings) makes a bucket of its own.
std::vector<std::vector<std::size_t>> assign_buckets(std::span<const double> bytes, double cap_bytes,
                                                     double first_cap_bytes);

// The model's buckets, in reduction order.
std::vector<Bucket> make_buckets(const PerfModel& model, double cap_bytes, double first_cap_bytes);

}  // namespace ddpsim
