#include "pipeline/network.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <unordered_set>

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u.hpp>

#include "common/error.hpp"

namespace sg4 = simgrid::s4u;

namespace ddpsim::pipeline {

namespace {

constexpr const char* TAG = "tag.";
// Tag latencies are K · (largest weight / weight): large beside physical latencies (µs), so
// that shares follow the weights to ~1e-6 relative, and small enough that the solver, which
// drops a flow's share 1 / latency under 1e-5, keeps every one (weights within
// MAX_WEIGHT_RATIO: at most 1e4 s). The exclusive class's K / 10⁶ = 10 µs is as small as
// physical latencies: it gets 10⁵ to 10⁶ times the others' share.
constexpr double TAG_K = 10;
constexpr double EXCLUSIVE_WEIGHT = 1e6;  // × the largest other weight
// A delay of exactly 0 would make CM02 give the flow the default penalty (1) instead of its
// own; with zero physical latency, weighted flows pay this instead.
constexpr double MIN_DELAY_S = 1e-12;

bool is_tag(const sg4::Link* link) {
  return std::string_view(link->get_cname()).starts_with(TAG);
}

// The physical links of one channel: every class's in `shared` mode, one class's in `separate`.
struct Channel {
  std::vector<sg4::Link*> out, in, nic_out, nic_in, leaf_up, leaf_down;  // by GPU, or by leaf
  sg4::Link* host = nullptr;
};

Channel build_channel(sg4::NetZone* zone, const ChannelConfig& config, int gpus, const std::string& suffix) {
  const Fabric& fabric = config.fabric;
  const bool inbound = config.model == "shared" && config.receiver_limit;
  auto make = [&](const std::string& name, double bytes_per_s, double latency_s) {
    return zone->create_link(name + suffix, bytes_per_s)->set_latency(latency_s)->seal();
  };
  Channel links;
  const bool nics = fabric.nodes() > 1;
  for (int g = 0; g < gpus; ++g) {
    const std::string gpu = "gpu" + std::to_string(g);
    links.out.push_back(make(gpu + ".out", config.bytes_per_s, config.latency_s));
    if (inbound) links.in.push_back(make(gpu + ".in", config.bytes_per_s, config.latency_s));
    if (nics) {
      links.nic_out.push_back(make(gpu + ".nic.out", fabric.nic_bytes_per_s, fabric.nic_latency_s));
      if (inbound) links.nic_in.push_back(make(gpu + ".nic.in", fabric.nic_bytes_per_s, fabric.nic_latency_s));
    }
  }
  if (fabric.host_bytes_per_s > 0) links.host = make("root-complex", fabric.host_bytes_per_s, 0);
  if (fabric.has_leaf_links())
    for (int l = 0; l < fabric.leaves(); ++l) {
      const std::string id = "leaf" + std::to_string(l);
      links.leaf_up.push_back(make(id + ".up", fabric.leaf_bytes_per_s, fabric.nic_latency_s));
      links.leaf_down.push_back(make(id + ".down", fabric.leaf_bytes_per_s, fabric.nic_latency_s));
    }
  return links;
}

// Where a network's endpoints and routes go: one Full zone, or (`leaves` > 0) a zone per leaf
// switch under it. A Full zone holds a route slot for every pair of its points: 16,384 GPUs'
// sync endpoints in one took 2 GiB. Routes stay link for link the flat zone's: across leaves,
// the sender's part to its leaf's gateway, the leaves' links between the zones, the receiver's
// part from its gateway (SimGrid refuses an empty one: an ingress link per GPU that never
// binds stands in where the receiver has no NIC link of its own).
class Zones {
 public:
  Zones(sg4::NetZone* root, std::size_t leaves, int gpus, bool need_ingress) : root_(root) {
    for (int g = 0; g < gpus && leaves > 0 && need_ingress; ++g)
      ingress_.push_back(root->create_link("gpu" + std::to_string(g) + ".ingress", 1e30)->set_latency(0)->seal());
    for (std::size_t l = 0; l < leaves; ++l) {
      leaves_.push_back(sg4::create_full_zone("leaf" + std::to_string(l))->set_parent(root));
      gateways_.push_back(leaves_.back()->create_router("leaf" + std::to_string(l) + ".gateway"));
    }
  }
  sg4::NetZone* of(int leaf) const { return leaves_.empty() ? root_ : leaves_[static_cast<std::size_t>(leaf)]; }

