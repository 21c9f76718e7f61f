// Platforms from the user's SimGrid XML. SimGrid aborts the process on platforms it cannot build
// (a link or route declared twice, an unknown routing), so a file is first loaded and checked in
// a child process; build_platform then loads it for real.
#include "engine/platform.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>

#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "common/input_file.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim {

namespace {

// SimGrid's parse errors can run over several lines (a banner for files older than version 4);
// the user gets one line that says what to change.
std::string load_error(const std::string& what) {
  if (what.find("ancient XML file") != std::string::npos) {
    const auto colon = what.find(": ");
    return what.substr(0, colon == std::string::npos ? 0 : colon) +
           ": the <platform> element has no version attribute (or one before 4): write <platform version=\"4.1\">, "
           "units in bytes, flops and seconds";
  }
  return what.substr(0, what.find('\n'));
}

constexpr int CHECK_FAILED = 3;
constexpr const char* CHECK_MARK = "ddpsim-platform-check: ";
constexpr const char* ROUTE_MARK = "ddpsim-platform-route: ";

constexpr long long MAX_XML_HOSTS = 100000;

// Hosts in a <cluster>'s radical ("0-3,8,10-11"), or MAX_XML_HOSTS + 1 when past it.
long long radical_hosts(const std::string& radical) {
  long long hosts = 0;
  std::istringstream parts(radical);
  for (std::string part; std::getline(parts, part, ',');) {
    const auto dash = part.find('-');
    const std::string first = part.substr(0, dash), last = dash == std::string::npos ? first : part.substr(dash + 1);
    if (first.empty() || last.empty() || first.size() > 12 || last.size() > 12 ||
        first.find_first_not_of("0123456789") != std::string::npos ||
        last.find_first_not_of("0123456789") != std::string::npos)
      return 0;  // not a range: SimGrid names it
    hosts += std::max(0LL, std::stoll(last) - std::stoll(first) + 1);
    if (hosts > MAX_XML_HOSTS) return MAX_XML_HOSTS + 1;
  }
  return hosts;
}

// What in a platform's text ddpsim refuses, as "LINE: what: why", or "". SimGrid has no getter
// for a resource's profile or the radical it expanded, so the text (comments aside) is searched:
// - availability that varies over time (a bandwidth_file, a state_file turning a link off, a
//   <trace_connect>): SimGrid deadlocks on a link profiled to zero and aborts on one turned off;
// - a <config> block: it rescales SimGrid's network model (bandwidth and latency factors, solver
//   precision) under the calibrated one, and SimGrid aborts mid-run on some of its values;
// - a <cluster> radical of more hosts than a rank map can use: SimGrid would build them all.
std::string refused_in_platform(const std::string& text) {
  const std::string varying =
      "availability that varies over time is not simulated (a step's variation comes "
      "from the model's noise and simulation.stragglers); remove it";
  const std::pair<const char*, std::string> refused[] = {
      {"bandwidth_file", varying},
      {"latency_file", varying},
      {"state_file", varying},
      {"speed_file", varying},
      {"<trace_connect", varying},
      {"<trace ", varying},
      {"<config", "SimGrid's own settings would change the network model ddpsim calibrates; remove the block"},
      {"radical=\"", ""}};
  for (std::size_t from = 0;;) {
    std::size_t found = std::string::npos;
    const std::pair<const char*, std::string>* what = nullptr;
    for (const auto& entry : refused)
      if (const auto at = text.find(entry.first, from); at < found) found = at, what = &entry;
    if (found == std::string::npos) return "";
    if (const auto comment = text.find("<!--", from); comment < found) {
      from = text.find("-->", comment);
      if (from == std::string::npos) return "";
      continue;
    }
    from = found + 1;
    const auto at = text.begin() + static_cast<std::ptrdiff_t>(found);
    const auto line = std::to_string(1 + std::count(text.begin(), at, '\n'));
    std::string name = what->first;
    name.erase(0, name.front() == '<');
    name.erase(name.find_last_not_of(" =\"") + 1);
    if (name != "radical") return line + ": " + name + ": " + what->second;
    const auto open = found + std::strlen(what->first), close = text.find('"', open);
    if (close == std::string::npos) return "";
    if (const auto hosts = radical_hosts(text.substr(open, close - open)); hosts > MAX_XML_HOSTS)
      return line + ": a cluster radical of more than " + std::to_string(MAX_XML_HOSTS) +
             " hosts: ddpsim simulates at most that many (each would be built)";
  }
}

[[noreturn]] void fail_check(const std::string& reason) {
  const std::string line = std::string("\n") + CHECK_MARK + reason + "\n";
  [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(CHECK_FAILED);
}

// Links SimGrid builds but ddpsim cannot simulate, or reads in a way the user did not mean.
void check_links(const sg4::Engine& engine, const std::string& file) {
  // A WIFI link's sharing is defined only at a route's end, and SimGrid aborts mid-run elsewhere.
  for (const auto* link : engine.get_all_links())
    if (link->get_sharing_policy() == sg4::Link::SharingPolicy::WIFI)
      fail_check(file + ": link \"" + link->get_name() +
                 "\" is a WIFI link, which ddpsim does not simulate "
                 "(give it the default sharing policy)");
  // A SPLITDUPLEX link N is two links, N_UP and N_DOWN, so SimGrid takes a plain link declared
  // again as N without a word, and a route's N then means one or the other by its direction.
  for (const auto* link : engine.get_all_links())
    if (const auto& name = link->get_name();
        engine.link_by_name_or_null(name + "_UP") && engine.link_by_name_or_null(name + "_DOWN"))
      fail_check(file + ": link \"" + name + "\" is declared twice: as SPLITDUPLEX (SimGrid's \"" + name +
                 "_UP\" and \"" + name + "_DOWN\") and as a plain link; give one of them another id");
}

// The route from rank a's host to rank b's exists, and its links would let a transfer end.
void check_route(const std::string& file, const sg4::Host* from, const sg4::Host* to, int a, int b) {
  // SimGrid 3.32 dereferences a missing route in a Full zone: say which pair is being looked
  // up, so that the parent can name it if this child dies on it.
  const std::string lookup = std::string("\n") + ROUTE_MARK + "from host \"" + from->get_name() + "\" (rank " +
                             std::to_string(a) + ") to host \"" + to->get_name() + "\" (rank " + std::to_string(b) +
                             ")\n";
  [[maybe_unused]] const auto marked = ::write(STDERR_FILENO, lookup.data(), lookup.size());
  std::vector<sg4::Link*> links;
  double latency = 0;
  from->route_to(to, links, &latency);
  if (links.empty() && latency == 0)  // SimGrid's own test for "no connecting path"
    fail_check(file + ": no route from host \"" + from->get_name() + "\" (rank " + std::to_string(a) + ") to host \"" +
               to->get_name() + "\" (rank " + std::to_string(b) + "), which the allreduce needs");
  // SimGrid takes a zero bandwidth as given: every transfer over it would never end. The
  // bounds are the config's for built-in topologies: 1e-6 to 1e6 GB/s, at most 1e6 us.
  for (const auto* link : links)
    if (!(link->get_bandwidth() >= 1e3 && link->get_bandwidth() <= 1e15) ||
        !(link->get_latency() >= 0 && link->get_latency() <= 1)) {
      std::ostringstream why;
      why << file << ": link \"" << link->get_name() << "\" (on the route from \"" << from->get_name() << "\" to \""
          << to->get_name() << "\") has bandwidth " << link->get_bandwidth() << " B/s and latency "
          << link->get_latency()
          << " s: expected a bandwidth from 1e3 to 1e15 B/s (1e-6 to 1e6 GB/s) and a "
             "latency from 0 to 1 s";
      fail_check(why.str());
    }
}

// The child's side of check_platform_file: loads the platform into a fresh engine and checks
// the rank hosts and the routes the collective uses; exits 0, or CHECK_FAILED with its reason.
[[noreturn]] void probe_platform(const PlatformConfig& config, const std::vector<std::pair<int, int>>& pairs) {
  try {
    xbt_log_control_set("root.thresh:critical");
    sg4::Engine engine("ddpsim");
    if (const auto refused = refused_in_platform(read_input_file(config.file, "platform file", 64 * MiB));
        !refused.empty())
      fail_check(config.file + ":" + refused);
    const auto hosts = build_xml(config);
    check_links(engine, config.file);
    for (const auto& [a, b] : pairs)
      if (a != b)
        check_route(config.file, hosts[static_cast<std::size_t>(a)], hosts[static_cast<std::size_t>(b)], a, b);
  } catch (const InputError& e) {
    fail_check(e.what());
  } catch (const std::exception& e) {
    fail_check(config.file + ": invalid SimGrid platform: " + e.what());
  }
  ::_exit(0);
}

// SimGrid's reason from the output of a child it aborted: its CRITICAL line, or the last line.
std::string simgrid_reason(const std::string& output, int status) {
  std::istringstream lines(output);
  std::string line, last;
  while (std::getline(lines, line)) {
    if (const auto at = line.find("CRITICAL] "); at != std::string::npos) return line.substr(at + 10);
    if (!line.empty()) last = line;
  }
  if (!last.empty()) return last;
  return WIFSIGNALED(status) ? std::string("SimGrid stopped on signal ") + ::strsignal(WTERMSIG(status))
                             : "SimGrid exited with status " + std::to_string(WEXITSTATUS(status));
}

// Runs probe_platform in a child; its output (stdout and stderr, the first MiB) and status.
std::pair<std::string, int> run_probe(const PlatformConfig& config, const std::vector<std::pair<int, int>>& pairs) {
  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (child == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    probe_platform(config, pairs);
  }
  ::close(fds[1]);
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    if (output.size() < MiB) output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return {std::move(output), status};
}

// What a failed probe says to the user: its reason, the route it died on, or SimGrid's words.
[[noreturn]] void throw_probe_failure(const PlatformConfig& config, const std::string& output, int status) {
  if (WIFEXITED(status) && WEXITSTATUS(status) == CHECK_FAILED) {
    const auto at = output.rfind(CHECK_MARK);
    if (at != std::string::npos) {
      std::string reason = output.substr(at + std::strlen(CHECK_MARK));
      reason.erase(reason.find_last_not_of('\n') + 1);
      throw InputError(reason);
    }
  }
  const auto route = output.rfind(ROUTE_MARK);
  if (route != std::string::npos) {
    std::string pair = output.substr(route + std::strlen(ROUTE_MARK));
    pair = pair.substr(0, pair.find('\n'));
    const std::string how = WIFSIGNALED(status) ? std::string(::strsignal(WTERMSIG(status)))
                                                : "exit status " + std::to_string(WEXITSTATUS(status));
    throw InputError(config.file + ": SimGrid crashed (" + how + ") looking up the route " + pair +
                     ", which the allreduce needs: is there a <route> between them (a Full zone needs one "
                     "per pair of hosts)? SimGrid 3.32 also crashes here on some Dijkstra zones whose routes are "
                     "complete; routing=\"Floyd\" reads them");
  }
  throw InputError(config.file + ": invalid SimGrid platform: " + simgrid_reason(output, status));
}

}  // namespace

std::vector<sg4::Host*> build_xml(const PlatformConfig& config) {
  try {
    sg4::Engine::get_instance()->load_platform(config.file);
  } catch (const std::exception& e) {
    throw InputError(config.file + ": invalid SimGrid platform: " + load_error(e.what()));
  }
  std::vector<sg4::Host*> hosts;
  for (std::size_t g = 0; g < config.hosts.size(); ++g) {
    sg4::Host* h = sg4::Engine::get_instance()->host_by_name_or_null(config.hosts[g]);
    if (!h)
      throw InputError(config.file + ": no host \"" + config.hosts[g] + "\" for rank " + std::to_string(g) +
                       " (platform.hosts[" + std::to_string(g) + "])");
    hosts.push_back(h);
  }
  return hosts;
}

void check_platform_file(const PlatformConfig& config, const std::vector<std::pair<int, int>>& pairs) {
  check_input_file(config.file, "platform file", 64 * MiB);
  // A sweep checks the same platform for every cell: one child per distinct question is enough.
  static std::set<std::string> passed;
  std::string question = config.to_json().dump();
  for (const auto& [a, b] : pairs) {
    question += ' ';
    question += std::to_string(a);
    question += '-';
    question += std::to_string(b);
  }
  if (passed.count(question)) return;
  const auto [output, status] = run_probe(config, pairs);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    passed.insert(std::move(question));
    return;
  }
  throw_probe_failure(config, output, status);
}

}  // namespace ddpsim
