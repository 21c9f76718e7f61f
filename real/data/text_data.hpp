// The samples ddptrain trains on: GLUE TSV sentences through the project's WordPiece tokenizer,
// or synthetic samples whose lengths follow a histogram (random ids and labels, for timing
// studies); and the padded batch of a rank's samples (dynamic padding: to the longest one).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "data/sampler.hpp"

namespace ddptrain {

struct TextData {
  std::vector<std::vector<std::int64_t>> ids;  // [CLS] ... [SEP], truncated to max_length
  std::vector<std::int64_t> labels;
  std::vector<int> lengths;  // ids[i].size(), what the schedulers see
  std::string description;
};

// Throws ddpsim::InputError naming the file (and line) for a missing vocab, a malformed TSV or a
// label outside the classifier's 0..classes-1.
TextData load_glue(const std::string& tsv, const std::string& vocab, int max_length, int classes);
// `samples` lengths drawn from the histogram file (a `ddpsim lengths` JSON, or "sst2" for the
// embedded SST-2 train one); ids uniform over the vocabulary's word pieces, labels uniform.
TextData synthetic_data(const std::string& histogram, std::int64_t samples, int vocab_size, int max_length,
                        std::uint64_t seed);

struct Batch {
  torch::Tensor ids, mask, labels;  // (b, L) int64, (b, L) bool, (b) int64
  int max_len = 0;
  std::int64_t real_tokens = 0;
};

Batch collate(const TextData& data, std::span<const ddpsim::Sample> samples, const torch::Device& device);
// b samples of exactly L tokens, no padding: what the timing sweep and the memory probe run.
Batch full_batch(int b, int L, const torch::Device& device);

}  // namespace ddptrain
