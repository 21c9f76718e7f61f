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
// Tag latencies are K / weight: large beside any physical latency, so that the shares follow
// the weights to ~1e-9 relative.
constexpr double TAG_K = 1e4;
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
  const bool weighted = shared && std::adjacent_find(config.weights.begin(), config.weights.end(),
                                                     std::not_equal_to<>()) != config.weights.end();
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
                ->set_latency(TAG_K / config.weights[static_cast<std::size_t>(c)])
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
    if (route_links_.emplace(std::array{src, dst, c}, physical).second)
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

bool Network::held_back(const Active& flow) const {
  if (config_.exclusive < 0 || flow.flow_class == config_.exclusive) return false;
  for (const Active& other : active_)
    if (other.flow_class == config_.exclusive)
      for (int l : other.links)
        if (std::find(flow.links.begin(), flow.links.end(), l) != flow.links.end()) return true;
  return false;
}

void Network::transfer(int src, int dst, FlowClass flow_class, double bytes) {
  const int c = static_cast<int>(flow_class);
  const auto route = route_links_.find(std::array{src, dst, c});
  if (route == route_links_.end())
    throw std::logic_error("pipeline network: no route for flow " + std::to_string(src) + "→" + std::to_string(dst));
  const double start = sg4::Engine::get_clock();
  auto comm = sg4::Comm::sendto_init(endpoint_[static_cast<std::size_t>(src)][static_cast<std::size_t>(c)],
                                     endpoint_[static_cast<std::size_t>(dst)][static_cast<std::size_t>(c)])
                  ->set_payload_size(static_cast<uint64_t>(bytes));
  auto me = active_.insert(active_.end(), {comm, c, route->second, false});
  comm->start();
  if (config_.exclusive >= 0) {
    if (c == config_.exclusive) {
      for (Active& other : active_)
        if (!other.suspended && held_back(other)) {
          other.comm->suspend();
          other.suspended = true;
        }
    } else if (held_back(*me)) {
      comm->suspend();
      me->suspended = true;
    }
  }
  comm->wait();
  active_.erase(me);
  if (c == config_.exclusive)
    for (Active& other : active_)
      if (other.suspended && !held_back(other)) {
        other.comm->resume();
        other.suspended = false;
      }
  FlowStats& s = stats_[static_cast<std::size_t>(c)];
  s.bytes += bytes;
  s.transfers += 1;
  s.transfer_s += sg4::Engine::get_clock() - start;
}

}  // namespace ddpsim::pipeline
