// A sweep's notes: one line a sentence, the figures that differ between cells as their ranges.
#include <doctest/doctest.h>

#include "sweep/notes.hpp"

using namespace ddpsim;

namespace {
std::string beyond(int b) {
  return "model m was measured up to b = 48, L = 66; a rank's share, b = " + std::to_string(b) +
         ", L = 256, lies beyond, ×1.51 here";
}
}  // namespace

TEST_CASE("notes that differ only in figures are one line, each differing figure as its range") {
  CellNotes notes;
  add_cell_note(notes, beyond(96), 2);
  add_cell_note(notes, beyond(24), 0);
  add_cell_note(notes, beyond(48), 1);
  add_cell_note(notes, "a key with no effect", 1);
  const std::string merged =
      "model m was measured up to b = 48, L = 66; a rank's share, b = 24 to 96, L = 256, lies beyond, ×1.51 here";
  CHECK(note_lines(notes, 3) == std::vector<std::string>{merged + " (every cell)", "a key with no effect (cell 1)"});
  CHECK(note_lines(notes, 4).front() == merged + " (cells 0, 1 and 2)");
}

TEST_CASE("a lone note is written as it was, figures at its ends and decimals too") {
  CellNotes notes;
  const std::string note = "8 samples at 1.0789, ran 18-23% off the profile at 24.";
  add_cell_note(notes, note, 0);
  add_cell_note(notes, note, 0);
  CHECK(note_lines(notes, 2) == std::vector<std::string>{note + " (cell 0)"});
}

TEST_CASE("numbers inside names, ranges and versions are text, so their notes stay apart") {
  for (const auto& [a, b] : std::vector<std::pair<std::string, std::string>>{{"model h100-x", "model h200-x"},
                                                                            {"llama-3-8b", "llama-3-70b"},
                                                                            {"ran 18-23% off", "ran 18-25% off"},
                                                                            {"ran 18\u201323% off", "ran 18\u201325% off"},
                                                                            {"ran 16\u201324 ms", "ran 18\u201324 ms"},
                                                                            {"version 3.32.1", "version 3.32.2"},
                                                                            {"a 4x4 grid", "a 4x8 grid"},
                                                                            {"gain \u22125%", "gain \u22122%"},
                                                                            {"gain +5%", "gain +2%"},
                                                                            {"1,482.8 ms", "1,426.4 ms"}}) {
    CellNotes notes;
    add_cell_note(notes, a, 0);
    add_cell_note(notes, b, 1);
    CHECK(note_lines(notes, 3) == std::vector<std::string>{a + " (cell 0)", b + " (cell 1)"});
  }
}

TEST_CASE("many cells are counted past the fifth") {
  CellNotes notes;
  for (std::size_t cell : {7, 1, 3, 5, 9, 11, 13}) add_cell_note(notes, "b = " + std::to_string(cell), cell);
  CHECK(has_cell_note(notes, "b = 7"));
  CHECK_FALSE(has_cell_note(notes, "b = 8"));
  CHECK(note_lines(notes, 20) == std::vector<std::string>{"b = 1 to 13 (cells 1, 3, 5, 7, 9 and 2 more)"});
}

TEST_CASE("figures compare as numbers of any length; a control byte is escaped, never taken for a figure") {
  CellNotes notes;
  const std::string huge(400, '9');
  add_cell_note(notes, "at 0.50 and " + huge, 0);
  add_cell_note(notes, "at 0.25 and 1" + std::string(400, '0'), 1);
  add_cell_note(notes, "at 0.3 and 007", 2);
  CHECK(note_lines(notes, 3) == std::vector<std::string>{"at 0.25 to 0.50 and 007 to 1" + std::string(400, '0') +
                                                         " (every cell)"});
  CellNotes odd;
  add_cell_note(odd, "model a\x1f b = 24", 0);
  add_cell_note(odd, "model a\x1f b = 48", 1);
  CHECK(note_lines(odd, 2) == std::vector<std::string>{"model a\\x1f b = 24 to 48 (every cell)"});
}