  // A route from `src` (under leaf `src_leaf`) to GPU `d`'s `dst` (under `dst_leaf`).
  void add_route(sg4::Host* src, int src_leaf, sg4::Host* dst, std::size_t d, int dst_leaf,
                 std::vector<sg4::LinkInRoute> out, const std::vector<sg4::LinkInRoute>& across,
                 const std::vector<sg4::LinkInRoute>& in) {
    if (leaves_.empty() || src_leaf == dst_leaf) {
      out.insert(out.end(), across.begin(), across.end());
      out.insert(out.end(), in.begin(), in.end());
      of(src_leaf)->add_route(src->get_netpoint(), dst->get_netpoint(), nullptr, nullptr, out, false);
      return;
    }
    const auto ls = static_cast<std::size_t>(src_leaf), ld = static_cast<std::size_t>(dst_leaf);
    if (to_gateway_.insert(src).second)
      leaves_[ls]->add_route(src->get_netpoint(), gateways_[ls], nullptr, nullptr, out, false);
    if (from_gateway_.insert(dst).second) {
      std::vector<sg4::LinkInRoute> last = in;
      if (last.empty()) last.emplace_back(ingress_[d]);
      leaves_[ld]->add_route(gateways_[ld], dst->get_netpoint(), nullptr, nullptr, last, false);
    }
    if (between_.insert({ls, ld}).second)
      root_->add_route(leaves_[ls]->get_netpoint(), leaves_[ld]->get_netpoint(), gateways_[ls], gateways_[ld], across,
                       false);
  }

  void seal() {
    for (auto* zone : leaves_) zone->seal();
    root_->seal();
  }

