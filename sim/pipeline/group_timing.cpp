#include "pipeline/group_timing.hpp"

#include <algorithm>
#include <queue>

#include "pipeline/schedule.hpp"

namespace ddpsim::pipeline {

namespace {

// Written by hand: what it simulates is a handful of private links and S op sequences, where a
// general simulator's cost per event is what the fast mode is there to avoid.
class GroupRun {
 public:
  GroupRun(const PipelineSetup& s, const StepWork& work, int group, const GroupRoutes& routes)
      : s_(s), work_(work), first_(group * s.stages), routes_(routes) {
    const auto S = static_cast<std::size_t>(s.stages), M = static_cast<std::size_t>(s.micro_batches);
    out_.busy_s.assign(S, 0);
    out_.done_s.assign(S, 0);
    out_.joins.resize(S * static_cast<std::size_t>(s.syncs_per_step()));
    gpus_.resize(S);
    for (int st = 0; st < s.stages; ++st) {
      Gpu& gpu = gpus_[static_cast<std::size_t>(st)];
      gpu.ops = stage_ops(s.schedule, s.stages, st, s.micro_batches);
      gpu.arrived[0].assign(M, -1);
      gpu.arrived[1].assign(M, -1);
    }
    links_.resize(2 * S);
  }

  GroupStep run() {
    for (int st = 0; st < s_.stages; ++st) next_pass(st, 0);
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      switch (e.kind) {
        case Kind::pass_end:
          pass_end(e.who, e.time);
          break;
        case Kind::latency_end:
          start_moving(e.who, e.flow, e.time);
          break;
        case Kind::flow_end:
          if (links_[static_cast<std::size_t>(e.who)].version == e.version) flow_end(e.who, e.flow, e.time);
          break;
      }
    }
    const auto syncs = static_cast<std::size_t>(s_.syncs_per_step());
    for (std::size_t st = 0; st < gpus_.size(); ++st)
      std::copy(gpus_[st].joins.begin(), gpus_[st].joins.end(),
                out_.joins.begin() + static_cast<std::ptrdiff_t>(st * syncs));
    return std::move(out_);
  }

 private:
  enum class Kind { pass_end, latency_end, flow_end };
  struct Event {
    double time;
    long seq;  // ties in time go in the order they were scheduled
    Kind kind;
    int who;   // pass_end: the stage; otherwise the link
    int flow;  // the flow, on its link
    long version;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };
  struct Gpu {
    std::vector<Op> ops;
    std::size_t next = 0;
    bool waiting = false;                        // for the next op's input
    std::array<std::vector<double>, 2> arrived;  // [0] activations, [1] gradients, by micro-batch; −1: not yet
    int backwards = 0;
    std::vector<double> joins;
  };
  // A stage's outgoing route of one class: its flows, those past their latency sharing it.
  struct Flow {
    int micro = 0;
    double start = 0, left = 0, bytes = 0;
  };
  struct Link {
    std::vector<Flow> flows;
    std::vector<int> moving;
    double since = 0;  // when `left` was last brought up to date
    long version = 0;  // bumps whenever the moving set changes: older flow_end events are void
  };

  void schedule(double time, Kind kind, int who, int flow = 0, long version = 0) {
    events_.push({time, seq_++, kind, who, flow, version});
  }
  static int link_of(int stage, bool forward) { return 2 * stage + (forward ? 0 : 1); }
  const Route& route_of(int link) const {
    const auto st = static_cast<std::size_t>(link / 2);
    return link % 2 == 0 ? routes_.fwd[st] : routes_.bwd[st];
  }

  // Starts the stage's next pass at `now` if its input is there; otherwise waits for it.
  void next_pass(int st, double now) {
    Gpu& gpu = gpus_[static_cast<std::size_t>(st)];
    if (gpu.next == gpu.ops.size()) {
      out_.done_s[static_cast<std::size_t>(st)] = now;
      return;
    }
    const Op& op = gpu.ops[gpu.next];
    const bool needs = op.forward ? st > 0 : st + 1 < s_.stages;
    if (needs && gpu.arrived[op.forward ? 0 : 1][static_cast<std::size_t>(op.micro)] < 0) {
      gpu.waiting = true;
      return;
    }
    gpu.waiting = false;
    const GpuWork& w = work_[static_cast<std::size_t>(first_ + st)];
    const auto m = static_cast<std::size_t>(op.micro);
    schedule(now + (op.forward ? w.fwd_s[m] : w.bwd_s[m]), Kind::pass_end, st);
  }

