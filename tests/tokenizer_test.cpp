// BERT uncased tokenizer: normalization and WordPiece rules on a tiny vocabulary, then ids
// checked against the real bert-base-uncased vocabulary when ../shared/data is present.
#include "data/tokenizer.hpp"

#include "common/error.hpp"
#include "data/glue_tsv.hpp"
#include "test_data.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using ddpsim::Tokenizer;
using Strings = std::vector<std::string>;
using Ids = std::vector<std::int32_t>;

namespace {

Tokenizer tiny_tokenizer() {
  return Tokenizer({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "cafe", "don", "'",
                    "t",     "hello", "world", ",",     "!",  "中",    "国",     "a",    "##a", "naive"},
                   "tiny");
}

}  // namespace

TEST_CASE("special ids and size come from the vocabulary order") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.pad_id() == 0);
  CHECK(tokenizer.unk_id() == 1);
  CHECK(tokenizer.cls_id() == 2);
  CHECK(tokenizer.sep_id() == 3);
  CHECK(tokenizer.size() == 20);
  CHECK(tokenizer.token_id("##aff") == 5);
  CHECK(tokenizer.token_id("nope") == -1);
}

TEST_CASE("a vocabulary without a special token is an input error naming it") {
  CHECK_THROWS_WITH_AS(Tokenizer({"[PAD]", "[UNK]", "[SEP]"}, "mini.txt"),
                       doctest::Contains("mini.txt: vocabulary has no [CLS] token"), ddpsim::InputError);
}

TEST_CASE("a vocabulary file with CRLF line ends loads; a missing file is an input error") {
  const auto path = std::filesystem::temp_directory_path() / "ddpsim_tokenizer_test_vocab.txt";
  std::ofstream(path, std::ios::binary) << "[PAD]\r\n[UNK]\r\n[CLS]\r\n[SEP]\r\nhello\r\n";
  Tokenizer tokenizer = Tokenizer::from_vocab_file(path);
  CHECK(tokenizer.size() == 5);
  CHECK(tokenizer.encode("Hello", 8) == Ids{2, 4, 3});
  std::filesystem::remove(path);
  CHECK_THROWS_WITH_AS(Tokenizer::from_vocab_file(path), doctest::Contains("cannot open"), ddpsim::InputError);
}

TEST_CASE("basic tokenization lower-cases and strips accents") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.basic_tokenize("HeLLo WORLD") == Strings{"hello", "world"});
  CHECK(tokenizer.basic_tokenize("Café naïve Ångström") == Strings{"cafe", "naive", "angstrom"});
  CHECK(tokenizer.basic_tokenize("Cafe\xCC\x81") == Strings{"cafe"});
  CHECK(tokenizer.tokenize("CAFÉ") == Strings{"cafe"});
  CHECK(tokenizer.basic_tokenize("ΟΔΟΣ ΣΑ ΟΔΟΣ.") == Strings{"οδος", "σα", "οδος", "."});
  CHECK(tokenizer.basic_tokenize("ΣΑΣ'Α") == Strings{"σασ", "'", "α"});
}

TEST_CASE("punctuation, ASCII symbols included, becomes separate words") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.basic_tokenize("don't") == Strings{"don", "'", "t"});
  CHECK(tokenizer.tokenize("don't") == Strings{"don", "'", "t"});
  CHECK(tokenizer.basic_tokenize("hello,world!!") == Strings{"hello", ",", "world", "!", "!"});
  CHECK(tokenizer.basic_tokenize("a$b^c~d") == Strings{"a", "$", "b", "^", "c", "~", "d"});
  CHECK(tokenizer.basic_tokenize("a\xE2\x80\x94"
                                 "b\xC2\xBF") == Strings{"a", "\xE2\x80\x94", "b", "\xC2\xBF"});
}

TEST_CASE("CJK ideographs are separate words") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.basic_tokenize("中国hello") == Strings{"中", "国", "hello"});
  CHECK(tokenizer.tokenize("hello中国") == Strings{"hello", "中", "国"});
}

TEST_CASE("whitespace splits and control characters vanish") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.basic_tokenize("  hello\tworld\r\n") == Strings{"hello", "world"});
  CHECK(tokenizer.basic_tokenize("hello\xC2\xA0world\xE2\x80\xA8"
                                 "a") == Strings{"hello", "world", "a"});
  CHECK(tokenizer.basic_tokenize("hel\x01lo wo\xE2\x80\x8Brld") == Strings{"hello", "world"});
  CHECK(tokenizer.basic_tokenize(std::string("hel\0lo", 6)) == Strings{"hello"});
  CHECK(tokenizer.basic_tokenize("hel\xEF\xBF\xBDlo") == Strings{"hello"});
  CHECK(tokenizer.basic_tokenize(" \t\r\n").empty());
  CHECK(tokenizer.encode("", 8) == Ids{2, 3});
}

