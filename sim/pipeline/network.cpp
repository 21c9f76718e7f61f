#include "pipeline/network.hpp"

#include <algorithm>
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

}  // namespace

const std::array<std::string, FLOW_CLASSES>& flow_class_names() {
  static const std::array<std::string, FLOW_CLASSES> names = {"fwd_prop", "bwd_prop", "grad_sync"};
  return names;
}

Network::Network(const ChannelConfig& config, int gpus, const std::vector<std::array<int, 3>>& pairs)
    : config_(config) {
  auto* zone = sg4::create_full_zone("pipeline");
  const bool shared = config.model == "shared";
  std::array<double, FLOW_CLASSES> weight = config.weights;  // relative to the largest
  double largest = 0;
  for (int c = 0; c < FLOW_CLASSES; ++c)
    if (c != config.exclusive) largest = std::max(largest, weight[static_cast<std::size_t>(c)]);
  for (int c = 0; c < FLOW_CLASSES; ++c)
    weight[static_cast<std::size_t>(c)] =
        c == config.exclusive ? EXCLUSIVE_WEIGHT : weight[static_cast<std::size_t>(c)] / largest;
  const bool weighted =
      shared && std::adjacent_find(weight.begin(), weight.end(), std::not_equal_to<>()) != weight.end();
  std::vector<sg4::Link*> links;  // physical, by index
  std::vector<std::array<sg4::Link*, FLOW_CLASSES>> tags(static_cast<std::size_t>(gpus));
  auto link = [&](const std::string& name) {
    links.push_back(zone->create_link(name, config.bytes_per_s)->set_latency(config.latency_s)->seal());
  };
  for (int g = 0; g < gpus; ++g) {
    const std::string gpu = "gpu" + std::to_string(g);
    auto& ends = endpoint_.emplace_back();
    for (int c = 0; c < FLOW_CLASSES; ++c) {
      const std::string& name = flow_class_names()[static_cast<std::size_t>(c)];
      ends[static_cast<std::size_t>(c)] = zone->create_host(gpu + "." + name, 1e9);
      if (!shared) link(gpu + ".out." + name);  // index g·3 + c
      if (weighted)
        tags[static_cast<std::size_t>(g)][static_cast<std::size_t>(c)] =
            zone->create_link(TAG + gpu + "." + name, 1e30)
                ->set_latency(TAG_K / weight[static_cast<std::size_t>(c)])
                ->seal();
    }
  }
  if (shared) {
    for (int g = 0; g < gpus; ++g) link("gpu" + std::to_string(g) + ".out");  // index g
    if (config.receiver_limit)
      for (int g = 0; g < gpus; ++g) link("gpu" + std::to_string(g) + ".in");  // index gpus + g
  }
  for (const auto& [src, dst, c] : pairs) {
    std::vector<int> physical;
    if (!shared) {
      physical = {src * FLOW_CLASSES + c};
    } else {
      physical = {src};
      if (config.receiver_limit) physical.push_back(gpus + dst);
    }
    std::vector<sg4::LinkInRoute> route;
    if (weighted) route.emplace_back(tags[static_cast<std::size_t>(src)][static_cast<std::size_t>(c)]);
    for (int l : physical) route.emplace_back(links[static_cast<std::size_t>(l)]);
    if (routes_.insert({src, dst, c}).second)
      zone->add_route(endpoint_[static_cast<std::size_t>(src)][static_cast<std::size_t>(c)]->get_netpoint(),
                      endpoint_[static_cast<std::size_t>(dst)][static_cast<std::size_t>(c)]->get_netpoint(), nullptr,
                      nullptr, route, false);
  }
  zone->seal();
  if (weighted)
    zone->get_network_model()->set_lat_factor_cb([](double, const sg4::Host*, const sg4::Host*,
                                                    const std::vector<sg4::Link*>& route,
                                                    const std::unordered_set<sg4::NetZone*>&) {
      double physical = 0, all = 0;
      for (const auto* l : route) {
        all += l->get_latency();
        if (!is_tag(l)) physical += l->get_latency();
      }
      return all > 0 ? std::max(physical, MIN_DELAY_S) / all : 1.0;
    });
}

sg4::Host* Network::host(int gpu) const {
  return endpoint_[static_cast<std::size_t>(gpu)][0];
}

void Network::transfer(int src, int dst, FlowClass flow_class, double bytes) {
  const int c = static_cast<int>(flow_class);
  if (!routes_.count({src, dst, c}))
    throw std::logic_error("pipeline network: no route for flow " + std::to_string(src) + "→" + std::to_string(dst));
  const double start = sg4::Engine::get_clock();
  auto comm = sg4::Comm::sendto_init(endpoint_[static_cast<std::size_t>(src)][static_cast<std::size_t>(c)],
                                     endpoint_[static_cast<std::size_t>(dst)][static_cast<std::size_t>(c)])
                  ->set_payload_size(static_cast<uint64_t>(bytes));
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
