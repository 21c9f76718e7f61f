#include "data/lengths.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_util.hpp"
#include "common/rng.hpp"

namespace ddpsim {

std::int64_t LengthHistogram::samples() const {
  std::int64_t n = 0;
  for (const auto& [len, count] : counts) n += count;
  return n;
}

double LengthHistogram::mean_length() const {
  double tokens = 0.0;
  for (const auto& [len, count] : counts) tokens += static_cast<double>(len) * static_cast<double>(count);
  const auto n = samples();
  return n ? tokens / static_cast<double>(n) : 0.0;
}

LengthHistogram histogram_from_lengths(const std::vector<int>& lengths) {
  std::map<int, std::int64_t> counts;
  for (int len : lengths) ++counts[len];
  LengthHistogram h;
  h.counts.assign(counts.begin(), counts.end());
  return h;
}

LengthHistogram histogram_from_json(const nlohmann::json& doc, const std::string& origin) {
  JsonFields fields(doc, origin);
  LengthHistogram h;
  h.source = fields.get<std::string>("source", "");
  h.tokenizer = fields.get<std::string>("tokenizer", "");
  // Absent: the truncation is unknown (0); present: a length the tokenizer could truncate at.
  h.max_length = doc.contains("max_length") ? fields.get_in<int>("max_length", 0, 2, 1000000) : 0;
  const auto& counts = fields.raw("counts");
  fields.reject_unknown({"samples", "mean_length", "min_length", "max_length_seen"});
  if (!counts.is_array() || counts.empty())
    throw InputError(origin + ": \"counts\" must be a non-empty array of [length, samples] pairs");
  int previous = 0;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const auto& pair = counts[i];
    const std::string at = origin + ": counts[" + std::to_string(i) + "]";
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_number_integer() || !pair[1].is_number_integer())
      throw InputError(at + ": expected [length, samples] with two integers, got " + pair.dump());
    const int len = convert<int>(pair[0], at + ": length");
    const auto count = convert<std::int64_t>(pair[1], at + ": sample count");
    if (len < 1) throw InputError(at + ": length must be ≥ 1, got " + std::to_string(len));
    if (count < 0) throw InputError(at + ": sample count must be ≥ 0, got " + std::to_string(count));
    if (len <= previous) throw InputError(at + ": lengths must be strictly ascending");
    previous = len;
    total += count;  // both ≤ MAX_DATASET_SAMPLES here: no overflow
    if (total > MAX_DATASET_SAMPLES)
      throw InputError(at + ": the histogram holds more than " + std::to_string(MAX_DATASET_SAMPLES) +
                       " samples (a dataset is held in memory)");
    if (count > 0) h.counts.emplace_back(len, count);
  }
  if (h.samples() == 0) throw InputError(origin + ": histogram holds no samples");
  // The summary keys are optional, but a file whose summary contradicts its counts was edited
  // by hand or truncated: which of the two is meant cannot be known.
  const auto check = [&](const char* key, std::int64_t actual) {
    if (!doc.contains(key)) return;
    if (!doc[key].is_number_integer())
      throw wrong_type(doc[key], origin + ": key \"" + key + "\"", "an integer, as the counts give (" +
                                                                       std::to_string(actual) + ")");
    if (doc[key].get<std::int64_t>() != actual)
      throw InputError(origin + ": \"" + key + "\" is " + doc[key].dump() + ", but the counts give " +
                       std::to_string(actual));
  };
  check("samples", h.samples());
  check("min_length", h.counts.front().first);
  check("max_length_seen", h.counts.back().first);
  if (h.max_length > 0 && h.counts.back().first > h.max_length)  // its tokenizer truncated at max_length
    throw InputError(origin + ": a length of " + std::to_string(h.counts.back().first) + ", but \"max_length\" is " +
                     std::to_string(h.max_length) + " (the truncation the lengths were counted with)");
  if (doc.contains("mean_length")) {  // written rounded to 3 decimals
    const double said = convert<double>(doc["mean_length"], origin + ": key \"mean_length\"");
    if (std::abs(said - h.mean_length()) > 5e-4 + 1e-9 * h.mean_length())
      throw InputError(origin + ": \"mean_length\" is " + doc["mean_length"].dump() + ", but the counts give " +
                       std::to_string(h.mean_length()));
  }
  return h;
}

