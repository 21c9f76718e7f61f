// Length sources and the histogram format.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "data/lengths.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {
std::string temp_file(const std::string& name, const std::string& content) {
  const auto path = std::filesystem::temp_directory_path() / ("ddpsim_lengths_test_" + name);
  std::ofstream(path) << content;
  return path.string();
}
}  // namespace

TEST_CASE("a histogram survives its JSON round trip") {
  LengthHistogram h = histogram_from_lengths({5, 3, 5, 9, 3, 3});
  h.source = "fixture";
  h.max_length = 16;
  const LengthHistogram back = histogram_from_json(parse_json(histogram_to_json(h), "rt"), "rt");
  CHECK(back.counts == h.counts);
  CHECK(back.source == "fixture");
  CHECK(back.max_length == 16);
  CHECK(back.samples() == 6);
  CHECK(back.mean_length() == doctest::Approx(28.0 / 6));
}

TEST_CASE("malformed histograms name the entry at fault") {
  auto fails = [](const std::string& text, const std::string& expected) {
    CHECK_THROWS_WITH_AS(histogram_from_json(parse_json(text, "h.json"), "h.json"), doctest::Contains(expected.c_str()),
                         InputError);
  };
  fails(R"({"counts": [[3, 1], [3, 2]]})", "counts[1]: lengths must be strictly ascending");
  fails(R"({"counts": [[3, 1], ["x", 2]]})", "counts[1]: expected [length, samples]");
  fails(R"({"counts": [[0, 1]]})", "length must be ≥ 1");
  fails(R"({"counts": []})", "non-empty array");
  fails(R"({"counts": [[3, 0]]})", "holds no samples");
  fails(R"({"count": [[3, 1]]})", "missing key \"counts\"");
  fails(R"({"counts": [[3, 1]], "sorce": "x"})", "did you mean \"source\"");
  fails(R"({"counts": [[3, 1], [5, 2]], "samples": 4})", "\"samples\" is 4, but the counts give 3");
  fails(R"({"counts": [[5, 10], [10, 10]], "mean_length": 99})", "\"mean_length\" is 99, but the counts give 7.5");
  fails(R"({"counts": [[3, 1], [5, 2]], "max_length_seen": 6})", "\"max_length_seen\" is 6, but the counts give 5");
  fails(R"({"counts": [[3, 1]], "samples": "1"})", "key \"samples\" is string");
  // A dataset is held in memory: sizes past MAX_DATASET_SAMPLES are refused, not allocated.
  fails(R"({"counts": [[3, 100000001]]})", "counts[0]: the histogram holds more than 100000000 samples");
  fails(R"({"counts": [[3, 9223372036854775807], [4, 9223372036854775807]]})", "counts[0]: the histogram holds more");
  fails(R"({"counts": [[4294967299, 1]]})", "counts[0]: length is");
  CHECK_THROWS_WITH_AS(lognormal_source(40, 20, 4, 128, 100'000'001, 256), doctest::Contains("samples must be from 1"),
                       InputError);
  CHECK_THROWS_WITH_AS(parse_json("{\n  \"counts\": [1,,]\n}", "h.json"),
                       doctest::Contains("h.json:2:16: invalid JSON"), InputError);
}

TEST_CASE("a histogram source reproduces the counts exactly, shuffled by the seed") {
  const LengthHistogram h = histogram_from_lengths({4, 4, 4, 7, 7, 300});
  const auto source = histogram_source(h, 256);
  auto a = source->dataset(1), b = source->dataset(1), c = source->dataset(2);
  CHECK(a == b);
  std::sort(a.begin(), a.end());
  std::sort(c.begin(), c.end());
  CHECK(a == std::vector<int>{4, 4, 4, 7, 7, 256});  // truncated to max_length
  CHECK(a == c);
}

TEST_CASE("a length trace keeps dataset order and rejects junk with its line") {
  const auto good = temp_file("good.txt", "# lengths\n12\n5   # short\n\n300\n");
  CHECK(trace_source(good, 256)->dataset(0) == std::vector<int>{12, 5, 256});
  const auto bad = temp_file("bad.txt", "12\n5x\n");
  CHECK_THROWS_WITH_AS(trace_source(bad, 256), doctest::Contains("bad.txt:2: expected one positive integer"),
                       InputError);
  CHECK_THROWS_WITH_AS(trace_source(temp_file("empty.txt", "# nothing\n"), 256), doctest::Contains("no lengths"),
                       InputError);
  CHECK_THROWS_WITH_AS(trace_source("/nonexistent/trace.txt", 256), doctest::Contains("cannot open"), InputError);
}

TEST_CASE("the lognormal source matches its mean and std and stays in range") {
  const auto source = lognormal_source(20.0, 8.0, 3, 120, 200000, 256);
  const auto lengths = source->dataset(11);
  CHECK(lengths == source->dataset(11));
  double sum = 0, sq = 0;
  for (int len : lengths) {
    REQUIRE(len >= 3);
    REQUIRE(len <= 120);
    sum += len;
    sq += double(len) * len;
  }
  const double m = sum / lengths.size();
  CHECK(m == doctest::Approx(20.0).epsilon(0.02));
  CHECK(std::sqrt(sq / lengths.size() - m * m) == doctest::Approx(8.0).epsilon(0.05));
  CHECK_THROWS_AS(lognormal_source(10, 2, 50, 20, 10, 256), InputError);
}

TEST_CASE("the embedded SST-2 histogram is the committed file") {
  const LengthHistogram& embedded = sst2_train_histogram();
  CHECK(embedded.samples() == 67349);
  CHECK(embedded.counts.front().first == 3);
  CHECK(embedded.counts.back().first == 66);
  CHECK(embedded.mean_length() == doctest::Approx(13.3).epsilon(0.02));
  const auto committed = histogram_from_json(read_json_file(test::source_path("traces/sst2-train-lengths.json")), "f");
  CHECK(committed.counts == embedded.counts);
}

TEST_CASE("tokenized SST-2 lengths reproduce the committed histogram" * doctest::skip(!test::have_shared_data())) {
  const auto lengths =
      tokenized_lengths(test::shared_data("sst2/train.tsv"), test::shared_data("bert-base-uncased/vocab.txt"), 256);
  CHECK(histogram_from_lengths(lengths).counts == sst2_train_histogram().counts);
}
