// A sweep's notes: what `run` would say of a cell, said once for the cells it holds for.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ddpsim {

// Notes, each once with the cells that gave it, in the order first met.
using CellNotes = std::vector<std::pair<std::string, std::vector<std::size_t>>>;

// Adds `cell` to `note`'s cells (the note first where new; a cell once).
void add_cell_note(CellNotes& notes, const std::string& note, std::size_t cell);
bool has_cell_note(const CellNotes& notes, const std::string& note);

// Each note as a line, "<note> (every cell)" or "(cells 0, 2 and 5)". Notes that differ only
// in their figures (a cell's shape, its factor) are one line, each figure that differs written
// as its range over their cells ("b = 24 to 48"): a sweep over the batch size would otherwise
// say the same sentence once a cell. Each cell's own note stays in its file.
std::vector<std::string> note_lines(const CellNotes& notes, std::size_t cell_count);

}  // namespace ddpsim
