// BERT uncased tokenizer: basic tokenization (clean, CJK spacing, lower-case, NFD + drop Mn,
// punctuation split) then greedy longest-match-first WordPiece, as in Google BERT's
// tokenization.py. Known, deliberate differences: invalid UTF-8 bytes are dropped (Python would
// refuse to decode them); "[CLS]"-like text is not matched as a special token (Google BERT, not
// Hugging Face's added-token splitting). Python's lower() turns a word-final capital sigma into
// "ς"; that context rule is reproduced with Unicode's Cased / Case_Ignorable approximated from
// utf8proc's categories and case mappings.
#include "data/tokenizer.hpp"

#include "common/error.hpp"
#include "common/input_file.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <utility>

namespace ddpsim {
namespace {

constexpr std::int32_t CAPITAL_SIGMA = 0x03A3;
constexpr std::int32_t FINAL_SIGMA = 0x03C2;

// Cased: Lu, Ll, Lt, anything with a case mapping, and the Other_Lowercase / Other_Uppercase
// characters that have neither (ª, º, squared / circled / negative Latin capitals).
bool is_cased(std::int32_t cp, utf8proc_category_t category) {
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL || category == UTF8PROC_CATEGORY_LT ||
         utf8proc_tolower(cp) != cp || utf8proc_toupper(cp) != cp || cp == 0xAA || cp == 0xBA ||
         (cp >= 0x1F130 && cp <= 0x1F149) || (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189);
}

// Case_Ignorable: Mn, Me, Cf, Lm, Sk and the Word_Break MidLetter / MidNumLet / Single_Quote marks.
bool is_case_ignorable(std::int32_t cp, utf8proc_category_t category) {
  static constexpr std::array<std::int32_t, 17> MID_WORD = {0x27,   0x2E,   0x3A,   0xB7,   0x387,  0x55F,
                                                            0x5F4,  0x2018, 0x2019, 0x2024, 0x2027, 0xFE13,
                                                            0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return category == UTF8PROC_CATEGORY_MN || category == UTF8PROC_CATEGORY_ME || category == UTF8PROC_CATEGORY_CF ||
         category == UTF8PROC_CATEGORY_LM || category == UTF8PROC_CATEGORY_SK ||
         std::ranges::find(MID_WORD, cp) != MID_WORD.end();
}

// BERT's _is_whitespace, plus Zl/Zp which Python's str.split() also splits on.
bool is_whitespace(std::int32_t cp, utf8proc_category_t category) {
  return cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r' || category == UTF8PROC_CATEGORY_ZS ||
         category == UTF8PROC_CATEGORY_ZL || category == UTF8PROC_CATEGORY_ZP;
}

// BERT's _is_control: any C* category (unassigned included) except tab, newline, return.
bool is_control(utf8proc_category_t category) {
  return category == UTF8PROC_CATEGORY_CN || category == UTF8PROC_CATEGORY_CC || category == UTF8PROC_CATEGORY_CF ||
         category == UTF8PROC_CATEGORY_CS || category == UTF8PROC_CATEGORY_CO;
}

// BERT's _is_punctuation: all non-alphanumeric ASCII printables, plus Unicode P*.
bool is_punctuation(std::int32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126)) {
    return true;
  }
  const utf8proc_category_t category = utf8proc_category(cp);
  return category >= UTF8PROC_CATEGORY_PC && category <= UTF8PROC_CATEGORY_PO;
}

// BERT's _is_chinese_char: the CJK Unified Ideographs blocks and their compatibility blocks.
bool is_cjk(std::int32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Decodes the code point at text[pos], or -1 for an invalid sequence; advances pos past it
// (one byte for an invalid sequence).
std::int32_t next_code_point(std::string_view text, std::size_t& pos) {
  utf8proc_int32_t cp = -1;
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos);
  const utf8proc_ssize_t length = utf8proc_iterate(bytes, static_cast<utf8proc_ssize_t>(text.size() - pos), &cp);
  if (length <= 0) {
    ++pos;
    return -1;
  }
  pos += static_cast<std::size_t>(length);
  return cp;
}

// Python's Final_Sigma "after" condition: no cased character follows within the token, skipping
// case-ignorable characters and those the cleaning step drops.
bool no_cased_follows(std::string_view text, std::size_t pos) {
  while (pos < text.size()) {
    const std::int32_t cp = next_code_point(text, pos);
    if (cp <= 0 || cp == 0xFFFD) {
      continue;
    }
    const utf8proc_category_t category = utf8proc_category(cp);
    if (is_whitespace(cp, category) || is_cjk(cp)) {
      return true;
    }
    if (!is_control(category) && !is_case_ignorable(cp, category)) {
      return !is_cased(cp, category);
    }
  }
  return true;
}

void require_max_length(std::size_t max_length) {
  if (max_length < 2) {
    throw InputError("tokenizer: max_length must be at least 2 (room for [CLS] and [SEP]), got " +
                     std::to_string(max_length));
  }
}

}  // namespace

