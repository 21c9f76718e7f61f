// Where tests find the real data of ../shared/data; tests that need it skip when it is absent.
#pragma once

#include <unistd.h>

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

// A fresh folder for one test, removed afterwards; dir / "name" is a path inside it.
struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("ddpsim_test_" + std::to_string(::getpid()) + "_" + std::to_string(next_id()++));
  TempDir() { std::filesystem::create_directories(path); }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  static int& next_id() {
    static int id = 0;
    return id;
  }
};

}  // namespace ddpsim::test