  void pass_end(int st, double now) {
    Gpu& gpu = gpus_[static_cast<std::size_t>(st)];
    const Op op = gpu.ops[gpu.next++];
    const GpuWork& w = work_[static_cast<std::size_t>(first_ + st)];
    const auto m = static_cast<std::size_t>(op.micro);
    out_.busy_s[static_cast<std::size_t>(st)] += op.forward ? w.fwd_s[m] : w.bwd_s[m];
    if (op.forward && st + 1 < s_.stages) send(link_of(st, true), op.micro, w.act_bytes[m], now);
    if (!op.forward) {
      if (st > 0) send(link_of(st, false), op.micro, w.act_bytes[m], now);
      const int every = s_.sync_every > 0 ? s_.sync_every : s_.micro_batches;
      ++gpu.backwards;
      if (s_.syncs_per_step() > 0 && (gpu.backwards % every == 0 || gpu.backwards == s_.micro_batches))
        gpu.joins.push_back(now);
    }
    next_pass(st, now);
  }

  void send(int link, int micro, double bytes, double now) {
    Link& l = links_[static_cast<std::size_t>(link)];
    l.flows.push_back({micro, now, bytes, bytes});
    const int flow = static_cast<int>(l.flows.size()) - 1;
    const double latency = route_of(link).latency_s;
    if (latency > 0)
      schedule(now + latency, Kind::latency_end, link, flow);
    else
      start_moving(link, flow, now);
  }

  // The moving flows' bytes left, brought to `now` at the share that held since.
  void catch_up(Link& l, const Route& r, double now) {
    if (!l.moving.empty()) {
      const double rate = r.bytes_per_s / static_cast<double>(l.moving.size());
      for (const int f : l.moving) l.flows[static_cast<std::size_t>(f)].left -= rate * (now - l.since);
    }
    l.since = now;
  }

  // The next flow to end on the link, at the share that holds from `now`.
  void reschedule(int link, double now) {
    Link& l = links_[static_cast<std::size_t>(link)];
    ++l.version;
    if (l.moving.empty()) return;
    const double rate = route_of(link).bytes_per_s / static_cast<double>(l.moving.size());
    int first = l.moving.front();
    for (const int f : l.moving)
      if (l.flows[static_cast<std::size_t>(f)].left < l.flows[static_cast<std::size_t>(first)].left) first = f;
    const double left = std::max(0.0, l.flows[static_cast<std::size_t>(first)].left);
    schedule(now + left / rate, Kind::flow_end, link, first, l.version);
  }

  void start_moving(int link, int flow, double now) {
    Link& l = links_[static_cast<std::size_t>(link)];
    catch_up(l, route_of(link), now);
    l.moving.push_back(flow);
    reschedule(link, now);
  }

  void flow_end(int link, int flow, double now) {
    Link& l = links_[static_cast<std::size_t>(link)];
    catch_up(l, route_of(link), now);
    l.moving.erase(std::find(l.moving.begin(), l.moving.end(), flow));
    reschedule(link, now);
    const Flow& f = l.flows[static_cast<std::size_t>(flow)];
    const bool forward = link % 2 == 0;
    FlowStats& stats = out_.flows[static_cast<std::size_t>(forward ? FlowClass::fwd_prop : FlowClass::bwd_prop)];
    stats.bytes += f.bytes;
    stats.transfers += 1;
    stats.transfer_s += now - f.start;
    const int to = link / 2 + (forward ? 1 : -1);
    Gpu& receiver = gpus_[static_cast<std::size_t>(to)];
    receiver.arrived[forward ? 0 : 1][static_cast<std::size_t>(f.micro)] = now;
    if (receiver.waiting) next_pass(to, now);
  }

  const PipelineSetup& s_;
  const StepWork& work_;
  const int first_;  // the group's first GPU
  const GroupRoutes& routes_;
  std::vector<Gpu> gpus_;
  std::vector<Link> links_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  long seq_ = 0;
  GroupStep out_;
};

}  // namespace

GroupStep time_group(const PipelineSetup& s, const StepWork& work, int group, const GroupRoutes& routes) {
  return GroupRun(s, work, group, routes).run();
}

}  // namespace ddpsim::pipeline