 private:
  sg4::NetZone* root_;
  std::vector<sg4::NetZone*> leaves_;
  std::vector<simgrid::kernel::routing::NetPoint*> gateways_;
  std::vector<sg4::Link*> ingress_;
  std::set<const sg4::Host*> to_gateway_, from_gateway_;
  std::set<std::pair<std::size_t, std::size_t>> between_;
};

// Each class's weight relative to the largest (the exclusive class's, EXCLUSIVE_WEIGHT), and
// whether they differ (then shared links split by weight).
std::array<double, FLOW_CLASSES> relative_weights(const ChannelConfig& config) {
  std::array<double, FLOW_CLASSES> weight = config.weights;
  double largest = 0;
  for (int c = 0; c < FLOW_CLASSES; ++c)
    if (c != config.exclusive) largest = std::max(largest, weight[static_cast<std::size_t>(c)]);
  for (int c = 0; c < FLOW_CLASSES; ++c)
    weight[static_cast<std::size_t>(c)] =
        c == config.exclusive ? EXCLUSIVE_WEIGHT : weight[static_cast<std::size_t>(c)] / largest;
  return weight;
}

}  // namespace

int Fabric::nodes() const {
  int count = 1;
  for (const int n : node) count = std::max(count, n + 1);
  return count;
}

int Fabric::leaves() const {
  return nodes_per_leaf > 0 ? (nodes() - 1) / nodes_per_leaf + 1 : 1;
}

const std::array<std::string, FLOW_CLASSES>& flow_class_names() {
  static const std::array<std::string, FLOW_CLASSES> names = {"fwd_prop", "bwd_prop", "grad_sync"};
  return names;
}

Network::Network(const ChannelConfig& config, int gpus, const std::vector<std::array<int, 3>>& pairs,
                 const std::array<bool, FLOW_CLASSES>& built)
    : config_(config), first_built_(static_cast<int>(std::find(built.begin(), built.end(), true) - built.begin())) {
  auto* zone = sg4::create_full_zone("pipeline");
  const bool shared = config.model == "shared";
  const std::array<double, FLOW_CLASSES> weight = relative_weights(config);
  const bool weighted =
      shared && std::adjacent_find(weight.begin(), weight.end(), std::not_equal_to<>()) != weight.end();
  const Fabric& fabric = config.fabric;
  // The links first: SimGrid checks a new link's name in every zone below.
  std::vector<Channel> channels;
  for (std::size_t ch = 0; ch < (shared ? 1 : FLOW_CLASSES); ++ch)
    channels.push_back(shared || built[ch]
                           ? build_channel(zone, config, gpus, shared ? "" : "." + flow_class_names()[ch])
                           : Channel{});
  std::vector<std::array<sg4::Link*, FLOW_CLASSES>> tags(static_cast<std::size_t>(gpus));
  for (int g = 0; g < gpus && weighted; ++g)
    for (int c = 0; c < FLOW_CLASSES; ++c)
      if (built[static_cast<std::size_t>(c)])
        tags[static_cast<std::size_t>(g)][static_cast<std::size_t>(c)] =
            zone->create_link(TAG + ("gpu" + std::to_string(g)) + "." + flow_class_names()[static_cast<std::size_t>(c)],
                              1e30)
                ->set_latency(TAG_K / weight[static_cast<std::size_t>(c)])
                ->seal();
  // One class's endpoints under leaf switches: a zone per leaf, as the DDP engine's cluster.
  const Channel& first = channels[shared ? 0 : static_cast<std::size_t>(first_built_)];
  const bool zoned = std::count(built.begin(), built.end(), true) == 1 && !first.leaf_up.empty();
  Zones zones(zone, zoned ? first.leaf_up.size() : 0, gpus, first.nic_in.empty());
  for (int g = 0; g < gpus; ++g) {
    auto& ends = endpoint_.emplace_back();
    for (int c = 0; c < FLOW_CLASSES; ++c)
      if (built[static_cast<std::size_t>(c)])
        ends[static_cast<std::size_t>(c)] =
            zones.of(fabric.leaf_of(g))
                ->create_host("gpu" + std::to_string(g) + "." + flow_class_names()[static_cast<std::size_t>(c)], 1e9);
  }
  for (const auto& [src, dst, c] : pairs) {
    if (!routes_.insert({src, dst, c}).second) continue;
    const Channel& links = channels[shared ? 0 : static_cast<std::size_t>(c)];
    const auto s = static_cast<std::size_t>(src), d = static_cast<std::size_t>(dst);
    std::vector<sg4::LinkInRoute> out, across, in;  // from the sender, between leaves, to the receiver
    if (weighted) out.emplace_back(tags[s][static_cast<std::size_t>(c)]);
    if (fabric.node_of(src) == fabric.node_of(dst)) {
      out.emplace_back(links.out[s]);
      if (links.host) out.emplace_back(links.host);
      if (!links.in.empty()) out.emplace_back(links.in[d]);  // the receiver limit
    } else {
      out.emplace_back(links.nic_out[s]);
      if (!links.leaf_up.empty() && fabric.leaf_of(src) != fabric.leaf_of(dst)) {
        across.emplace_back(links.leaf_up[static_cast<std::size_t>(fabric.leaf_of(src))]);
        across.emplace_back(links.leaf_down[static_cast<std::size_t>(fabric.leaf_of(dst))]);
      }
      if (!links.nic_in.empty()) in.emplace_back(links.nic_in[d]);
    }
    zones.add_route(endpoint_[s][static_cast<std::size_t>(c)], fabric.leaf_of(src),
                    endpoint_[d][static_cast<std::size_t>(c)], d, fabric.leaf_of(dst), out, across, in);
  }
  zones.seal();
  if (weighted)
    zone->get_network_model()->set_lat_factor_cb([](double, const sg4::Host*, const sg4::Host*,
                                                    const std::vector<sg4::Link*>& route,
                                                    const std::unordered_set<sg4::NetZone*>&) {
      double all = 0;
      for (const auto* l : route) all += l->get_latency();
      return all > 0 ? std::max(physical_latency(route), MIN_DELAY_S) / all : 1.0;
    });
}

sg4::Host* Network::host(int gpu) const {
  return endpoint_[static_cast<std::size_t>(gpu)][static_cast<std::size_t>(first_built_)];
}

double Network::physical_latency(const std::vector<sg4::Link*>& route) {
  double latency = 0;
  for (const auto* link : route)
    if (!is_tag(link)) latency += link->get_latency();
  return latency;
}

std::vector<sg4::Host*> Network::hosts(FlowClass flow_class) const {
  std::vector<sg4::Host*> out;
  for (const auto& ends : endpoint_) out.push_back(ends[static_cast<std::size_t>(flow_class)]);
  return out;
}

void Network::collective(const CollectiveRunner& runner, FlowClass flow_class, double bytes,
                         std::vector<double>& phase_end) {
  const int c = static_cast<int>(flow_class);
  FlowStats& s = stats_[static_cast<std::size_t>(c)];
  phase_end.clear();
  std::vector<sg4::CommPtr> comms;
  std::vector<std::list<Active>::iterator> mine;
  for (const auto& phase : runner.phases()) {
    const double start = sg4::Engine::get_clock();
    if (recording_) sample();
    comms.clear();
    mine.clear();
    for (const auto& f : phase.flows) {
      const double flow_bytes = std::round(f.fraction * bytes);
      comms.push_back(sg4::Comm::sendto_init(f.src, f.dst)->set_payload_size(static_cast<uint64_t>(flow_bytes)));
      mine.push_back(active_.insert(active_.end(), {comms.back(), c, flow_bytes, f.copies}));
      comms.back()->start();
    }
    auto arrived = [&](std::size_t i) {
      s.bytes += mine[i]->bytes * mine[i]->copies;
      active_.erase(mine[i]);
    };
    // Recording samples every flow's end (the shares change there); otherwise waiting for all
    // at once spares the search for each one that ended.
    if (recording_) {
      std::vector<sg4::CommPtr> left = comms;
      while (!left.empty()) {
        const auto done = static_cast<std::size_t>(sg4::Comm::wait_any(left));
        arrived(static_cast<std::size_t>(std::find(comms.begin(), comms.end(), left[done]) - comms.begin()));
        left.erase(left.begin() + static_cast<std::ptrdiff_t>(done));
        sample();
      }
    } else {
      sg4::Comm::wait_all(comms);
      for (std::size_t i = 0; i < comms.size(); ++i) arrived(i);
    }
    if (phase.extra_latency_s > 0) sg4::this_actor::sleep_for(phase.extra_latency_s);
    const double end = sg4::Engine::get_clock();
    s.transfers += static_cast<long>(phase.plan_flows);
    s.transfer_s += static_cast<double>(phase.plan_flows) * (end - start);
    phase_end.push_back(end);
  }
}

sg4::CommPtr Network::flow(int src, int dst, int flow_class, double bytes) const {
  if (!routes_.count({src, dst, flow_class}))
    throw std::logic_error("pipeline network: no route for flow " + std::to_string(src) + "→" + std::to_string(dst));
  return sg4::Comm::sendto_init(endpoint_[static_cast<std::size_t>(src)][static_cast<std::size_t>(flow_class)],
                                endpoint_[static_cast<std::size_t>(dst)][static_cast<std::size_t>(flow_class)])
      ->set_payload_size(static_cast<uint64_t>(bytes));
}

sg4::CommPtr Network::start(int src, int dst, FlowClass flow_class, double bytes) {
  auto comm = flow(src, dst, static_cast<int>(flow_class), bytes);
  comm->start();
  return comm;
}

void Network::arrived(const sg4::Comm& comm, FlowClass flow_class, double bytes) {
  FlowStats& s = stats_[static_cast<std::size_t>(flow_class)];
  s.bytes += bytes;
  s.transfers += 1;
  s.transfer_s += comm.get_finish_time() - comm.get_start_time();
}

void Network::transfer(int src, int dst, FlowClass flow_class, double bytes) {
  const int c = static_cast<int>(flow_class);
  const double start = sg4::Engine::get_clock();
  auto comm = flow(src, dst, c, bytes);
  if (recording_) sample();  // the rates until now, before this flow changes them
  auto me = active_.insert(active_.end(), {comm, c, bytes});
  comm->start();
  comm->wait();
  active_.erase(me);
  FlowStats& s = stats_[static_cast<std::size_t>(c)];
  s.bytes += bytes;
  if (recording_) sample();
  s.transfers += 1;
  s.transfer_s += sg4::Engine::get_clock() - start;
}

void Network::record(bool on) {
  recording_ = on;
  sample();
}

void Network::sample() {
  Sample& out = samples_.emplace_back();
  out.time_s = sg4::Engine::get_clock();
  for (int c = 0; c < FLOW_CLASSES; ++c)
    out.moved[static_cast<std::size_t>(c)] = stats_[static_cast<std::size_t>(c)].bytes;
  for (const Active& flow : active_)
    out.moved[static_cast<std::size_t>(flow.flow_class)] += flow.bytes - flow.comm->get_remaining();
}

}  // namespace ddpsim::pipeline
