// Comma-separated lists on command lines and in trace metadata, and lists in messages' prose.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ddpsim {

// Items come back as written, empty ones included, so that each caller refuses them in its own words.
inline std::vector<std::string> split_commas(std::string_view text) {
  std::vector<std::string> items;
  for (std::size_t begin = 0;;) {
    const auto comma = text.find(',', begin);
    items.emplace_back(text.substr(begin, comma == std::string_view::npos ? comma : comma - begin));
    if (comma == std::string_view::npos) return items;
    begin = comma + 1;
  }
}

// "a", "a and b", "a, b and c": a list as a message or a note says it.
inline std::string and_list(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t k = 0; k < items.size(); ++k)
    text += (k == 0 ? "" : k + 1 == items.size() ? " and " : ", ") + items[k];
  return text;
}

}  // namespace ddpsim
