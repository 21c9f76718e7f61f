#include "common/atomic_file.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include <unistd.h>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/interrupt.hpp"

namespace ddpsim {

namespace {

std::mutex pending_mutex;
std::set<std::filesystem::path> pending;  // targets of the AtomicFiles alive now
// Folders made for outputs, deepest first, with their slots for the signal handler; removed
// again when empty after a failure.
std::vector<std::pair<std::filesystem::path, int>> created_folders;

// Makes `folder` and its missing ancestors, remembering them.
void create_folder(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> missing;
  for (fs::path p = folder; !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  if (missing.empty()) return;
  fs::create_directories(folder, ec);
  std::lock_guard lock(pending_mutex);
  for (const auto& p : missing)
    if (fs::is_directory(p)) created_folders.emplace_back(p, remember_temporary(p, /*folder=*/true));
  if (ec) throw InputError(folder.string() + ": cannot create output folder (" + ec.message() + ")");
}

// An output folder this process made and left empty goes away with the failed outputs.
void remove_empty_created_folders() {
  std::lock_guard lock(pending_mutex);
  std::erase_if(created_folders, [](const std::pair<std::filesystem::path, int>& folder) {
    std::error_code ec;
    if (!std::filesystem::is_empty(folder.first, ec) || !std::filesystem::remove(folder.first, ec)) return false;
    forget_temporary(folder.second);
    return true;
  });
}

// The file a rename would replace: a symbolic link's target, so the link stays a link.
std::filesystem::path resolve_target(const std::filesystem::path& target) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(target, ec))) return target;
  const auto resolved = fs::weakly_canonical(target, ec);
  return ec ? target : resolved;
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path target) : shown_(target.string()), target_(resolve_target(target)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto status = fs::status(target_, ec);
  if (fs::exists(status) && !fs::is_regular_file(status))
    throw InputError(shown_ + ": exists and is not a regular file (a folder, a device or a pipe); not replacing it");
  check_not_input(shown_);
  {
    std::lock_guard lock(pending_mutex);
    if (!pending.insert(fs::absolute(target_, ec)).second)
      throw UsageError(shown_ + ": named twice among this command's outputs");
  }
  // Like publish(): an output's folder is made as needed (`calibrate --out models/new/m.json`).
  const auto parent = target_.parent_path();
  if (!parent.empty()) {
    try {
      create_folder(parent);
    } catch (...) {
      release();
      remove_empty_created_folders();
      throw;
    }
  }
  temp_ = target_;
  temp_ += ".tmp." + std::to_string(::getpid());
  slot_ = remember_temporary(temp_);
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    const int error = errno;
    forget_temporary(slot_);
    release();
    remove_empty_created_folders();
    if (error == EACCES || error == EROFS)
      throw InputError((parent.empty() ? std::string(".") : parent.string()) + ": cannot write into this folder (" +
                       std::strerror(error) + ")");
    throw InputError(shown_ + ": cannot open for writing (" + std::strerror(error) + ")");
  }
}

void AtomicFile::release() {
  std::error_code ec;
  std::lock_guard lock(pending_mutex);
  pending.erase(std::filesystem::absolute(target_, ec));
}

AtomicFile::~AtomicFile() {
  if (committed_) return;
  out_.close();
  std::error_code ignored;
  std::filesystem::remove(temp_, ignored);
  forget_temporary(slot_);
  release();
  remove_empty_created_folders();
}

void AtomicFile::commit() {
  out_.flush();
  const bool ok = static_cast<bool>(out_);
  out_.close();
  if (!ok) throw InputError(shown_ + ": write failed (disk full?)");
  std::error_code ec;
  std::filesystem::rename(temp_, target_, ec);
  if (ec) throw InputError(shown_ + ": cannot rename into place: " + ec.message());
  committed_ = true;
  forget_temporary(slot_);
  release();
}

void write_file_atomically(const std::filesystem::path& target, const std::string& content) {
  AtomicFile file(target);
  file.stream() << content;
  file.commit();
}

}  // namespace ddpsim
