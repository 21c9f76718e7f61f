#include "calib/warmup.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "calib/pooled_levels.hpp"
#include "calib/training_fit.hpp"
#include "common/stats.hpp"

namespace ddpsim {

double far_slower(std::span<const double> settled) {
  return std::max(percentile(settled, 99), 1.5 * percentile(settled, 50));
}

double surface_ms(const Calibration& c, const RankStep& r) {
  if (c.packed)
    return c.forward.model.packed(double(r.real_tokens), double(r.sq_tokens)) +
           c.backward.model.packed(double(r.real_tokens), double(r.sq_tokens));
  if (r.micro.empty())
    return c.forward.model.at(r.batch_size, r.max_len) + c.backward.model.at(r.batch_size, r.max_len);
  double sum = 0;
  for (const auto& mb : r.micro)
    sum += c.forward.model.at(mb.batch_size, mb.max_len) + c.backward.model.at(mb.batch_size, mb.max_len);
  return sum;
}

namespace {

// One process for all ranks where ddptrain played them in turn (--emulate-ranks), else one each.
bool one_process(const Trace& t) {
  const auto said = t.metadata.find("emulated_ranks");
  return said != t.metadata.end() && said->second != "0" && said->second != "1";
}

// A timed rank-step after step 0: its step, compute, surface, and whether it was a first use.
struct Timed {
  int step;
  double measured, surface;
  bool first;
};

// A process's rank-steps after step 0, and what the rule found.
struct ProcessSteps {
  LeadingSteps own;
  std::vector<Timed> timed;
};

// The median extra of a first use over the steady rank-steps' median ratio (0 with fewer than
// five, as the fit's first_use_ms): taken out, so that a step is not warm-up for its first uses.
double first_use_extra(const std::map<std::string, ProcessSteps>& processes) {
  std::vector<double> steady, extra;
  for (const auto& [key, p] : processes)
    for (const Timed& t : p.timed)
      if (!t.first) steady.push_back(t.measured / t.surface);
  if (steady.empty()) return 0;
  const double typical = percentile(steady, 50);
  for (const auto& [key, p] : processes)
    for (const Timed& t : p.timed)
      if (t.first) extra.push_back(t.measured - typical * t.surface);
  return static_cast<long>(extra.size()) < kMinFirstUses ? 0 : std::max(0.0, percentile(extra, 50));
}

// Leaves out the process's leading steps far_slower() than its second half, up to a quarter.
void find_warmup(ProcessSteps& p, double first_use_ms) {
  std::map<int, double> slowest;  // by step: its slowest rank-step's compute over the surface
  for (const Timed& t : p.timed) {
    double& s = slowest[t.step];
    s = std::max(s, (t.measured - (t.first ? first_use_ms : 0)) / t.surface);
  }
  std::vector<double> ratios;
  for (const auto& [step, ratio] : slowest) ratios.push_back(ratio);
  const std::size_t n = ratios.size();
  if (n < static_cast<std::size_t>(kMinWarmupSteps)) return;
  const std::vector<double> second_half(ratios.begin() + static_cast<long>(n / 2), ratios.end());
  const double far = far_slower(second_half), settled = percentile(second_half, 50);
  auto step = slowest.begin();
  for (; p.own.left_out < static_cast<int>(n / 4) && step->second > far; ++step, ++p.own.left_out) {
    p.own.slowest = std::max(p.own.slowest, step->second / settled);
    p.own.first_kept = step->first + 1;
  }
}

}  // namespace

std::vector<RanRankStep> in_run_order(const Trace& t) {
  std::vector<RanRankStep> order;
  for (std::size_t k = 0; k < t.runs.size(); ++k)
    for (const RankStep& r : t.runs[k].rows) order.push_back({static_cast<int>(k), &r, false});
  std::stable_sort(order.begin(), order.end(), [](const RanRankStep& a, const RanRankStep& b) {
    return std::tie(a.row->step, a.run, a.row->rank) < std::tie(b.row->step, b.run, b.row->rank);
  });
  const bool shared = one_process(t);
  std::map<int, std::set<std::pair<int, int>>> met;  // per process
  for (RanRankStep& x : order) {
    auto& seen = met[shared ? 0 : x.row->rank];
    if (x.row->micro.empty()) x.first = seen.emplace(x.row->batch_size, x.row->max_len).second;
    for (const auto& mb : x.row->micro) x.first = seen.emplace(mb.batch_size, mb.max_len).second || x.first;
  }
  return order;
}

std::vector<LeadingSteps> leading_steps(const std::vector<Trace>& training, const Calibration& c, int warmup) {
  std::map<std::string, ProcessSteps> processes;
  std::vector<std::string> order;  // processes as their traces were given
  for (const Trace& t : training) {
    const std::string key = session_key(t.path, t.metadata, t.runs.size() > 1);
    auto [at, fresh] = processes.try_emplace(key);
    if (fresh) order.push_back(key);
    at->second.own.paths.push_back(t.path);
    for (const RanRankStep& x : in_run_order(t)) {
      const RankStep& r = *x.row;
      const double surface = surface_ms(c, r);
      if (r.step < 1 || std::isnan(r.fwd_ms) || std::isnan(r.bwd_ms) || !(surface > 0)) continue;
      at->second.timed.push_back({r.step, r.fwd_ms + r.bwd_ms, surface, x.first});
    }
  }
  const double first_use_ms = first_use_extra(processes);
  std::vector<LeadingSteps> out;
  for (const std::string& key : order) {
    ProcessSteps& p = processes[key];
    if (warmup == AUTO_WARMUP) {
      find_warmup(p, first_use_ms);
    } else if (!p.timed.empty()) {
      const int first = std::min_element(p.timed.begin(), p.timed.end(), [](const Timed& a, const Timed& b) {
                          return a.step < b.step;
                        })->step;
      p.own.first_kept = first + warmup;
      p.own.left_out = warmup;
    }
    out.push_back(p.own);
  }
  return out;
}

int first_kept_step(const std::vector<LeadingSteps>& warmups, const std::string& path) {
  for (const LeadingSteps& w : warmups)
    if (std::find(w.paths.begin(), w.paths.end(), path) != w.paths.end()) return w.first_kept;
  return 1;
}

}  // namespace ddpsim
