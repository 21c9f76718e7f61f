// `ddpsim lengths`: the length histogram of a GLUE TSV under the BERT uncased tokenizer.
#include <iostream>

#include "cli/options.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "data/lengths.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* USAGE = R"(usage: ddpsim lengths TSV --vocab VOCAB --out HIST.json [--max-length N]

Tokenizes the `sentence` column of a GLUE TSV with the BERT uncased tokenizer (WordPiece
over VOCAB, counting [CLS] and [SEP], truncated to --max-length) and writes the histogram of
token lengths as JSON: {"source", "tokenizer", "max_length", "samples", "mean_length",
"counts": [[length, samples], ...]}. Use it as a config's data source ("histogram").

example:
  ddpsim lengths ../shared/data/sst2/train.tsv \
      --vocab ../shared/data/bert-base-uncased/vocab.txt --out traces/sst2-train-lengths.json
)";

}  // namespace

int lengths(const Args& args) {
  po::options_description visible("options");
  visible.add_options()("vocab", po::value<std::string>()->required(), "WordPiece vocabulary, one token a line")(
      "out", po::value<std::string>()->required(), "histogram JSON to write")(
      "max-length", po::value<int>()->default_value(256), "truncation length in tokens")("help,h", "this help");
  po::options_description hidden;
  hidden.add_options()("tsv", po::value<std::string>());
  po::positional_options_description positional;
  positional.add("tsv", 1);
  po::variables_map vm;
  if (!parse(args, USAGE, visible, hidden, positional, vm)) return 0;
  if (!vm.count("tsv")) throw UsageError("missing TSV, the GLUE file to tokenize");

  const std::string tsv = vm["tsv"].as<std::string>();
  const int max_length = vm["max-length"].as<int>();
  if (max_length < 2 || max_length > 1000000)
    throw UsageError("--max-length must be from 2 ([CLS] and [SEP]) to 1000000, got " + std::to_string(max_length));
  check_outputs({vm["out"].as<std::string>()});
  LengthHistogram histogram = histogram_from_lengths(tokenized_lengths(tsv, vm["vocab"].as<std::string>(), max_length));
  histogram.source = std::filesystem::path(tsv).filename().string();
  if (const auto parent = std::filesystem::path(tsv).parent_path().filename(); !parent.empty())
    histogram.source = (parent / histogram.source).string();
  histogram.tokenizer = "BERT uncased WordPiece (" +
                        std::filesystem::path(vm["vocab"].as<std::string>()).filename().string() +
                        "), [CLS]/[SEP] counted";
  histogram.max_length = max_length;
  write_file_atomically(vm["out"].as<std::string>(), histogram_to_json(histogram));
  std::cout << "wrote " << vm["out"].as<std::string>() << ": " << histogram.samples() << " samples, lengths "
            << histogram.counts.front().first << "–" << histogram.counts.back().first << ", mean "
            << histogram.mean_length() << "\n";
  return 0;
}

}  // namespace ddpsim::cli
