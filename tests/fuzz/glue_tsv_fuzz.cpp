// GLUE TSV files through the reader and every sentence through the WordPiece tokenizer with
// the real bert-base-uncased vocab (where the shared data is present; else a small one).
#include <filesystem>

#include "data/glue_tsv.hpp"
#include "data/tokenizer.hpp"
#include "fuzz.hpp"

namespace {

ddpsim::Tokenizer make_tokenizer() {
  const std::string real = DDPSIM_SHARED_DATA "/bert-base-uncased/vocab.txt";
  if (std::filesystem::exists(real)) return ddpsim::Tokenizer::from_vocab_file(real);
  const std::string small = ddpsim::fuzz::as_file("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\nfilm\n##s\ngood\n", ".vocab");
  return ddpsim::Tokenizer::from_vocab_file(small);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static ddpsim::Tokenizer tokenizer = make_tokenizer();
  if (size < 1) return 0;
  ddpsim::GlueTsvOptions options;
  options.require_label = data[0] & 1;
  const std::string& path = ddpsim::fuzz::as_file(ddpsim::fuzz::text(data + 1, size - 1), ".tsv");
  ddpsim::fuzz::expect_typed_errors([&] {
    ddpsim::read_glue_tsv(
        path, [&](std::string_view sentence, int, std::int64_t) { tokenizer.encode(sentence, 128); }, options);
  });
  return 0;
}