std::string histogram_to_json(const LengthHistogram& h) {
  nlohmann::ordered_json doc;
  doc["source"] = h.source;
  doc["tokenizer"] = h.tokenizer;
  doc["max_length"] = h.max_length;
  doc["samples"] = h.samples();
  doc["mean_length"] = std::round(h.mean_length() * 1000.0) / 1000.0;
  doc["min_length"] = h.counts.empty() ? 0 : h.counts.front().first;
  doc["max_length_seen"] = h.counts.empty() ? 0 : h.counts.back().first;
  // One [length, samples] pair per line keeps the committed file diffable.
  std::string out = doc.dump(2);
  out.erase(out.rfind('}'));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  out += ",\n  \"counts\": [\n";
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    out += "    [" + std::to_string(h.counts[i].first) + ", " + std::to_string(h.counts[i].second) + "]";
    out += i + 1 < h.counts.size() ? ",\n" : "\n";
  }
  return out + "  ]\n}\n";
}

namespace {

int truncate(int len, int max_length) {
  return max_length > 0 ? std::min(len, max_length) : len;
}

class HistogramSource final : public LengthSource {
 public:
  HistogramSource(LengthHistogram h, int max_length) : h_(std::move(h)), max_length_(max_length) {}
  std::vector<int> dataset(std::uint64_t seed) const override {
    std::vector<int> lengths;
    lengths.reserve(static_cast<std::size_t>(h_.samples()));
    for (const auto& [len, count] : h_.counts) lengths.insert(lengths.end(), count, truncate(len, max_length_));
    Rng rng(seed);
    rng.shuffle(std::span<int>(lengths));
    return lengths;
  }
  std::string describe() const override {
    std::ostringstream s;
    s << "histogram " << (h_.source.empty() ? "(unnamed)" : h_.source) << ": " << h_.samples()
      << " samples, mean length " << h_.mean_length();
    if (max_length_ > 0 && h_.counts.back().first > max_length_) {
      double sum = 0;
      for (const auto& [len, count] : h_.counts) sum += double(truncate(len, max_length_)) * double(count);
      s << " (" << sum / double(h_.samples()) << " after truncation to " << max_length_ << ")";
    }
    return s.str();
  }

 private:
  LengthHistogram h_;
  int max_length_;
};

// Lengths known up front, in dataset order: the seed has nothing to decide.
class FixedSource final : public LengthSource {
 public:
  FixedSource(std::vector<int> lengths, std::string description)
      : lengths_(std::move(lengths)), description_(std::move(description)) {}
  std::vector<int> dataset(std::uint64_t) const override { return lengths_; }
  std::string describe() const override { return description_; }

