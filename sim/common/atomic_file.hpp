// Output files appear whole or not at all: content goes to a temporary file beside the
// target, which is renamed over it only on commit(). A writer destroyed before commit()
// (an exception, an early return) removes its temporary file, and so does a signal that ends
// the process (common/interrupt.hpp). A target that is a folder, a device or a pipe, one of the
// command's inputs, or another live AtomicFile's target is refused before anything is written;
// a symbolic link is written through, and a missing folder is created (and removed again if
// it is still empty when the outputs fail).
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

namespace ddpsim {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::filesystem::path& target() const { return target_; }
  // Flushes, checks for write errors, renames into place. Throws InputError on failure.
  void commit();

 private:
  void release();

  std::string shown_;  // the path as given, for messages
  std::filesystem::path target_;
  std::filesystem::path temp_;
  std::ofstream out_;
  bool committed_ = false;
  int slot_ = -1;  // its entry among the temporaries a signal removes
};

// Writes a whole file atomically.
void write_file_atomically(const std::filesystem::path& target, const std::string& content);

}  // namespace ddpsim
