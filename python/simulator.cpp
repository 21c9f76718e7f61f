// The simulator in the Python package: ddpsim's verbs run through the library the command line
// is built from (no binary, no interpreter: a fork of this process), their standard output and
// error captured, so that ddpsim.run() and ddpsim.compare() print, write and refuse exactly what
// the binary does, call after call.
#include <poll.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <boost/program_options/errors.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "cli/commands.hpp"
#include "cli/progress.hpp"
#include "common/error.hpp"
#include "common/interrupt.hpp"

namespace py = pybind11;

namespace {

using Verb = int (*)(const ddpsim::cli::Args&);
const std::map<std::string, Verb> verbs = {
    {"run", ddpsim::cli::run},           {"compare", ddpsim::cli::compare},     {"sweep", ddpsim::cli::sweep},
    {"validate", ddpsim::cli::validate}, {"calibrate", ddpsim::cli::calibrate}, {"replay", ddpsim::cli::replay}};

std::string read_all(std::FILE* f) {
  std::string out;
  std::rewind(f);
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  return out;
}

// The child: the verb with its standard output and error in `out` and `err`, its refusal (kind
// and message) in `refusal`, its progress as "what\tdone\ttotal" lines on `progress_fd`.
[[noreturn]] void run_child(Verb verb, const std::vector<std::string>& args, std::FILE* out, std::FILE* err,
                            std::FILE* refusal, int progress_fd) {
  ::dup2(::fileno(out), 1);
  ::dup2(::fileno(err), 2);
  ddpsim::install_interrupt_handler("ddpsim");  // Ctrl-C stops a sweep as it stops the binary's
  auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
  ddpsim::cli::progress_hook() = [&](const std::string& what, long done, long total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last < std::chrono::milliseconds(100)) return;  // ten a second at most
    last = now;
    const std::string line = what + "\t" + std::to_string(done) + "\t" + std::to_string(total) + "\n";
    if (::write(progress_fd, line.data(), line.size()) < 0) std::_Exit(3);  // the parent is gone
  };
  int code = 0;
  const auto refuse = [&](const char* kind, const char* what) {
    std::fprintf(refusal, "%s\n%s", kind, what);
    return kind[0] == 'u' ? 2 : 1;
  };
  try {
    code = verb(args);
  } catch (const ddpsim::UsageError& e) {
    code = refuse("usage", e.what());
  } catch (const boost::program_options::error& e) {
    code = refuse("usage", e.what());
  } catch (const ddpsim::InputError& e) {
    code = refuse("input", e.what());
  } catch (const std::exception& e) {
    code = refuse("internal", e.what());
  }
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::_Exit(code);
}

// Runs `verb` with `args` as `ddpsim VERB ARGS...` would, in a forked copy of this process: the
// same library, but a fresh simulator each time (SimGrid's clock and its once-per-process XML
// platform start anew, so a second call's bytes equal the first's and the binary's). Returns
// (exit code, stdout, stderr); a refusal raises InputError / UsageError with the verb's message.
// `progress(what, done, total)` hears long work; Ctrl-C or an exception of `progress` stops the
// child, whose unfinished outputs stay in the caller's temporary folder.
py::tuple run_verb(const std::string& verb, const std::vector<std::string>& args, const py::object& progress) {
  const auto found = verbs.find(verb);
  if (found == verbs.end()) throw ddpsim::UsageError("unknown command \"" + verb + "\"");
  struct Files {
    std::FILE *out = std::tmpfile(), *err = std::tmpfile(), *refusal = std::tmpfile();
    ~Files() {
      for (std::FILE* f : {out, err, refusal})
        if (f) std::fclose(f);
    }
  } files;
  int pipe_fds[2];
  if (!files.out || !files.err || !files.refusal || ::pipe(pipe_fds) != 0)
    throw std::runtime_error("cannot set up the simulator's process");
  std::cout.flush();
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("cannot start the simulator's process");
  if (child == 0) {
    ::close(pipe_fds[0]);
    run_child(found->second, args, files.out, files.err, files.refusal, pipe_fds[1]);
  }
  ::close(pipe_fds[1]);
  std::string pending;
  // Ctrl-C (or a failing callback) stops the child as Ctrl-C stops the binary, so that a sweep
  // records its finished cells; one that has not ended after 10 s is killed.
  const auto stop = [&] {
    ::kill(child, SIGINT);
    for (int waited = 0; ::waitpid(child, nullptr, WNOHANG) == 0; ++waited) {
      if (waited == 100) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
        break;
      }
      ::usleep(100'000);
    }
    ::close(pipe_fds[0]);
  };
  try {
    for (;;) {
      pollfd fd{pipe_fds[0], POLLIN, 0};
      char buf[4096];
      bool ready = false;
      ssize_t n = 0;
      {
        py::gil_scoped_release unlocked;  // the notebook's other threads run while the child works
        ready = ::poll(&fd, 1, 100) > 0;
        if (ready) n = ::read(pipe_fds[0], buf, sizeof buf);
      }
      if (ready) {
        if (n <= 0) break;  // the child closed its end: it is done
        pending.append(buf, static_cast<std::size_t>(n));
        for (std::size_t eol; (eol = pending.find('\n')) != std::string::npos; pending.erase(0, eol + 1)) {
          const std::string line = pending.substr(0, eol);
          const auto a = line.find('\t'), b = line.rfind('\t');
          if (!progress.is_none() && a != b)
            progress(line.substr(0, a), std::stol(line.substr(a + 1, b - a - 1)), std::stol(line.substr(b + 1)));
        }
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  } catch (...) {
    stop();
    throw;
  }
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  // A terminal's Ctrl-C reaches the child too, which may end before this process hears it.
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) {
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    throw py::error_already_set();
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  const std::string refusal = read_all(files.refusal);
  if (!refusal.empty()) {
    const std::string kind = refusal.substr(0, refusal.find('\n')), what = refusal.substr(refusal.find('\n') + 1);
    if (kind == "usage") throw ddpsim::UsageError(what);
    if (kind == "input") throw ddpsim::InputError(what);
    throw std::runtime_error("ddpsim " + verb + ": internal error: " + what);
  }
  if (!WIFEXITED(status))
    throw std::runtime_error("ddpsim " + verb + ": the simulator's process ended by signal " +
                             std::to_string(WTERMSIG(status)) + "\n" + read_all(files.err));
  return py::make_tuple(code, read_all(files.out), read_all(files.err));
}

}  // namespace

// Adds the simulator's functions to ddpsim._core.
void bind_simulator(py::module_& m) {
  m.def("run_verb", &run_verb, py::arg("verb"), py::arg("args"), py::arg("progress") = py::none());
}
