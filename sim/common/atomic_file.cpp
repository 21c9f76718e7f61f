#include "common/atomic_file.hpp"

#include <unistd.h>

#include "common/error.hpp"
#include "common/interrupt.hpp"

namespace ddpsim {

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  temp_ = target_;
  temp_ += ".tmp." + std::to_string(::getpid());
  slot_ = remember_temporary(temp_);
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    forget_temporary(slot_);
    throw InputError(target_.string() + ": cannot open for writing");
  }
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  out_.close();
  std::error_code ignored;
  std::filesystem::remove(temp_, ignored);
  forget_temporary(slot_);
}

void AtomicFile::commit() {
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok) throw InputError(target_.string() + ": write failed (disk full?)");
  std::error_code ec;
  std::filesystem::rename(temp_, target_, ec);
  if (ec) throw InputError(target_.string() + ": cannot rename into place: " + ec.message());
  committed_ = true;
  forget_temporary(slot_);
}

void write_file_atomically(const std::filesystem::path& target, const std::string& content) {
  AtomicFile file(target);
  file.stream() << content;
  file.commit();
}

}  // namespace ddpsim
