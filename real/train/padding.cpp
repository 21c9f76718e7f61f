#include "train/padding.hpp"

#include <algorithm>

namespace ddptrain {

void pad_batch(Batch& batch, int multiple, int max_length) {
  const int length = padded_length(batch.max_len, multiple, max_length);
  if (length == batch.max_len) return;
  const std::int64_t b = batch.ids.size(0), extra = length - batch.max_len;
  batch.ids = torch::cat({batch.ids, torch::zeros({b, extra}, batch.ids.options())}, 1);  // [PAD] is id 0
  batch.mask = torch::cat({batch.mask, torch::zeros({b, extra}, batch.mask.options())}, 1);
  batch.max_len = length;
}

}  // namespace ddptrain
