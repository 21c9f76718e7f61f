// Where the ranks run: a built-in topology generated from the config, or a user's SimGrid
// platform XML with a rank→host map. Bandwidths are per direction (links are full-duplex)
// and are the effective figures a collective reaches, in GB/s (1e9 bytes/s).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace simgrid::s4u {
class Host;
}

namespace ddpsim {

struct PlatformConfig {
  std::string topology = "pcie";  // pcie | nvlink | cluster | xml
  double link_GBps = 24;          // each GPU's link (PCIe lane group or NVLink), per direction
  double latency_us = 5;          // per link
  double host_GBps = 40;          // pcie: the root complex every GPU-to-GPU copy crosses (0 = unlimited)
  int gpus_per_node = 8;          // cluster; xml: ranks per node for the hierarchical algorithm
  double nic_GBps = 50;           // cluster: one NIC per GPU
  double nic_latency_us = 5;
  int nodes_per_leaf = 4;          // cluster: nodes under one leaf switch
  double oversubscription = 1;     // cluster: leaf downlink / uplink bandwidth ratio
  std::string file;                // xml: the platform file
  std::vector<std::string> hosts;  // xml: host of each rank

  // The config's text, for summaries.
  nlohmann::json to_json() const;
};

// Reads the config's platform section; `G` checks the shape (cluster: G = nodes × gpus_per_node;
// xml: one host per rank). Defaults depend on the topology (nvlink: 450 GB/s, 2 µs).
PlatformConfig parse_platform(const nlohmann::json& doc, const std::string& where, int G, const std::string& base_dir);

// Node of each rank: GPUs of one node talk over NVLink/PCIe, across nodes over NICs.
std::vector<int> node_of_ranks(const PlatformConfig& config, int G);

// Loads a platform XML in a child process, since SimGrid aborts on platforms it cannot build
// (a link or route declared twice, an unknown routing), and checks that the ranks' hosts exist
// and that every pair in `pairs` has a route. Throws InputError naming the file and SimGrid's
// reason, so that build_platform never meets a platform that takes the process down.
void check_platform_file(const PlatformConfig& config, const std::vector<std::pair<int, int>>& pairs);

// build_platform's XML case: loads config.file into the current engine (check_platform_file
// first) and returns the ranks' hosts, by platform.hosts.
std::vector<simgrid::s4u::Host*> build_xml(const PlatformConfig& config);

// Builds the platform in the current SimGrid engine and returns each rank's host. Built-in
// topologies get routes only for `pairs` (the rank pairs the collectives use), which keeps a
// 1,024-GPU cluster small; an XML platform has its own routing. Errors name the file and host.
std::vector<simgrid::s4u::Host*> build_platform(const PlatformConfig& config, int G,
                                                const std::vector<std::pair<int, int>>& pairs);

}  // namespace ddpsim
