// Where tests find the real data of ../shared/data; tests that need it skip when it is absent.
#pragma once

#include <filesystem>
#include <string>

namespace ddpsim::test {

inline std::string shared_data(const std::string& relative) {
  return std::string(DDPSIM_SHARED_DATA) + "/" + relative;
}
inline bool have_shared_data() {
  return std::filesystem::exists(shared_data("sst2/train.tsv")) &&
         std::filesystem::exists(shared_data("bert-base-uncased/vocab.txt"));
}
inline std::string source_path(const std::string& relative) {
  return std::string(DDPSIM_SOURCE_DIR) + "/" + relative;
}

}  // namespace ddpsim::test
