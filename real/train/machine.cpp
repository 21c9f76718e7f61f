#include "train/machine.hpp"

#include <dlfcn.h>
#include <malloc.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

namespace ddptrain {

namespace {

// The first processor's "key\t: value" lines of /proc/cpuinfo, by key (empty where there is none).
std::map<std::string, std::string> cpuinfo() {
  std::map<std::string, std::string> found;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = line.substr(0, colon);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.pop_back();
    found.try_emplace(name, line.substr(colon + 1 + (colon + 1 < line.size() && line[colon + 1] == ' ')));
  }
  return found;
}

}  // namespace

std::string cpu_model() {
  auto info = cpuinfo();
  const std::string name = info["model name"], family = info["cpu family"], model = info["model"];
  if (name.empty()) return "unknown";
  return family.empty() || model.empty() ? name : name + " (family " + family + ", model " + model + ")";
}

std::string blas_kernels() {
  // LibTorch links the system BLAS; OpenBLAS answers through its own C API, its configuration
  // starting "OpenBLAS 0.3.21 ...".
  using Text = const char* (*)();
  const auto config = reinterpret_cast<Text>(::dlsym(RTLD_DEFAULT, "openblas_get_config"));
  const auto core = reinterpret_cast<Text>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (!config || !core) return "not OpenBLAS";
  std::istringstream words(config());
  std::string name, version;
  words >> name >> version;
  const char* forced = std::getenv("OPENBLAS_CORETYPE");
  return name + " " + version + ", " + core() + " kernels" + (forced && *forced ? ", set by OPENBLAS_CORETYPE" : "");
}

namespace {
bool kept = false;
}  // namespace

void keep_freed_memory() {
#ifdef __GLIBC__
  kept = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 &&  // glibc's ceiling on 64-bit; larger blocks are still mapped
         mallopt(M_TRIM_THRESHOLD, 1 << 30) == 1 && mallopt(M_TOP_PAD, 256 << 20) == 1;
#endif
}

std::string malloc_setting() {
  return kept ? "freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)"
              : "the C library's defaults (freed memory given back, its pages faulted in again on the next step)";
}

}  // namespace ddptrain
