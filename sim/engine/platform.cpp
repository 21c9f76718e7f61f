#include "engine/platform.hpp"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <sys/wait.h>
#include <unistd.h>
#include <xbt/log.h>
#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/json_util.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim {

nlohmann::json PlatformConfig::to_json() const {
  nlohmann::json j = {{"topology", topology}};
  if (topology == "xml") {
    j["file"] = file;
    j["hosts"] = hosts;
    j["gpus_per_node"] = gpus_per_node;
    return j;
  }
  j["link_GBps"] = link_GBps;
  j["latency_us"] = latency_us;
  if (topology == "pcie") j["host_GBps"] = host_GBps;
  if (topology == "cluster")
    j.update({{"gpus_per_node", gpus_per_node},
              {"nic_GBps", nic_GBps},
              {"nic_latency_us", nic_latency_us},
              {"nodes_per_leaf", nodes_per_leaf},
              {"oversubscription", oversubscription}});
  return j;
}

namespace {

// Bandwidths and ratios: positive, and within a range where step times stay finite.
double positive(const JsonFields& f, const char* key, double fallback) {
  const double v = f.get<double>(key, fallback);
  if (!(v >= 1e-6 && v <= 1e6))
    throw InputError(f.where() + ": " + key + " must be from 1e-06 to 1e+06, got " + nlohmann::json(v).dump());
  return v;
}

double latency(const JsonFields& f, const char* key, double fallback) {
  const double v = f.get<double>(key, fallback);
  if (!(v >= 0 && v <= 1e6))
    throw InputError(f.where() + ": " + key + " must be from 0 to 1e+06 µs, got " + nlohmann::json(v).dump());
  return v;
}

}  // namespace

PlatformConfig parse_platform(const nlohmann::json& doc, const std::string& where, int G, const std::string& base_dir) {
  if (doc.is_string()) return parse_platform(nlohmann::json{{"topology", doc}}, where, G, base_dir);
  JsonFields f(doc, where);
  PlatformConfig p;
  p.topology = f.get<std::string>("topology", p.topology);
  if (p.topology == "nvlink" || p.topology == "cluster") p.link_GBps = 450, p.latency_us = 2;
  if (p.topology == "xml") {
    p.file = f.require<std::string>("file");
    if (!base_dir.empty() && !std::filesystem::path(p.file).is_absolute())
      p.file = (std::filesystem::path(base_dir) / p.file).lexically_normal().string();
    p.hosts = f.require<std::vector<std::string>>("hosts");
    std::map<std::string, std::size_t> first;
    for (std::size_t g = 0; g < p.hosts.size(); ++g)
      if (const auto [at, fresh] = first.emplace(p.hosts[g], g); !fresh)
        throw InputError(where + ": hosts[" + std::to_string(g) + "] repeats \"" + p.hosts[g] + "\" of hosts[" +
                         std::to_string(at->second) + "] (one host per rank)");
    if (static_cast<int>(p.hosts.size()) != G)
      throw InputError(where + ": hosts maps " + std::to_string(p.hosts.size()) + " ranks, world_size is " +
                       std::to_string(G) + " (one host name per rank)");
    p.gpus_per_node = f.get<int>("gpus_per_node", G);
  } else if (p.topology == "pcie" || p.topology == "nvlink" || p.topology == "cluster") {
    p.link_GBps = positive(f, "link_GBps", p.link_GBps);
    p.latency_us = latency(f, "latency_us", p.latency_us);
    if (p.topology == "pcie") {
      p.host_GBps = f.get<double>("host_GBps", p.host_GBps);
      if (p.host_GBps != 0) p.host_GBps = positive(f, "host_GBps", p.host_GBps);  // 0 = unlimited
    }
    if (p.topology == "cluster") {
      p.gpus_per_node = f.get<int>("gpus_per_node", p.gpus_per_node);
      p.nic_GBps = positive(f, "nic_GBps", p.nic_GBps);
      p.nic_latency_us = latency(f, "nic_latency_us", p.nic_latency_us);
      p.nodes_per_leaf = f.get<int>("nodes_per_leaf", p.nodes_per_leaf);
      p.oversubscription = positive(f, "oversubscription", p.oversubscription);
      if (p.gpus_per_node < 1 || p.nodes_per_leaf < 1)
        throw InputError(where + ": gpus_per_node and nodes_per_leaf must be ≥ 1");
      if (G % p.gpus_per_node != 0)
        throw InputError(where + ": world_size " + std::to_string(G) + " is not a whole number of nodes of " +
                         std::to_string(p.gpus_per_node) + " GPUs (gpus_per_node)");
    }
  } else {
    throw InputError(where + ": unknown topology \"" + p.topology + "\" (known: pcie, nvlink, cluster, xml)");
  }
  if (p.gpus_per_node < 1) throw InputError(where + ": gpus_per_node must be ≥ 1");
  f.reject_unknown();
  return p;
}

std::vector<int> node_of_ranks(const PlatformConfig& config, int G) {
  std::vector<int> node(static_cast<std::size_t>(G), 0);
  if (config.topology == "cluster" || config.topology == "xml")
    for (int g = 0; g < G; ++g) node[static_cast<std::size_t>(g)] = g / config.gpus_per_node;
  return node;
}