 private:
  std::vector<int> lengths_;
  std::string description_;
};

std::vector<int> read_length_trace(const std::string& path, int max_length) {
  check_input_file(path, "length trace", 1024 * MiB);
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot open length trace");
  std::vector<int> lengths;
  std::string line;
  for (std::size_t number = 1; std::getline(in, line); ++number) {
    if (number == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a byte order mark, as in CSVs
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.erase(hash);
    std::istringstream fields(line);
    std::string word;
    if (!(fields >> word)) continue;
    std::size_t used = 0;
    int len = 0;
    try {
      len = std::stoi(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    std::string extra;
    if (used != word.size() || len < 1 || (fields >> extra))
      throw InputError(path + ":" + std::to_string(number) + ": expected one positive integer length, got \"" + line +
                       "\"");
    if (static_cast<std::int64_t>(lengths.size()) == MAX_DATASET_SAMPLES)
      throw InputError(path + ":" + std::to_string(number) + ": more than " + std::to_string(MAX_DATASET_SAMPLES) +
                       " lengths (a dataset is held in memory)");
    lengths.push_back(truncate(len, max_length));
  }
  if (lengths.empty()) throw InputError(path + ": length trace holds no lengths");
  return lengths;
}

class LogNormalSource final : public LengthSource {
 public:
  LogNormalSource(double mean, double std, int min, int max, std::int64_t samples, int max_length)
      : mean_(mean), std_(std), min_(min), max_(truncate(max, max_length)), samples_(samples) {
    if (!(mean > 0) || !(std >= 0))
      throw InputError("lognormal lengths: need mean > 0 and std ≥ 0, got mean=" + std::to_string(mean) +
                       " std=" + std::to_string(std));
    if (min < 1 || min > max_)
      throw InputError("lognormal lengths: need 1 ≤ min ≤ max (after max_length), got min=" + std::to_string(min) +
                       " max=" + std::to_string(max_));
    if (samples < 1 || samples > MAX_DATASET_SAMPLES)
      throw InputError("lognormal lengths: samples must be from 1 to " + std::to_string(MAX_DATASET_SAMPLES) +
                       ", got " + std::to_string(samples));
  }
  std::vector<int> dataset(std::uint64_t seed) const override {
    // Moments of the log: the parameters that give the requested mean and std.
    const double sigma2 = std::log1p((std_ * std_) / (mean_ * mean_));
    const double mu = std::log(mean_) - sigma2 / 2.0;
    const double sigma = std::sqrt(sigma2);
    Rng rng(seed);
    std::vector<int> lengths(static_cast<std::size_t>(samples_));
    for (int& len : lengths) {
      const double x = std::round(std::exp(mu + sigma * rng.normal()));
      len = static_cast<int>(std::clamp(x, static_cast<double>(min_), static_cast<double>(max_)));
    }
    return lengths;
  }
  std::string describe() const override {
    std::ostringstream s;
    s << "lognormal lengths: mean " << mean_ << ", std " << std_ << ", clipped to [" << min_ << ", " << max_ << "], "
      << samples_ << " samples";
    return s.str();
  }

 private:
  double mean_, std_;
  int min_, max_;
  std::int64_t samples_;
};

}  // namespace

std::unique_ptr<LengthSource> histogram_source(LengthHistogram histogram, int max_length) {
  return std::make_unique<HistogramSource>(std::move(histogram), max_length);
}

std::vector<int> synthetic_lengths(const LengthHistogram& histogram, std::int64_t samples, int max_length,
                                   std::uint64_t seed) {
  if (samples < 1 || samples > MAX_DATASET_SAMPLES)
    throw InputError("synthetic samples must be from 1 to " + std::to_string(MAX_DATASET_SAMPLES) + ", got " +
                     std::to_string(samples));
  const auto pool = histogram_source(histogram, max_length)->dataset(seed);
  std::vector<int> lengths(static_cast<std::size_t>(samples));
  for (std::size_t i = 0; i < lengths.size(); ++i) lengths[i] = std::max(2, pool[i % pool.size()]);
  return lengths;
}

std::unique_ptr<LengthSource> trace_source(const std::string& path, int max_length) {
  std::vector<int> lengths = read_length_trace(path, max_length);
  const std::string description = "length trace " + path + ": " + std::to_string(lengths.size()) + " samples";
  return std::make_unique<FixedSource>(std::move(lengths), description);
}

std::unique_ptr<LengthSource> tsv_source(const std::string& tsv, const std::string& vocab, int max_length) {
  std::vector<int> lengths = tokenized_lengths(tsv, vocab, max_length);
  const std::string description = "GLUE TSV " + tsv + ": " + std::to_string(lengths.size()) + " sentences";
  return std::make_unique<FixedSource>(std::move(lengths), description);
}

std::unique_ptr<LengthSource> lognormal_source(double mean, double std, int min, int max, std::int64_t samples,
                                               int max_length) {
  return std::make_unique<LogNormalSource>(mean, std, min, max, samples, max_length);
}

}  // namespace ddpsim
