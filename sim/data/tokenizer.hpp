// BERT uncased WordPiece tokenizer, equivalent to Google BERT's tokenization.py and Hugging Face
// BertTokenizer(do_lower_case=True); it turns TSV sentences into the token lengths the simulator
// and trainer batch on. Unicode properties come from utf8proc. Not thread-safe: each instance
// keeps scratch buffers, so use one instance per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ddpsim {

// The byte offset of the first invalid UTF-8 sequence in `text`, or -1: input text is checked
// where it is read, so that a bad byte is reported with its line, not deep in the tokenizer.
std::ptrdiff_t invalid_utf8_at(std::string_view text);

class Tokenizer {
 public:
  static constexpr std::size_t MAX_WORD_CODE_POINTS = 100;  // longer words become [UNK]

  // One token per line, id = line number - 1; a trailing '\r' is ignored. Throws InputError when
  // the file cannot be read or lacks [PAD], [UNK], [CLS] or [SEP].
  static Tokenizer from_vocab_file(const std::filesystem::path& vocab_path);

  // tokens[i] gets id i; source_name only labels error messages.
  explicit Tokenizer(std::vector<std::string> tokens, std::string source_name = "<vocabulary>");

  // [CLS] wordpieces... [SEP], truncated to at most max_length ids (max_length >= 2, else InputError).
  std::vector<std::int32_t> encode(std::string_view text, std::size_t max_length);
  // Same as encode(text, max_length).size() without building the result.
  std::size_t count_tokens(std::string_view text, std::size_t max_length);

  // Basic tokenization only: cleaned, lower-cased, accent-stripped, split words.
  std::vector<std::string> basic_tokenize(std::string_view text);
  // Basic tokenization then WordPiece, as token strings (no [CLS]/[SEP]).
  std::vector<std::string> tokenize(std::string_view text);

  std::int32_t pad_id() const { return pad_id_; }
  std::int32_t unk_id() const { return unk_id_; }
  std::int32_t cls_id() const { return cls_id_; }
  std::int32_t sep_id() const { return sep_id_; }
  std::size_t size() const { return tokens_.size(); }
  const std::string& token(std::int32_t id) const { return tokens_.at(static_cast<std::size_t>(id)); }
  // -1 when absent.
  std::int32_t token_id(std::string_view token) const;

 private:
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using TokenMap = std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>>;

  struct Word {
    std::uint32_t first_code_point;  // index into code_point_offsets_
    std::uint32_t code_points;
    std::uint32_t end_byte;  // in word_bytes_
  };

  // Fills words_ / word_bytes_ / code_point_offsets_ with the basic tokenizer's words.
  void split_words(std::string_view text);
  void append_code_point(std::int32_t code_point);
  void end_word();
  std::string_view word_text(const Word& word) const;
  // Appends the word's wordpiece ids (or one [UNK]) to pieces_.
  void append_wordpieces(const Word& word);
  // Fills pieces_ with at most max_pieces wordpiece ids of text.
  void run(std::string_view text, std::size_t max_pieces);

  std::vector<std::string> tokens_;
  TokenMap word_start_ids_;    // every token
  TokenMap continuation_ids_;  // "##x" tokens, keyed by "x"
  std::size_t max_token_bytes_ = 0;
  std::int32_t pad_id_ = -1;
  std::int32_t unk_id_ = -1;
  std::int32_t cls_id_ = -1;
  std::int32_t sep_id_ = -1;

  std::string word_bytes_;                         // scratch: all words, UTF-8
  std::vector<std::uint32_t> code_point_offsets_;  // scratch: byte offset of each word code point
  std::vector<Word> words_;                        // scratch
  std::vector<std::int32_t> pieces_;               // scratch: wordpiece ids of the current text
};

}  // namespace ddpsim
