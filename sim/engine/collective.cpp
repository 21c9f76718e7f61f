#include "engine/collective.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim {

std::vector<std::pair<int, int>> CollectivePlan::pairs() const {
  std::set<std::pair<int, int>> all;
  for (const auto& phase : phases)
    for (const auto& f : phase.flows) all.insert({f.src, f.dst});
  return {all.begin(), all.end()};
}

const std::vector<std::string>& allreduce_algorithms() {
  static const std::vector<std::string> names = {"ring", "tree", "hierarchical"};
  return names;
}

namespace {

// A ring over `members` moving `fraction`·S per rank in `hops` steps.
Phase ring(const std::vector<int>& members, double fraction, int hops) {
  Phase p;
  p.hops = hops;
  const std::size_t n = members.size();
  if (n > 1)
    for (std::size_t i = 0; i < n; ++i) p.flows.push_back({members[i], members[(i + 1) % n], fraction});
  return p;
}

void append_ring_phases(std::vector<Phase>& phases, const std::vector<std::vector<int>>& rings, double fraction,
                        int hops) {
  Phase merged;
  merged.hops = hops;
  for (const auto& members : rings) {
    Phase p = ring(members, fraction, hops);
    merged.flows.insert(merged.flows.end(), p.flows.begin(), p.flows.end());
  }
  if (!merged.flows.empty()) phases.push_back(std::move(merged));
}

// The flows of a phase to simulate: of the groups of flows that share links (a group shares none
// with another), the first of each kind, where a kind is the group written with its links renamed
// in order of first use: equal writings are the same sub-network, whose flows max-min sharing
// gives the same rates. Returns indices into `flows`, in plan order, each with the number of
// groups of its kind.
std::vector<std::pair<std::size_t, double>> one_group_per_kind(const std::vector<Flow>& flows,
                                                               const std::vector<std::vector<sg4::Link*>>& routes,
                                                               const std::vector<double>& route_latency) {
  const std::size_t n = flows.size();
  std::vector<std::size_t> parent(n);
  std::iota(parent.begin(), parent.end(), std::size_t{0});
  auto root = [&](std::size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::unordered_map<const sg4::Link*, std::size_t> first_user;
  for (std::size_t i = 0; i < n; ++i)
    for (const sg4::Link* link : routes[i])
      if (auto [it, fresh] = first_user.try_emplace(link, i); !fresh) {
        const std::size_t a = root(i), b = root(it->second);
        parent[std::max(a, b)] = std::min(a, b);
      }
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::size_t> group_of(n, n);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t& g = group_of[root(i)];
    if (g == n) {
      g = groups.size();
      groups.emplace_back();
    }
    groups[g].push_back(i);
  }
  std::map<std::vector<double>, std::size_t> kinds;  // → its first group
  std::vector<double> copies(groups.size(), 0.0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    std::vector<double> kind;
    std::unordered_map<const sg4::Link*, double> renamed;
    for (const std::size_t i : groups[g]) {
      kind.insert(kind.end(), {flows[i].fraction, route_latency[i], static_cast<double>(routes[i].size())});
      for (const sg4::Link* link : routes[i]) {
        const auto [it, fresh] = renamed.try_emplace(link, static_cast<double>(renamed.size()));
        kind.push_back(it->second);
        if (fresh)
          kind.insert(kind.end(),
                      {link->get_bandwidth(), link->get_latency(), static_cast<double>(link->get_sharing_policy())});
      }
    }
    copies[kinds.try_emplace(std::move(kind), g).first->second] += 1;
  }
  std::vector<std::pair<std::size_t, double>> chosen;
  for (std::size_t g = 0; g < groups.size(); ++g)
    if (copies[g] > 0)
      for (const std::size_t i : groups[g]) chosen.emplace_back(i, copies[g]);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

// A hierarchical collective's rings: each node's ranks, and each rail (the ranks of one local
// index, one per node).
struct NodeRings {
  std::vector<std::vector<int>> nodes, rails;
};

NodeRings node_rings(const std::vector<int>& node_of_rank) {
  NodeRings r;
  for (std::size_t g = 0; g < node_of_rank.size(); ++g) {
    const int n = node_of_rank[g];
    if (n == static_cast<int>(r.nodes.size())) r.nodes.emplace_back();
    if (n != static_cast<int>(r.nodes.size()) - 1)
      throw InputError("hierarchical allreduce: the ranks of a node must be consecutive (rank " + std::to_string(g) +
                       ")");
    r.nodes.back().push_back(static_cast<int>(g));
  }
  const std::size_t M = r.nodes.front().size();
  for (const auto& n : r.nodes)
    if (n.size() != M) throw InputError("hierarchical allreduce: every node needs the same number of GPUs");
  r.rails.resize(M);
  for (const auto& n : r.nodes)
    for (std::size_t i = 0; i < M; ++i) r.rails[i].push_back(n[i]);
  return r;
}

}  // namespace

CollectivePlan make_half_allreduce(bool reduce_scatter, const std::string& algorithm,
                                   const std::vector<int>& node_of_rank) {
  const int G = static_cast<int>(node_of_rank.size());
  CollectivePlan plan{algorithm, {}};
  if (algorithm == "ring") {
    std::vector<int> all(static_cast<std::size_t>(G));
    std::iota(all.begin(), all.end(), 0);
    append_ring_phases(plan.phases, {all}, double(G - 1) / G, G - 1);
  } else if (algorithm == "hierarchical") {
    const NodeRings r = node_rings(node_of_rank);
    const int M = static_cast<int>(r.nodes.front().size()), N = static_cast<int>(r.nodes.size());
    if (reduce_scatter) append_ring_phases(plan.phases, r.nodes, double(M - 1) / M, M - 1);
    append_ring_phases(plan.phases, r.rails, double(N - 1) / N / M, N - 1);
    if (!reduce_scatter) append_ring_phases(plan.phases, r.nodes, double(M - 1) / M, M - 1);
  } else {
    throw InputError("a reduce-scatter or all-gather is \"ring\" or \"hierarchical\", got \"" + algorithm + "\"");
  }
  return plan;
}

CollectivePlan make_allreduce(const std::string& algorithm, const std::vector<int>& node_of_rank, int group) {
  const int G = static_cast<int>(node_of_rank.size());
  CollectivePlan plan{algorithm, {}};
  if (algorithm == "ring") {
    std::vector<int> all(static_cast<std::size_t>(G));
    for (int g = 0; g < G; ++g) all[static_cast<std::size_t>(g)] = g;
    append_ring_phases(plan.phases, {all}, 2.0 * (G - 1) / G, 2 * (G - 1));
  } else if (algorithm == "allgather" || algorithm == "replicas") {
    const int S = group > 0 ? group : G, R = G / S;
    if (S * R != G)
      throw InputError("a shard group of " + std::to_string(S) + " ranks does not divide " + std::to_string(G));
    std::vector<std::vector<int>> groups(static_cast<std::size_t>(R)), replicas(static_cast<std::size_t>(S));
    for (int g = 0; g < G; ++g) {
      groups[static_cast<std::size_t>(g / S)].push_back(g);
      replicas[static_cast<std::size_t>(g % S)].push_back(g);
    }
    if (algorithm == "allgather")
      append_ring_phases(plan.phases, groups, double(S - 1) / S, S - 1);
    else
      append_ring_phases(plan.phases, replicas, 2.0 * (R - 1) / R, 2 * (R - 1));
  } else if (algorithm == "tree") {
    const int depth = G > 1 ? static_cast<int>(std::floor(std::log2(G))) : 0;
    Phase up, down;
    up.hops = down.hops = std::max(depth, 1);
    for (int g = 1; g < G; ++g) {
      up.flows.push_back({g, (g - 1) / 2, 1.0});
      down.flows.push_back({(g - 1) / 2, g, 1.0});
    }
    if (G > 1) plan.phases = {up, down};
  } else if (algorithm == "hierarchical") {
    const NodeRings r = node_rings(node_of_rank);
    const int M = static_cast<int>(r.nodes.front().size()), N = static_cast<int>(r.nodes.size());
    append_ring_phases(plan.phases, r.nodes, double(M - 1) / M, M - 1);            // reduce-scatter
    append_ring_phases(plan.phases, r.rails, 2.0 * (N - 1) / N / M, 2 * (N - 1));  // across nodes
    append_ring_phases(plan.phases, r.nodes, double(M - 1) / M, M - 1);            // all-gather
  } else {
    throw InputError("unknown allreduce algorithm \"" + algorithm + "\" (known: ring, tree, hierarchical)");
  }
  return plan;
}

bool disjoint_links(const std::vector<CollectivePlan>& plans, const std::vector<sg4::Host*>& hosts, bool ignore_slack) {
  std::unordered_map<const sg4::Link*, std::size_t> plan_of;
  std::unordered_map<const sg4::Link*, double> load;  // over plans, their busiest phase's bound on it
  std::vector<const sg4::Link*> shared;
  std::vector<sg4::Link*> route;
  for (std::size_t i = 0; i < plans.size(); ++i) {
    std::unordered_map<const sg4::Link*, double> busiest;
    for (const Phase& phase : plans[i].phases) {
      std::unordered_map<const sg4::Link*, double> phase_load;
      for (const Flow& f : phase.flows) {
        route.clear();
        hosts[static_cast<std::size_t>(f.src)]->route_to(hosts[static_cast<std::size_t>(f.dst)], route, nullptr);
        double bottleneck = std::numeric_limits<double>::infinity();  // the most the flow can move
        for (const sg4::Link* link : route) bottleneck = std::min(bottleneck, link->get_bandwidth());
        for (const sg4::Link* link : route) {
          if (const auto [it, fresh] = plan_of.try_emplace(link, i); !fresh && it->second != i) {
            if (!ignore_slack) return false;
            shared.push_back(link);
          }
          phase_load[link] += bottleneck;
        }
      }
      for (const auto& [link, bound] : phase_load) busiest[link] = std::max(busiest[link], bound);
    }
    for (const auto& [link, bound] : busiest) load[link] += bound;
  }
  for (const sg4::Link* link : shared)
    if (link->get_sharing_policy() != sg4::Link::SharingPolicy::SHARED || load[link] > link->get_bandwidth())
      return false;
  return true;
}

CollectiveRunner::CollectiveRunner(const CollectivePlan& plan, const std::vector<sg4::Host*>& hosts, bool symmetric,
                                   const RouteLatency& latency_of) {
  for (const Phase& phase : plan.phases) {
    plan_flows_ += phase.flows.size();
    std::vector<std::vector<sg4::Link*>> routes(phase.flows.size());
    std::vector<double> route_latency(phase.flows.size(), 0.0);
    for (std::size_t i = 0; i < phase.flows.size(); ++i)
      hosts[static_cast<std::size_t>(phase.flows[i].src)]->route_to(hosts[static_cast<std::size_t>(phase.flows[i].dst)],
                                                                    routes[i], &route_latency[i]);
    if (latency_of)
      for (std::size_t i = 0; i < phase.flows.size(); ++i) route_latency[i] = latency_of(routes[i]);
    const double latency = phase.flows.empty() ? 0.0 : *std::max_element(route_latency.begin(), route_latency.end());
    RunPhase& out = phases_.emplace_back();
    out.plan_flows = phase.flows.size();
    out.extra_latency_s = (phase.hops - 1) * latency;
    std::vector<std::pair<std::size_t, double>> simulated;
    if (symmetric)
      simulated = one_group_per_kind(phase.flows, routes, route_latency);
    else
      for (std::size_t i = 0; i < phase.flows.size(); ++i) simulated.emplace_back(i, 1.0);
    for (const auto& [i, copies] : simulated) {
      const Flow& f = phase.flows[i];
      out.flows.push_back(
          {hosts[static_cast<std::size_t>(f.src)], hosts[static_cast<std::size_t>(f.dst)], f.fraction, copies});
    }
  }
}

std::size_t CollectiveRunner::simulated_flows() const {
  std::size_t n = 0;
  for (const auto& phase : phases_) n += phase.flows.size();
  return n;
}

void CollectiveRunner::run(double bytes) const {
  std::vector<sg4::CommPtr> comms;
  for (const RunPhase& phase : phases_) {
    comms.clear();
    for (const HostFlow& f : phase.flows)
      comms.push_back(
          sg4::Comm::sendto_async(f.src, f.dst, static_cast<std::uint64_t>(std::llround(f.fraction * bytes))));
    sg4::Comm::wait_all(comms);
    if (phase.extra_latency_s > 0) sg4::this_actor::sleep_for(phase.extra_latency_s);
  }
}

}  // namespace ddpsim