std::ptrdiff_t invalid_utf8_at(std::string_view text) {
  const auto* bytes = reinterpret_cast<const utf8proc_uint8_t*>(text.data());
  utf8proc_int32_t codepoint = 0;
  for (std::size_t at = 0; at < text.size();) {
    const auto used = utf8proc_iterate(bytes + at, static_cast<utf8proc_ssize_t>(text.size() - at), &codepoint);
    if (used < 0) return static_cast<std::ptrdiff_t>(at);
    at += static_cast<std::size_t>(used);
  }
  return -1;
}

Tokenizer Tokenizer::from_vocab_file(const std::filesystem::path& vocab_path) {
  check_input_file(vocab_path.string(), "vocabulary file", 64 * MiB);
  std::ifstream in(vocab_path, std::ios::binary);
  if (!in) {
    throw InputError(vocab_path.string() + ": cannot open vocabulary file");
  }
  std::vector<std::string> tokens;
  tokens.reserve(32768);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') {
      line.pop_back();
    }
    if (const auto at = invalid_utf8_at(line); at >= 0)
      throw InputError(vocab_path.string() + ":" + std::to_string(tokens.size() + 1) + ": invalid UTF-8 at byte " +
                       std::to_string(at + 1) + " of the token (a vocabulary is UTF-8 text)");
    tokens.push_back(line);
  }
  if (in.bad()) {
    throw InputError(vocab_path.string() + ": read error after line " + std::to_string(tokens.size()));
  }
  return Tokenizer(std::move(tokens), vocab_path.string());
}

Tokenizer::Tokenizer(std::vector<std::string> tokens, std::string source_name) : tokens_(std::move(tokens)) {
  word_start_ids_.reserve(tokens_.size());
  for (std::size_t id = 0; id < tokens_.size(); ++id) {
    const std::string& token = tokens_[id];
    const auto token_id = static_cast<std::int32_t>(id);
    word_start_ids_.insert_or_assign(token, token_id);
    if (token.size() > 2 && token.starts_with("##")) {
      continuation_ids_.insert_or_assign(token.substr(2), token_id);
    }
    max_token_bytes_ = std::max(max_token_bytes_, token.size());
  }
  const auto special = [&](const char* name) {
    const std::int32_t id = token_id(name);
    if (id < 0) {
      throw InputError(source_name + ": vocabulary has no " + name + " token (" + std::to_string(tokens_.size()) +
                       " tokens read)");
    }
    return id;
  };
  pad_id_ = special("[PAD]");
  unk_id_ = special("[UNK]");
  cls_id_ = special("[CLS]");
  sep_id_ = special("[SEP]");
}

std::int32_t Tokenizer::token_id(std::string_view token) const {
  const auto it = word_start_ids_.find(token);
  return it == word_start_ids_.end() ? -1 : it->second;
}

void Tokenizer::append_code_point(std::int32_t code_point) {
  std::array<utf8proc_uint8_t, 4> utf8{};
  const utf8proc_ssize_t length = utf8proc_encode_char(code_point, utf8.data());
  code_point_offsets_.push_back(static_cast<std::uint32_t>(word_bytes_.size()));
  word_bytes_.append(reinterpret_cast<const char*>(utf8.data()), static_cast<std::size_t>(length));
}

void Tokenizer::end_word() {
  const std::uint32_t first = words_.empty() ? 0 : words_.back().first_code_point + words_.back().code_points;
  const auto end = static_cast<std::uint32_t>(code_point_offsets_.size());
  if (end > first) {
    words_.push_back({first, end - first, static_cast<std::uint32_t>(word_bytes_.size())});
  }
}

std::string_view Tokenizer::word_text(const Word& word) const {
  const std::uint32_t begin = code_point_offsets_[word.first_code_point];
  return std::string_view(word_bytes_).substr(begin, word.end_byte - begin);
}

