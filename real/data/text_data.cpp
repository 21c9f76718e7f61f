#include "data/text_data.hpp"

#include <algorithm>

#include "common/json_util.hpp"
#include "common/rng.hpp"
#include "data/glue_tsv.hpp"
#include "data/lengths.hpp"
#include "data/tokenizer.hpp"

namespace ddptrain {

TextData load_glue(const std::string& tsv, const std::string& vocab, int max_length, int classes) {
  auto tokenizer = ddpsim::Tokenizer::from_vocab_file(vocab);
  TextData data;
  ddpsim::read_glue_tsv(tsv, [&](std::string_view sentence, int label, std::int64_t line) {
    if (label < 0 || label >= classes)
      throw ddpsim::InputError(tsv + ":" + std::to_string(line) + ": label " + std::to_string(label) +
                               " is out of range: the classifier has " + std::to_string(classes) +
                               " classes, expected 0.." + std::to_string(classes - 1));
    const auto ids = tokenizer.encode(sentence, static_cast<std::size_t>(max_length));
    data.ids.emplace_back(ids.begin(), ids.end());
    data.labels.push_back(label);
    data.lengths.push_back(static_cast<int>(ids.size()));
  });
  if (data.ids.empty()) throw ddpsim::InputError(tsv + ": no samples");
  data.description = tsv + " (" + std::to_string(data.ids.size()) + " sentences, tokenized with " + vocab + ")";
  return data;
}

TextData synthetic_data(const std::string& histogram, std::int64_t samples, int vocab_size, int max_length,
                        std::uint64_t seed) {
  const auto hist = histogram == "sst2" ? ddpsim::sst2_train_histogram()
                                        : ddpsim::histogram_from_json(ddpsim::read_json_file(histogram), histogram);
  const auto lengths = ddpsim::synthetic_lengths(hist, samples, max_length, seed);
  ddpsim::Rng rng(seed ^ 0x5eed5eedULL);
  TextData data;
  constexpr std::int64_t CLS = 101, SEP = 102, FIRST_PIECE = 999;  // the uncased vocab's layout
  const std::int64_t span = std::max<std::int64_t>(1, vocab_size - FIRST_PIECE);
  for (std::int64_t i = 0; i < samples; ++i) {
    const int len = lengths[static_cast<std::size_t>(i)];
    std::vector<std::int64_t> ids(static_cast<std::size_t>(len));
    ids.front() = CLS;
    ids.back() = SEP;
    for (int t = 1; t + 1 < len; ++t)
      ids[static_cast<std::size_t>(t)] = FIRST_PIECE + static_cast<std::int64_t>(rng.below(span));
    data.ids.push_back(std::move(ids));
    data.labels.push_back(static_cast<std::int64_t>(rng.below(2)));
    data.lengths.push_back(len);
  }
  data.description = "synthetic: " + std::to_string(samples) + " samples, lengths from " +
                     (histogram == "sst2" ? std::string("the embedded SST-2 histogram") : histogram);
  return data;
}

Batch collate(const TextData& data, std::span<const ddpsim::Sample> samples, const torch::Device& device) {
  Batch batch;
  for (const auto& s : samples) batch.max_len = std::max(batch.max_len, s.len);
  const auto b = static_cast<std::int64_t>(samples.size());
  auto ids = torch::zeros({b, batch.max_len}, torch::kInt64);  // [PAD] is id 0
  auto mask = torch::zeros({b, batch.max_len}, torch::kBool);
  auto labels = torch::empty({b}, torch::kInt64);
  auto ids_a = ids.accessor<std::int64_t, 2>();
  auto mask_a = mask.accessor<bool, 2>();
  auto labels_a = labels.accessor<std::int64_t, 1>();
  for (std::int64_t i = 0; i < b; ++i) {
    const auto& sample = data.ids[static_cast<std::size_t>(samples[static_cast<std::size_t>(i)].index)];
    for (std::size_t t = 0; t < sample.size(); ++t) {
      ids_a[i][static_cast<std::int64_t>(t)] = sample[t];
      mask_a[i][static_cast<std::int64_t>(t)] = true;
    }
    batch.real_tokens += static_cast<std::int64_t>(sample.size());
    labels_a[i] = data.labels[static_cast<std::size_t>(samples[static_cast<std::size_t>(i)].index)];
  }
  batch.ids = ids.to(device);
  batch.mask = mask.to(device);
  batch.labels = labels.to(device);
  return batch;
}

Batch full_batch(int b, int L, const torch::Device& device) {
  Batch batch;
  batch.max_len = L;
  batch.real_tokens = std::int64_t{b} * L;
  const auto options = torch::TensorOptions().device(device);
  batch.ids = torch::full({b, L}, 1000, options.dtype(torch::kInt64));  // a word piece, not a special token
  batch.mask = torch::ones({b, L}, options.dtype(torch::kBool));
  batch.labels = torch::zeros({b}, options.dtype(torch::kInt64));
  return batch;
}

}  // namespace ddptrain
