// A signal that ends the process removes the temporaries of unfinished outputs and says so.
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "common/atomic_file.hpp"
#include "common/interrupt.hpp"

#include <doctest/doctest.h>

namespace {

struct Stopped {
  int signal = 0;
  std::string stderr_text;
};

// Runs `body` in a child that has the handler installed, and reports how the child ended.
template <class Body>
Stopped run_child(Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ddpsim::install_interrupt_handler("test");
    body();
    ::_exit(0);
  }
  ::close(fds[1]);
  Stopped stopped;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) stopped.stderr_text.append(buffer, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) stopped.signal = WTERMSIG(status);
  return stopped;
}

}  // namespace

TEST_CASE("SIGINT while an output is written: the temporary is removed, the message says so") {
  const auto dir = std::filesystem::temp_directory_path() / ("interrupt_test." + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const Stopped stopped = run_child([&] {
    ddpsim::AtomicFile done(dir / "done.csv");
    done.stream() << "finished\n";
    done.commit();
    ddpsim::AtomicFile file(dir / "steps.csv");
    file.stream() << "half a row";
    file.stream().flush();
    std::raise(SIGINT);
  });
  CHECK(stopped.signal == SIGINT);
  CHECK(stopped.stderr_text.find("test: stopped by SIGINT (interrupted); its unfinished output files were removed") !=
        std::string::npos);
  std::vector<std::string> left;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) left.push_back(entry.path().filename());
  CHECK(left == std::vector<std::string>{"done.csv"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("SIGTERM before any output: the process ends by the signal with its message") {
  const Stopped stopped = run_child([] { std::raise(SIGTERM); });
  CHECK(stopped.signal == SIGTERM);
  CHECK(stopped.stderr_text.find("test: stopped by SIGTERM; no output file was being written") != std::string::npos);
}
