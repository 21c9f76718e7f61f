// Where sequence lengths come from. Every source yields a dataset: one length per sample in
// dataset order (tokens including [CLS] and [SEP], truncated to max_length), reproducible
// from the seed. The sampler shuffles it per epoch like a real data loader would.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace ddpsim {

// Every length source holds its dataset in memory: at most this many samples (400 MB).
inline constexpr std::int64_t MAX_DATASET_SAMPLES = 100'000'000;

// Counts of samples per token length, with where they came from.
struct LengthHistogram {
  std::vector<std::pair<int, std::int64_t>> counts;  // (length, samples), lengths ascending
  std::string source;                                // e.g. "sst2/train.tsv"
  std::string tokenizer;                             // e.g. "bert-base-uncased WordPiece"
  int max_length = 0;                                // truncation applied when counting

  std::int64_t samples() const;
  double mean_length() const;
};

LengthHistogram histogram_from_lengths(const std::vector<int>& lengths);
// Parses the JSON written by histogram_to_json; `origin` names the file in errors.
LengthHistogram histogram_from_json(const nlohmann::json& doc, const std::string& origin);
std::string histogram_to_json(const LengthHistogram& histogram);
// SST-2 train lengths embedded in the binary (traces/sst2-train-lengths.json).
const LengthHistogram& sst2_train_histogram();

class LengthSource {
 public:
  virtual ~LengthSource() = default;
  virtual std::vector<int> dataset(std::uint64_t seed) const = 0;
  virtual std::string describe() const = 0;
};

// Exactly the histogram's samples (counts preserved), in seeded random dataset order.
std::unique_ptr<LengthSource> histogram_source(LengthHistogram histogram, int max_length);
// A length per line, in dataset order ('#' starts a comment); the seed is unused.
std::unique_ptr<LengthSource> trace_source(const std::string& path, int max_length);
// Tokenizes a GLUE TSV's `sentence` column with a WordPiece vocab; the seed is unused.
std::unique_ptr<LengthSource> tsv_source(const std::string& tsv, const std::string& vocab, int max_length);
// `samples` draws of round(LogNormal) with the given mean and std, clipped to [min, max].
std::unique_ptr<LengthSource> lognormal_source(double mean, double std, int min, int max, std::int64_t samples,
                                               int max_length);

// ddptrain --synthetic-lengths' dataset: `samples` lengths cycling through the histogram's
// seeded dataset, each at least 2 tokens (a [CLS] and a [SEP]); the Python package draws the same.
std::vector<int> synthetic_lengths(const LengthHistogram& histogram, std::int64_t samples, int max_length,
                                   std::uint64_t seed);

// Tokenizes every sentence of a GLUE TSV; the lengths in file order.
std::vector<int> tokenized_lengths(const std::string& tsv, const std::string& vocab, int max_length);

}  // namespace ddpsim
