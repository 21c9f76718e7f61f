// GLUE TSV reader: small fixture files written to a temp dir for the good and bad layouts, then
// row counts of the real SST-2 splits when ../shared/data is present.
#include "data/glue_tsv.hpp"

#include "common/error.hpp"
#include "test_data.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Row {
  std::string sentence;
  int label;
  std::int64_t line_number;
  bool operator==(const Row&) const = default;
};

fs::path write_fixture(const std::string& name, const std::string& contents) {
  const fs::path dir = fs::temp_directory_path() / "ddpsim_glue_tsv_test";
  fs::create_directories(dir);
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

std::vector<Row> read_rows(const fs::path& path, ddpsim::GlueTsvOptions options = {}) {
  std::vector<Row> rows;
  const std::int64_t count = ddpsim::read_glue_tsv(
      path,
      [&](std::string_view sentence, int label, std::int64_t line_number) {
        rows.push_back({std::string(sentence), label, line_number});
      },
      options);
  CHECK(count == static_cast<std::int64_t>(rows.size()));
  return rows;
}

}  // namespace

TEST_CASE("rows stream in file order with 1-based line numbers") {
  const auto path = write_fixture("good.tsv", "sentence\tlabel\nit 's good\t1\nnot , really\t0\n");
  CHECK(read_rows(path) == std::vector<Row>{{"it 's good", 1, 2}, {"not , really", 0, 3}});
}

TEST_CASE("columns are found by name in any order, extra columns allowed") {
  const auto path = write_fixture("swapped.tsv", "label\tid\tsentence\n1\t7\tfine film\n0\t8\t\n");
  CHECK(read_rows(path) == std::vector<Row>{{"fine film", 1, 2}, {"", 0, 3}});
}

TEST_CASE("CRLF line ends and a missing final newline are accepted") {
  const auto path = write_fixture("crlf.tsv", "sentence\tlabel\r\na b\t1\r\nc d\t0");
  CHECK(read_rows(path) == std::vector<Row>{{"a b", 1, 2}, {"c d", 0, 3}});
}

TEST_CASE("a header without the label column is an error unless labels are optional") {
  const auto path = write_fixture("test_split.tsv", "index\tsentence\n0\tno label here\n");
  CHECK_THROWS_WITH_AS(read_rows(path),
                       doctest::Contains("test_split.tsv:1: no 'label' column in header 'index<TAB>sentence'"),
                       ddpsim::InputError);
  CHECK(read_rows(path, {.require_label = false}) == std::vector<Row>{{"no label here", ddpsim::NO_LABEL, 2}});
}

TEST_CASE("a header without the sentence column is an error naming the header") {
  const auto path = write_fixture("no_sentence.tsv", "text\tlabel\nhi\t1\n");
  CHECK_THROWS_WITH_AS(read_rows(path, {.require_label = false}),
                       doctest::Contains("no_sentence.tsv:1: no 'sentence' column in header 'text<TAB>label'"),
                       ddpsim::InputError);
}

TEST_CASE("a wrong field count names the line") {
  const auto path = write_fixture("fields.tsv", "sentence\tlabel\na\t1\nb\t0\nno tab here\nc\t1\n");
  CHECK_THROWS_WITH_AS(read_rows(path), doctest::Contains("fields.tsv:4: expected 2 tab-separated fields, found 1"),
                       ddpsim::InputError);
  const auto extra = write_fixture("extra.tsv", "sentence\tlabel\na\t1\tx\n");
  CHECK_THROWS_WITH_AS(read_rows(extra), doctest::Contains("extra.tsv:2: expected 2 tab-separated fields, found 3"),
                       ddpsim::InputError);
  const auto blank = write_fixture("blank.tsv", "sentence\tlabel\na\t1\n\nb\t0\n");
  CHECK_THROWS_WITH_AS(read_rows(blank), doctest::Contains("blank.tsv:3: expected 2"), ddpsim::InputError);
}

TEST_CASE("a column named twice and a sentence that is not UTF-8 are errors naming the line") {
  const auto twice = write_fixture("twice.tsv", "sentence\tlabel\tsentence\na\t1\tb\n");
  CHECK_THROWS_WITH_AS(read_rows(twice), doctest::Contains("twice.tsv:1: column 'sentence' appears twice"),
                       ddpsim::InputError);
  const auto latin1 = write_fixture("latin1.tsv", "sentence\tlabel\ncaf\xe9 au lait\t1\n");
  CHECK_THROWS_WITH_AS(read_rows(latin1), doctest::Contains("latin1.tsv:2: the sentence is not valid UTF-8 (byte 4"),
                       ddpsim::InputError);
  const auto utf8 = write_fixture("utf8.tsv", "sentence\tlabel\ncaf\xc3\xa9 au lait\t1\n");
  CHECK(read_rows(utf8).size() == 1);
}

TEST_CASE("a label that is not an integer names the line and the value") {
  for (const std::string label : {"pos", "1.0", "", " 1", "1x", "99999999999"}) {
    CAPTURE(label);
    const auto path = write_fixture("label.tsv", "sentence\tlabel\na\t1\nb\t" + label + "\n");
    const std::string expected = "label.tsv:3: label '" + label + "' is not an integer";
    CHECK_THROWS_WITH_AS(read_rows(path), doctest::Contains(expected.c_str()), ddpsim::InputError);
  }
  const auto negative = write_fixture("negative.tsv", "sentence\tlabel\na\t-1\n");
  CHECK(read_rows(negative) == std::vector<Row>{{"a", -1, 2}});
}

TEST_CASE("an empty file, a header-only file and a missing file") {
  CHECK_THROWS_WITH_AS(read_rows(write_fixture("empty.tsv", "")), doctest::Contains("empty.tsv:1: empty file"),
                       ddpsim::InputError);
  CHECK(read_rows(write_fixture("header_only.tsv", "sentence\tlabel\n")).empty());
  CHECK_THROWS_WITH_AS(read_rows(fs::temp_directory_path() / "ddpsim_glue_tsv_test" / "absent.tsv"),
                       doctest::Contains("absent.tsv: cannot open"), ddpsim::InputError);
}

TEST_CASE("the real SST-2 splits have 67,349 and 872 rows" * doctest::skip(!ddpsim::test::have_shared_data())) {
  std::int64_t positive = 0;
  const auto count_positive = [&](std::string_view, int label, std::int64_t) { positive += label == 1 ? 1 : 0; };
  CHECK(ddpsim::read_glue_tsv(ddpsim::test::shared_data("sst2/train.tsv"), count_positive) == 67349);
  CHECK(positive > 0);
  CHECK(ddpsim::read_glue_tsv(ddpsim::test::shared_data("sst2/dev.tsv"), count_positive) == 872);
}