TEST_CASE("invalid UTF-8 bytes are dropped without crashing") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.basic_tokenize("hel\xFFlo") == Strings{"hello"});
  CHECK(tokenizer.basic_tokenize("\xC0\xAFhello \xED\xA0\x80world") == Strings{"hello", "world"});
  CHECK(tokenizer.basic_tokenize("hello\xC3") == Strings{"hello"});
  CHECK(tokenizer.basic_tokenize("hello \xE4\xB8") == Strings{"hello"});
  CHECK(tokenizer.encode("\x80\x80\xF8\x88\x80\x80\x80", 8) == Ids{2, 3});
}

TEST_CASE("WordPiece takes the longest match first and continues with ##") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.tokenize("unaffable") == Strings{"un", "##aff", "##able"});
  CHECK(tokenizer.encode("unaffable", 16) == Ids{2, 4, 5, 6, 3});
  CHECK(tokenizer.tokenize("aaa") == Strings{"a", "##a", "##a"});
}

TEST_CASE("a word that cannot be covered is one [UNK]") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.tokenize("unaffablex") == Strings{"[UNK]"});
  CHECK(tokenizer.tokenize("hello xyz world") == Strings{"hello", "[UNK]", "world"});
  CHECK(tokenizer.encode("unaffablex", 16) == Ids{2, 1, 3});
}

TEST_CASE("a word longer than 100 code points is [UNK]") {
  Tokenizer tokenizer = tiny_tokenizer();
  CHECK(tokenizer.tokenize(std::string(100, 'a')).size() == 100);
  CHECK(tokenizer.tokenize(std::string(101, 'a')) == Strings{"[UNK]"});
  std::string accented;
  for (int i = 0; i < 100; ++i) {
    accented += "a\xCC\x81";
  }
  CHECK(tokenizer.tokenize(accented).size() == 100);
}

TEST_CASE("truncation keeps [CLS] and the final [SEP]") {
  Tokenizer tokenizer = tiny_tokenizer();
  const std::string text = "hello world unaffable hello";
  CHECK(tokenizer.encode(text, 64) == Ids{2, 11, 12, 4, 5, 6, 11, 3});
  CHECK(tokenizer.encode(text, 5) == Ids{2, 11, 12, 4, 3});
  CHECK(tokenizer.encode(text, 2) == Ids{2, 3});
  for (std::size_t max_length = 2; max_length < 12; ++max_length) {
    CHECK(tokenizer.count_tokens(text, max_length) == tokenizer.encode(text, max_length).size());
  }
  CHECK_THROWS_AS(tokenizer.encode(text, 1), ddpsim::InputError);
  CHECK_THROWS_AS(tokenizer.count_tokens(text, 0), ddpsim::InputError);
}

TEST_CASE("bert-base-uncased ids match the reference tokenizer" * doctest::skip(!ddpsim::test::have_shared_data())) {
  Tokenizer tokenizer = Tokenizer::from_vocab_file(ddpsim::test::shared_data("bert-base-uncased/vocab.txt"));
  CHECK(tokenizer.size() == 30522);
  CHECK(tokenizer.pad_id() == 0);
  CHECK(tokenizer.unk_id() == 100);
  CHECK(tokenizer.cls_id() == 101);
  CHECK(tokenizer.sep_id() == 102);
  CHECK(tokenizer.encode("hello world", 256) == Ids{101, 7592, 2088, 102});
  CHECK(tokenizer.encode("Hello, World!", 256) == Ids{101, 7592, 1010, 2088, 999, 102});
  // The first three SST-2 training sentences; ids read off vocab.txt (line number - 1).
  CHECK(tokenizer.encode("hide new secretions from the parental units", 256) ==
        Ids{101, 5342, 2047, 3595, 8496, 2013, 1996, 18643, 3197, 102});
  CHECK(tokenizer.encode("contains no wit , only labored gags", 256) ==
        Ids{101, 3397, 2053, 15966, 1010, 2069, 4450, 2098, 18201, 2015, 102});
  CHECK(tokenizer.encode("that loves its characters and communicates something rather beautiful about "
                         "human nature",
                         256) ==
        Ids{101, 2008, 7459, 2049, 3494, 1998, 10639, 2015, 2242, 2738, 3376, 2055, 2529, 3267, 102});
}

TEST_CASE("SST-2 train lengths run 3 to 66 tokens with mean about 13.3" *
          doctest::skip(!ddpsim::test::have_shared_data())) {
  Tokenizer tokenizer = Tokenizer::from_vocab_file(ddpsim::test::shared_data("bert-base-uncased/vocab.txt"));
  std::size_t min_tokens = 1000;
  std::size_t max_tokens = 0;
  double total_tokens = 0;
  const std::int64_t rows = ddpsim::read_glue_tsv(ddpsim::test::shared_data("sst2/train.tsv"),
                                                  [&](std::string_view sentence, int, std::int64_t) {
                                                    const std::size_t tokens = tokenizer.count_tokens(sentence, 256);
                                                    min_tokens = std::min(min_tokens, tokens);
                                                    max_tokens = std::max(max_tokens, tokens);
                                                    total_tokens += static_cast<double>(tokens);
                                                  });
  REQUIRE(rows == 67349);
  CHECK(min_tokens == 3);
  CHECK(max_tokens == 66);
  const double mean_tokens = total_tokens / static_cast<double>(rows);
  CHECK(mean_tokens >= 13.0);
  CHECK(mean_tokens <= 13.6);
}