void Tokenizer::split_words(std::string_view text) {
  word_bytes_.clear();
  code_point_offsets_.clear();
  words_.clear();
  bool after_cased = false;  // last non-case-ignorable code point of this token was cased
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::int32_t cp = next_code_point(text, pos);
    if (cp <= 0 || cp == 0xFFFD) {
      continue;
    }
    const utf8proc_category_t category = utf8proc_category(cp);
    if (is_whitespace(cp, category)) {
      end_word();
      after_cased = false;
      continue;
    }
    if (is_control(category)) {
      continue;
    }
    const bool cjk = is_cjk(cp);
    if (cjk) {
      end_word();
    }
    std::int32_t lower = utf8proc_tolower(cp);
    if (cp == CAPITAL_SIGMA && after_cased && no_cased_follows(text, pos)) {
      lower = FINAL_SIGMA;
    }
    if (!is_case_ignorable(cp, category)) {
      after_cased = is_cased(cp, category);
    }
    std::array<utf8proc_int32_t, 16> decomposed{};
    int boundclass = 0;
    const utf8proc_ssize_t count =
        utf8proc_decompose_char(lower, decomposed.data(), decomposed.size(), UTF8PROC_DECOMPOSE, &boundclass);
    for (utf8proc_ssize_t i = 0; i < std::min<utf8proc_ssize_t>(count, decomposed.size()); ++i) {
      const std::int32_t d = decomposed[static_cast<std::size_t>(i)];
      if (utf8proc_category(d) == UTF8PROC_CATEGORY_MN) {
        continue;
      }
      if (is_punctuation(d)) {
        end_word();
        append_code_point(d);
        end_word();
      } else {
        append_code_point(d);
      }
    }
    if (cjk) {
      end_word();
    }
  }
  end_word();
}

void Tokenizer::append_wordpieces(const Word& word) {
  if (word.code_points > MAX_WORD_CODE_POINTS) {
    pieces_.push_back(unk_id_);
    return;
  }
  const std::string_view text = word_text(word);
  const std::uint32_t text_begin = code_point_offsets_[word.first_code_point];
  const auto byte_at = [&](std::uint32_t i) -> std::size_t {
    return i == word.code_points ? text.size() : code_point_offsets_[word.first_code_point + i] - text_begin;
  };
  const std::size_t mark = pieces_.size();
  std::uint32_t start = 0;
  while (start < word.code_points) {
    const TokenMap& ids = start == 0 ? word_start_ids_ : continuation_ids_;
    const std::size_t start_byte = byte_at(start);
    std::uint32_t end = word.code_points;
    for (; end > start; --end) {
      const std::size_t piece_bytes = byte_at(end) - start_byte;
      if (piece_bytes > max_token_bytes_) {
        continue;
      }
      const auto it = ids.find(text.substr(start_byte, piece_bytes));
      if (it != ids.end()) {
        pieces_.push_back(it->second);
        break;
      }
    }
    if (end == start) {
      pieces_.resize(mark);
      pieces_.push_back(unk_id_);
      return;
    }
    start = end;
  }
}

void Tokenizer::run(std::string_view text, std::size_t max_pieces) {
  pieces_.clear();
  split_words(text);
  for (const Word& word : words_) {
    if (pieces_.size() >= max_pieces) {
      break;
    }
    append_wordpieces(word);
  }
  if (pieces_.size() > max_pieces) {
    pieces_.resize(max_pieces);
  }
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, std::size_t max_length) {
  require_max_length(max_length);
  run(text, max_length - 2);
  std::vector<std::int32_t> ids;
  ids.reserve(pieces_.size() + 2);
  ids.push_back(cls_id_);
  ids.insert(ids.end(), pieces_.begin(), pieces_.end());
  ids.push_back(sep_id_);
  return ids;
}

std::size_t Tokenizer::count_tokens(std::string_view text, std::size_t max_length) {
  require_max_length(max_length);
  run(text, max_length - 2);
  return pieces_.size() + 2;
}

std::vector<std::string> Tokenizer::basic_tokenize(std::string_view text) {
  split_words(text);
  std::vector<std::string> words;
  words.reserve(words_.size());
  for (const Word& word : words_) {
    words.emplace_back(word_text(word));
  }
  return words;
}

std::vector<std::string> Tokenizer::tokenize(std::string_view text) {
  run(text, static_cast<std::size_t>(-1));
  std::vector<std::string> pieces;
  pieces.reserve(pieces_.size());
  for (const std::int32_t id : pieces_) {
    pieces.push_back(token(id));
  }
  return pieces;
}

}  // namespace ddpsim
