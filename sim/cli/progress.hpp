// A progress bar on stderr for long work: only on a terminal (logs and pipes stay clean) and
// only once the work has taken 2 s, erased when done.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>

namespace ddpsim::cli {

// Where a host program (the Python package) follows long work instead of a terminal's bar: when
// set, every update goes to it; an exception it throws stops the work.
using ProgressHook = std::function<void(const std::string& what, long done, long total)>;
inline ProgressHook& progress_hook() {
  static ProgressHook hook;
  return hook;
}

class Progress {
 public:
  // `what` and `unit` read as "simulating [###...] 120/800 steps".
  Progress(std::string what, std::string unit)
      : what_(std::move(what)),
        unit_(std::move(unit)),
        terminal_(::isatty(STDERR_FILENO)),
        start_(std::chrono::steady_clock::now()) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void operator()(long done, long total) {
    if (const ProgressHook& hook = progress_hook()) hook(what_, done, total);
    if (!terminal_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed < 2.0) return;
    const int width = 30, filled = static_cast<int>(width * done / std::max(total, 1L));
    char eta[32] = "";
    if (done > 0 && done < total) std::snprintf(eta, sizeof eta, ", ETA %.0f s", elapsed / done * (total - done));
    std::fprintf(stderr, "\r  %s [%s%s] %ld/%ld %s, %.0f s%s   ", what_.c_str(), std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), done, total, unit_.c_str(), elapsed, eta);
    shown_ = true;
  }
  ~Progress() {
    if (shown_) std::fprintf(stderr, "\r%90s\r", "");
  }

 private:
  std::string what_, unit_;
  bool terminal_, shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace ddpsim::cli
