#include "engine/platform.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"
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

// A cluster as a zone of leaf zones: a Full zone holds a route slot for every pair of its
// points, so one flat zone of 16,384 GPUs held 2 GiB of them; per leaf switch and between
// leaves, a few MiB. Routes are the flat zone's, link for link: inside a leaf as before; across
// leaves, a GPU's NIC to its leaf's gateway, the two leaf uplinks, the peer's NIC.
std::vector<sg4::Host*> build_cluster(const PlatformConfig& config, int G,
                                      const std::vector<std::pair<int, int>>& pairs) {
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
