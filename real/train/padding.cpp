#include "train/padding.hpp"

#include <algorithm>

namespace ddptrain {

int padded_length(int longest, int multiple, int max_length) {
  if (longest <= 0 || multiple <= 1) return longest;
  const int rounded = (longest + multiple - 1) / multiple * multiple;
  return std::max(longest, std::min(rounded, max_length));  // a sample is never cut to fit
}

void pad_batch(Batch& batch, int multiple, int max_length) {
  const int length = padded_length(batch.max_len, multiple, max_length);
  if (length == batch.max_len) return;
  const std::int64_t b = batch.ids.size(0), extra = length - batch.max_len;
  batch.ids = torch::cat({batch.ids, torch::zeros({b, extra}, batch.ids.options())}, 1);  // [PAD] is id 0
  batch.mask = torch::cat({batch.mask, torch::zeros({b, extra}, batch.mask.options())}, 1);
  batch.max_len = length;
}

void pad_row(ddpsim::RankStep& row, int multiple, int max_length) {
  if (multiple <= 1) return;
  row.max_len = padded_length(row.max_len, multiple, max_length);
  if (row.micro.empty()) {
    row.padded_tokens = std::int64_t{row.batch_size} * row.max_len;
    return;
  }
  row.padded_tokens = 0;
  for (auto& m : row.micro) {
    m.max_len = padded_length(m.max_len, multiple, max_length);
    row.padded_tokens += std::int64_t{m.batch_size} * m.max_len;
  }
}

}  // namespace ddptrain
