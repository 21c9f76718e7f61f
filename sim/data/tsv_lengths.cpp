// Lengths straight from text: a GLUE TSV through the BERT tokenizer.
#include "common/error.hpp"
#include "data/glue_tsv.hpp"
#include "data/lengths.hpp"
#include "data/tokenizer.hpp"

namespace ddpsim {

std::vector<int> tokenized_lengths(const std::string& tsv, const std::string& vocab, int max_length) {
  if (max_length < 2) throw InputError("max_length must be ≥ 2 ([CLS] and [SEP]), got " + std::to_string(max_length));
  Tokenizer tokenizer = Tokenizer::from_vocab_file(vocab);
  std::vector<int> lengths;
  read_glue_tsv(
      tsv,
      [&](std::string_view sentence, int, std::int64_t line) {
        if (static_cast<std::int64_t>(lengths.size()) == MAX_DATASET_SAMPLES)
          throw InputError(tsv + ":" + std::to_string(line) + ": more than " + std::to_string(MAX_DATASET_SAMPLES) +
                           " sentences (a dataset is held in memory)");
        lengths.push_back(static_cast<int>(tokenizer.count_tokens(sentence, static_cast<std::size_t>(max_length))));
      },
      {.require_label = false});
  if (lengths.empty()) throw InputError(tsv + ": no rows");
  return lengths;
}

}  // namespace ddpsim
