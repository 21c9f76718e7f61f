#include "engine/collective.hpp"

#include <algorithm>
#include <cmath>
#include <set>

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

}  // namespace

CollectivePlan make_allreduce(const std::string& algorithm, const std::vector<int>& node_of_rank) {
  const int G = static_cast<int>(node_of_rank.size());
  CollectivePlan plan{algorithm, {}};
  if (algorithm == "ring") {
    std::vector<int> all(static_cast<std::size_t>(G));
    for (int g = 0; g < G; ++g) all[static_cast<std::size_t>(g)] = g;
    append_ring_phases(plan.phases, {all}, 2.0 * (G - 1) / G, 2 * (G - 1));
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
    std::vector<std::vector<int>> nodes;
    for (int g = 0; g < G; ++g) {
      const int n = node_of_rank[static_cast<std::size_t>(g)];
      if (n == static_cast<int>(nodes.size())) nodes.emplace_back();
      if (n != static_cast<int>(nodes.size()) - 1)
        throw InputError("hierarchical allreduce: the ranks of a node must be consecutive (rank " + std::to_string(g) +
                         ")");
      nodes.back().push_back(g);
    }
    const int M = static_cast<int>(nodes.front().size());
    for (const auto& n : nodes)
      if (static_cast<int>(n.size()) != M)
        throw InputError("hierarchical allreduce: every node needs the same number of GPUs");
    const int N = static_cast<int>(nodes.size());
    std::vector<std::vector<int>> rails(static_cast<std::size_t>(M));
    for (const auto& n : nodes)
      for (int i = 0; i < M; ++i) rails[static_cast<std::size_t>(i)].push_back(n[static_cast<std::size_t>(i)]);
    append_ring_phases(plan.phases, nodes, double(M - 1) / M, M - 1);            // reduce-scatter
    append_ring_phases(plan.phases, rails, 2.0 * (N - 1) / N / M, 2 * (N - 1));  // across nodes
    append_ring_phases(plan.phases, nodes, double(M - 1) / M, M - 1);            // all-gather
  } else {
    throw InputError("unknown allreduce algorithm \"" + algorithm + "\" (known: ring, tree, hierarchical)");
  }
  return plan;
}

CollectiveRunner::CollectiveRunner(const CollectivePlan& plan, const std::vector<sg4::Host*>& hosts) {
  const std::size_t G = hosts.size();
  ranks_.assign(G, std::vector<RankPhase>(plan.phases.size()));
  phase_done_ = sg4::Barrier::create(static_cast<unsigned>(G));
  for (std::size_t p = 0; p < plan.phases.size(); ++p) {
    const Phase& phase = plan.phases[p];
    auto& flows = flows_.emplace_back();
    double latency = 0;
    for (std::size_t g = 0; g < G; ++g)
      ranks_[g][p].inbox = sg4::Mailbox::by_name("allreduce/phase" + std::to_string(p) + "/rank" + std::to_string(g));
    for (const Flow& f : phase.flows) {
      const auto src = static_cast<std::size_t>(f.src), dst = static_cast<std::size_t>(f.dst);
      ranks_[src][p].sends.emplace_back(ranks_[dst][p].inbox, f.fraction);
      ranks_[dst][p].receives++;
      flows.push_back({hosts[src], hosts[dst], f.fraction});
      std::vector<sg4::Link*> links;
      double route_latency = 0;
      hosts[src]->route_to(hosts[dst], links, &route_latency);
      latency = std::max(latency, route_latency);
    }
    for (std::size_t g = 0; g < G; ++g) ranks_[g][p].extra_latency_s = (phase.hops - 1) * latency;
  }
}

void CollectiveRunner::run(int g, double bytes) const {
  static int token = 0;  // payloads are never read: only their simulated size matters
  std::vector<sg4::CommPtr> comms;
  std::vector<int*> received;
  for (const RankPhase& phase : ranks_[static_cast<std::size_t>(g)]) {
    comms.clear();
    received.assign(static_cast<std::size_t>(phase.receives), nullptr);
    for (const auto& [inbox, fraction] : phase.sends)
      comms.push_back(inbox->put_async(&token, static_cast<std::uint64_t>(std::llround(fraction * bytes))));
    for (int*& slot : received) comms.push_back(phase.inbox->get_async<int>(&slot));
    sg4::Comm::wait_all(comms);
    phase_done_->wait();
    if (phase.extra_latency_s > 0) sg4::this_actor::sleep_for(phase.extra_latency_s);
  }
}

void CollectiveRunner::run_all(double bytes) const {
  std::vector<sg4::CommPtr> comms;
  for (std::size_t p = 0; p < flows_.size(); ++p) {
    comms.clear();
    for (const HostFlow& f : flows_[p])
      comms.push_back(
          sg4::Comm::sendto_async(f.src, f.dst, static_cast<std::uint64_t>(std::llround(f.fraction * bytes))));
    sg4::Comm::wait_all(comms);
    if (const double extra = ranks_.front()[p].extra_latency_s; extra > 0) sg4::this_actor::sleep_for(extra);
  }
}

}  // namespace ddpsim
