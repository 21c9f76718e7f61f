// Comma-separated lists on command lines and in trace metadata. Items come back as written,
// empty ones included, so that each caller refuses them in its own words.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddpsim {

inline std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> items;
  for (std::size_t begin = 0;;) {
    const auto comma = text.find(',', begin);
    items.emplace_back(text.substr(begin, comma == std::string_view::npos ? comma : comma - begin));
    if (comma == std::string_view::npos) return items;
    begin = comma + 1;
  }
}

}  // namespace ddpsim
