#include "train/launcher.hpp"

#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include <ATen/Context.h>
#include <ATen/Parallel.h>

extern char** environ;

namespace ddptrain {

namespace {

bool flushed = false;  // apply_cpu_placement's setFlushDenormal took effect

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw std::runtime_error(std::string("--nproc-per-node: cannot find a free port on 127.0.0.1: ") +
                             std::strerror(errno));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

std::string join(const std::vector<int>& values) {
  std::string text;
  for (int v : values) text += (text.empty() ? "" : ",") + std::to_string(v);
  return text;
}

}  // namespace

void apply_cpu_placement(int threads) {
  if (const char* wanted = std::getenv("DDPTRAIN_CPUS"); wanted && *wanted) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (const char* p = wanted; *p;) {
      char* end = nullptr;
      const long cpu = std::strtol(p, &end, 10);
      if (end == p || cpu < 0 || cpu >= CPU_SETSIZE)
        throw std::runtime_error(std::string("DDPTRAIN_CPUS=") + wanted +
                                 ": expected core numbers separated by commas");
      CPU_SET(static_cast<int>(cpu), &set);
      p = *end == ',' ? end + 1 : end;
      if (*end && *end != ',')
        throw std::runtime_error(std::string("DDPTRAIN_CPUS=") + wanted +
                                 ": expected core numbers separated by commas");
    }
    if (::sched_setaffinity(0, sizeof set, &set) != 0)
      throw std::runtime_error(std::string("DDPTRAIN_CPUS=") + wanted +
                               ": cannot pin to these cores: " + std::strerror(errno));
  }
  if (threads > 0) at::set_num_threads(threads);
  flushed = at::globalContext().setFlushDenormal(true);
}

bool subnormals_flushed() { return flushed; }

std::string cpu_placement() {
  const auto cpus = allowed_cpus();
  const char* pinned = std::getenv("DDPTRAIN_CPUS");
  return join(cpus) + (pinned && *pinned ? " (pinned)" : " (not pinned)");
}

int launch_local_ranks(int nproc, const std::vector<std::string>& args, int threads) {
  const int port = free_loopback_port();
  const std::vector<int> cpus = allowed_cpus();
  const bool pin = threads > 0 && static_cast<int>(cpus.size()) >= nproc * threads;
  if (threads > 0 && !pin)
    std::cerr << "ddptrain: not pinning ranks: " << nproc << " ranks x " << threads << " threads > " << cpus.size()
              << " cores\n";
  std::vector<pid_t> children;
  for (int r = 0; r < nproc; ++r) {
    std::vector<std::string> env_text = {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r),
                                         "WORLD_SIZE=" + std::to_string(nproc), "MASTER_ADDR=127.0.0.1",
                                         "MASTER_PORT=" + std::to_string(port)};
    if (pin)
      env_text.push_back("DDPTRAIN_CPUS=" +
                         join(std::vector<int>(cpus.begin() + r * threads, cpus.begin() + (r + 1) * threads)));
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      const auto name = entry.substr(0, entry.find('='));
      if (name != "RANK" && name != "LOCAL_RANK" && name != "WORLD_SIZE" && name != "MASTER_ADDR" &&
          name != "MASTER_PORT" && name != "DDPTRAIN_CPUS")
        env_text.push_back(entry);
    }
    std::vector<char*> env, argv;
    for (auto& e : env_text) env.push_back(e.data());
    env.push_back(nullptr);
    std::string self = "/proc/self/exe";
    argv.push_back(self.data());
    std::vector<std::string> arg_copy = args;
    for (auto& a : arg_copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    if (const int err = ::posix_spawn(&pid, "/proc/self/exe", nullptr, nullptr, argv.data(), env.data()); err != 0) {
      for (pid_t c : children) ::kill(c, SIGTERM);
      throw std::runtime_error(std::string("--nproc-per-node: cannot start rank ") + std::to_string(r) + ": " +
                               std::strerror(err));
    }
    children.push_back(pid);
  }
  int result = 0;
  for (std::size_t left = children.size(); left > 0; --left) {
    int status = 0;
    const pid_t done = ::wait(&status);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code != 0 && result == 0) {
      result = code;
      std::cerr << "ddptrain: a rank (pid " << done << ") failed with exit code " << code << "; stopping the others\n";
      for (pid_t c : children)
        if (c != done) ::kill(c, SIGTERM);
    }
  }
  return result;
}

}  // namespace ddptrain