namespace {

using Direction = sg4::LinkInRoute::Direction;

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
  const std::string varying = "availability that varies over time is not simulated (a step's variation comes "
                              "from the model's noise and simulation.stragglers); remove it";
  const std::pair<const char*, std::string> refused[] = {
      {"bandwidth_file", varying}, {"latency_file", varying}, {"state_file", varying},
      {"speed_file", varying},     {"<trace_connect", varying}, {"<trace ", varying},
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

// The child's side of check_platform_file: loads the platform into a fresh engine and checks
// the rank hosts and the routes the collective uses; exits 0, or CHECK_FAILED with its reason.
[[noreturn]] void probe_platform(const PlatformConfig& config, const std::vector<std::pair<int, int>>& pairs) {
  const auto fail = [](const std::string& reason) {
    const std::string line = std::string("\n") + CHECK_MARK + reason + "\n";
    [[maybe_unused]] const auto written = ::write(STDERR_FILENO, line.data(), line.size());
    ::_exit(CHECK_FAILED);
  };
  try {
    xbt_log_control_set("root.thresh:critical");
    sg4::Engine engine("ddpsim");
    if (const auto refused = refused_in_platform(read_input_file(config.file, "platform file", 64 * MiB));
        !refused.empty())
      fail(config.file + ":" + refused);
    const auto hosts = build_xml(config);
    // A WIFI link's sharing is defined only at a route's end, and SimGrid aborts mid-run elsewhere.
    for (const auto* link : engine.get_all_links())
      if (link->get_sharing_policy() == sg4::Link::SharingPolicy::WIFI)
        fail(config.file + ": link \"" + link->get_name() + "\" is a WIFI link, which ddpsim does not simulate "
             "(give it the default sharing policy)");
    // A SPLITDUPLEX link N is two links, N_UP and N_DOWN, so SimGrid takes a plain link declared
    // again as N without a word, and a route's N then means one or the other by its direction.
    for (const auto* link : engine.get_all_links())
      if (const auto& name = link->get_name();
          engine.link_by_name_or_null(name + "_UP") && engine.link_by_name_or_null(name + "_DOWN"))
        fail(config.file + ": link \"" + name + "\" is declared twice: as SPLITDUPLEX (SimGrid's \"" + name +
             "_UP\" and \"" + name + "_DOWN\") and as a plain link; give one of them another id");
    for (const auto& [a, b] : pairs) {
      if (a == b) continue;
      const auto* from = hosts[static_cast<std::size_t>(a)];
      const auto* to = hosts[static_cast<std::size_t>(b)];
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
        fail(config.file + ": no route from host \"" + from->get_name() + "\" (rank " + std::to_string(a) +
             ") to host \"" + to->get_name() + "\" (rank " + std::to_string(b) + "), which the allreduce needs");
      // SimGrid takes a zero bandwidth as given: every transfer over it would never end. The
      // bounds are the config's for built-in topologies: 1e-6 to 1e6 GB/s, at most 1e6 us.
      for (const auto* link : links)
        if (!(link->get_bandwidth() >= 1e3 && link->get_bandwidth() <= 1e15) ||
            !(link->get_latency() >= 0 && link->get_latency() <= 1)) {
          std::ostringstream why;
          why << config.file << ": link \"" << link->get_name() << "\" (on the route from \"" << from->get_name()
              << "\" to \"" << to->get_name() << "\") has bandwidth " << link->get_bandwidth() << " B/s and latency "
              << link->get_latency() << " s: expected a bandwidth from 1e3 to 1e15 B/s (1e-6 to 1e6 GB/s) and a "
                 "latency from 0 to 1 s";
          fail(why.str());
        }
    }
  } catch (const InputError& e) {
    fail(e.what());
  } catch (const std::exception& e) {
    fail(config.file + ": invalid SimGrid platform: " + e.what());
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

}  // namespace

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
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    passed.insert(std::move(question));
    return;
  }
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

namespace {

// A cluster as a zone of leaf zones: a Full zone holds a route slot for every pair of its
// points, so one flat zone of 16,384 GPUs held 2 GiB of them; per leaf switch and between
// leaves, a few MiB. Routes are the flat zone's, link for link: inside a leaf as before; across
// leaves, a GPU's NIC to its leaf's gateway, the two leaf uplinks, the peer's NIC.
std::vector<sg4::Host*> build_cluster(const PlatformConfig& config, int G, const std::vector<std::pair<int, int>>& pairs) {
  auto* root = sg4::create_full_zone(config.topology);
  const double lat = config.latency_us * 1e-6;
  const auto node = node_of_ranks(config, G);
  const int per_leaf = config.nodes_per_leaf;
  const auto leaf_of = [&](std::size_t g) { return static_cast<std::size_t>(node[g] / per_leaf); };
  std::vector<sg4::Link*> gpu_link, nic, leaf_up;
  // The links first: SimGrid checks a new link's name in every zone below, and there are none yet.
  for (int g = 0; g < G; ++g) {
    const std::string id = std::to_string(g);
    gpu_link.push_back(root->create_split_duplex_link("gpulink" + id, config.link_GBps * 1e9)->set_latency(lat));
    nic.push_back(
        root->create_split_duplex_link("nic" + id, config.nic_GBps * 1e9)->set_latency(config.nic_latency_us * 1e-6));
  }
  const std::size_t leaves = leaf_of(static_cast<std::size_t>(G - 1)) + 1;
  const double uplink = per_leaf * config.gpus_per_node * config.nic_GBps * 1e9 / config.oversubscription;
  for (std::size_t l = 0; l < leaves; ++l)
    leaf_up.push_back(root->create_split_duplex_link("leaf" + std::to_string(l) + "-spine", uplink)
                          ->set_latency(config.nic_latency_us * 1e-6));
  std::vector<sg4::NetZone*> zones;
  std::vector<simgrid::kernel::routing::NetPoint*> gateways;
  std::vector<sg4::Host*> hosts;
  for (int g = 0; g < G; ++g) {
    const std::size_t l = leaf_of(static_cast<std::size_t>(g));
    if (l == zones.size()) {
      zones.push_back(sg4::create_full_zone("leaf" + std::to_string(l))->set_parent(root));
      gateways.push_back(zones.back()->create_router("leaf" + std::to_string(l) + "-gateway"));
    }
    hosts.push_back(zones[l]->create_host("gpu" + std::to_string(g), 1e12));
  }
  std::set<std::pair<int, int>> done;
  std::set<std::pair<std::size_t, std::size_t>> between;
  std::vector<bool> out(hosts.size()), in(hosts.size());  // a GPU's way to and from its gateway
  for (const auto& [a, b] : pairs) {
    if (a == b || !done.insert({a, b}).second) continue;
    const auto A = static_cast<std::size_t>(a), Bi = static_cast<std::size_t>(b);
    const std::size_t la = leaf_of(A), lb = leaf_of(Bi);
    if (la == lb) {
      std::vector<sg4::LinkInRoute> route;
      if (node[A] == node[Bi])
        route = {{gpu_link[A], Direction::UP}, {gpu_link[Bi], Direction::DOWN}};
      else
        route = {{nic[A], Direction::UP}, {nic[Bi], Direction::DOWN}};
      zones[la]->add_route(hosts[A]->get_netpoint(), hosts[Bi]->get_netpoint(), nullptr, nullptr, route, false);
      continue;
    }
    if (!out[A])
      zones[la]->add_route(hosts[A]->get_netpoint(), gateways[la], nullptr, nullptr, {{nic[A], Direction::UP}}, false);
    if (!in[Bi])
      zones[lb]->add_route(gateways[lb], hosts[Bi]->get_netpoint(), nullptr, nullptr, {{nic[Bi], Direction::DOWN}},
                           false);
    out[A] = in[Bi] = true;
    if (between.insert({la, lb}).second)
      root->add_route(zones[la]->get_netpoint(), zones[lb]->get_netpoint(), gateways[la], gateways[lb],
                      {{leaf_up[la], Direction::UP}, {leaf_up[lb], Direction::DOWN}}, false);
  }
  for (auto* zone : zones) zone->seal();
  root->seal();
  return hosts;
}

}  // namespace

std::vector<sg4::Host*> build_platform(const PlatformConfig& config, int G,
                                       const std::vector<std::pair<int, int>>& pairs) {
  if (config.topology == "xml") return build_xml(config);
  if (config.topology == "cluster") return build_cluster(config, G, pairs);
  // One node (pcie, nvlink): every route is a GPU's link up, the root complex on PCIe, the peer's down.
  auto* zone = sg4::create_full_zone(config.topology);
  const double lat = config.latency_us * 1e-6;
  std::vector<sg4::Host*> hosts;
  std::vector<sg4::Link*> gpu_link;
  for (int g = 0; g < G; ++g) {
    const std::string id = std::to_string(g);
    hosts.push_back(zone->create_host("gpu" + id, 1e12));
    gpu_link.push_back(zone->create_split_duplex_link("gpulink" + id, config.link_GBps * 1e9)->set_latency(lat));
  }
  sg4::Link* root = nullptr;
  if (config.topology == "pcie" && config.host_GBps > 0)
    root = zone->create_link("root-complex", config.host_GBps * 1e9);

  std::set<std::pair<int, int>> done;
  for (const auto& [a, b] : pairs) {
    if (a == b || !done.insert({a, b}).second) continue;
    const auto A = static_cast<std::size_t>(a), Bi = static_cast<std::size_t>(b);
    std::vector<sg4::LinkInRoute> route;
    route.emplace_back(gpu_link[A], Direction::UP);
    if (root) route.emplace_back(root);
    route.emplace_back(gpu_link[Bi], Direction::DOWN);
    zone->add_route(hosts[A]->get_netpoint(), hosts[Bi]->get_netpoint(), nullptr, nullptr, route, false);
  }
  zone->seal();
  return hosts;
}

}  // namespace ddpsim
