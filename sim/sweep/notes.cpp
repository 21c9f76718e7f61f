#include "sweep/notes.hpp"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <tuple>

#include "common/error.hpp"
#include "common/split.hpp"

namespace ddpsim {
namespace {

// A note among a sweep's notes, const or not.
auto find_cell_note(auto& notes, const std::string& note) {
  return std::ranges::find(notes, note, &CellNotes::value_type::first);
}

constexpr char FIGURE = '\x1f';  // a figure's place in a sentence (the byte itself, in a note, is escaped)

bool digit_at(const std::string& text, std::size_t i) {
  return i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
}

// Whether the character at i ties a number to the text beside it, as part of a name, a range,
// a signed or a grouped number ("h100", "llama-3-8b", "18-23%", "1.2.3", "−5", "1,482"): then
// the number is no figure of its own, and notes that differ there are told apart.
bool ties(const std::string& text, std::size_t i, bool before) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  if (c == '.' || c == ',') return before ? i > 0 && digit_at(text, i - 1) : digit_at(text, i + 1);
  // An en dash ties both sides ("18–23%"), a plus or minus sign the number after it.
  if (before ? c == 0x93 && i >= 2 && text.compare(i - 2, 3, "\u2013") == 0 : text.compare(i, 3, "\u2013") == 0)
    return true;
  if (before && (c == '+' || (c == 0x92 && i >= 2 && text.compare(i - 2, 3, "\u2212") == 0))) return true;
  return std::isalnum(c) || c == '_' || c == '-';
}

// A note as its sentence, each figure (a number standing as a word: "b = 24", "×1.51") taken
// out, and those figures in order.
struct Figures {
  std::string sentence;
  std::vector<std::string> figures;
};

Figures split_figures(const std::string& note) {
  Figures out;
  for (std::size_t i = 0; i < note.size();) {
    if (note[i] == FIGURE) {  // the marker's own byte, in a name, is text
      out.sentence += hex_escape(static_cast<unsigned char>(note[i++]));
      continue;
    }
    if (!digit_at(note, i) || (i > 0 && ties(note, i - 1, true))) {
      out.sentence += note[i++];
      continue;
    }
    std::size_t end = i;
    while (digit_at(note, end)) ++end;
    if (end + 1 < note.size() && note[end] == '.' && digit_at(note, end + 1))
      for (++end; digit_at(note, end);) ++end;
    if (end < note.size() && ties(note, end, false)) {
      out.sentence.append(note, i, end - i);
    } else {
      out.figures.push_back(note.substr(i, end - i));
      out.sentence += FIGURE;
    }
    i = end;
  }
  return out;
}

// Figures are digits with an optional decimal part, compared as numbers without a conversion
// that could overflow.
bool figure_less(const std::string& a, const std::string& b) {
  const auto parts = [](std::string_view figure) {
    const std::size_t dot = std::min(figure.find('.'), figure.size());
    std::string_view whole = figure.substr(0, dot), fraction = figure.substr(std::min(dot + 1, figure.size()));
    whole.remove_prefix(std::min(whole.find_first_not_of('0'), whole.size()));
    fraction.remove_suffix(fraction.size() - std::min(fraction.find_last_not_of('0') + 1, fraction.size()));
    return std::tuple(whole.size(), whole, fraction);
  };
  return parts(a) < parts(b);
}

// The members' sentence with each figure that differs between them as "least to greatest".
std::string merged(const std::vector<Figures>& members) {
  std::string text;
  std::size_t k = 0;
  for (const char c : members.front().sentence) {
    if (c != FIGURE) {
      text += c;
      continue;
    }
    std::string low = members.front().figures[k], high = low;
    for (const Figures& m : members) {
      if (figure_less(m.figures[k], low)) low = m.figures[k];
      if (figure_less(high, m.figures[k])) high = m.figures[k];
    }
    text += low == high ? low : low + " to " + high;
    ++k;
  }
  return text;
}

std::string cells_text(const std::vector<std::size_t>& at, std::size_t cell_count) {
  if (at.size() == cell_count) return "every cell";
  std::vector<std::string> shown;
  for (std::size_t k = 0; k < std::min<std::size_t>(at.size(), 5); ++k) shown.push_back(std::to_string(at[k]));
  if (shown.size() < at.size()) shown.push_back(std::to_string(at.size() - shown.size()) + " more");
  return (at.size() == 1 ? "cell " : "cells ") + and_list(shown);
}

}  // namespace

bool has_cell_note(const CellNotes& notes, const std::string& note) {
  return find_cell_note(notes, note) != notes.end();
}

void add_cell_note(CellNotes& notes, const std::string& note, std::size_t cell) {
  auto known = find_cell_note(notes, note);
  if (known == notes.end()) known = notes.insert(known, {note, {}});
  if (known->second.empty() || known->second.back() != cell) known->second.push_back(cell);
}

std::vector<std::string> note_lines(const CellNotes& notes, std::size_t cell_count) {
  struct Family {
    std::string sentence;
    std::vector<Figures> members;
    std::vector<std::size_t> cells;
  };
  std::vector<Family> families;  // in the order first met
  for (const auto& [note, at] : notes) {
    Figures figures = split_figures(note);
    auto family = std::ranges::find(families, figures.sentence, &Family::sentence);
    if (family == families.end()) family = families.insert(families.end(), Family{figures.sentence, {}, {}});
    family->members.push_back(std::move(figures));
    family->cells.insert(family->cells.end(), at.begin(), at.end());
  }
  std::vector<std::string> lines;
  for (Family& family : families) {
    std::ranges::sort(family.cells);
    family.cells.erase(std::unique(family.cells.begin(), family.cells.end()), family.cells.end());
    lines.push_back(printable(merged(family.members)) + " (" + cells_text(family.cells, cell_count) + ")");
  }
  return lines;
}

}  // namespace ddpsim
