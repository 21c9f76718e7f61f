// Streaming reader for GLUE single-sentence TSV files (SST-2 layout: header `sentence<TAB>label`),
// the source of real sentence lengths. Columns are found by header name; rows are unquoted and
// tab-separated, '\r\n' is accepted. Every malformed row is an InputError "FILE:LINE: reason".
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string_view>

namespace ddpsim {

inline constexpr int NO_LABEL = -1;

struct GlueTsvOptions {
  bool require_label = true;  // test splits have no label column; rows then get NO_LABEL
};

// sentence is valid only during the call; line_number is 1-based (the header is line 1).
using GlueRowFn = std::function<void(std::string_view sentence, int label, std::int64_t line_number)>;

// Calls on_row for every data row in file order; returns the number of rows.
std::int64_t read_glue_tsv(const std::filesystem::path& path, const GlueRowFn& on_row,
                           const GlueTsvOptions& options = {});

}  // namespace ddpsim
