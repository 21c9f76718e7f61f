#include "eval/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/rng.hpp"

namespace ddpsim {

std::vector<Bucket> config_buckets(const Config& config) {
  constexpr double MiB = 1024.0 * 1024.0;
  return make_buckets(*config.model, config.training.bucket_mb * MiB, config.training.first_bucket_mb * MiB);
}

// Activations live for one micro-batch, so the step's peak is its largest micro-batch's.
double peak_mem_mib(const PerfModel& m, const RankStep& r, bool packed) {
  if (r.micro.empty())
    return packed ? m.packed_mem_mib(double(r.real_tokens), double(r.sq_tokens))
                  : m.peak_mem_mib(r.batch_size, r.max_len);
  double peak = 0;
  for (const MicroBatchShape& mb : r.micro)
    peak = std::max(peak, packed ? m.packed_mem_mib(double(mb.real_tokens), double(mb.sq_tokens))
                                 : m.peak_mem_mib(mb.batch_size, mb.max_len));
  return peak;
}

PolicyWork charge_compute(const Config& config, const PolicyRun& run) {
  const PerfModel& m = *config.model;
  const double sigma = config.simulation.noise_sigma < 0 ? m.noise_sigma : config.simulation.noise_sigma;
  Rng noise(config.training.seed ^ 0x9e3779b97f4a7c15ULL);
  PolicyWork pw;
  pw.steps = run.G ? static_cast<int>(run.rows.size()) / run.G : 0;
  pw.synchronized = run.label.rfind("static", 0) != 0;
  pw.work.reserve(run.rows.size());
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    const RankStep& r = run.rows[i];
    const std::size_t step_index = i / static_cast<std::size_t>(std::max(run.G, 1));
    // Mean-one log-normal factor: E[exp(σz − σ²/2)] = 1, so noise leaves mean compute as modelled.
    const double z = noise.normal();
    const double factor = std::exp(sigma * z - 0.5 * sigma * sigma) * config.simulation.speed_factor(r.rank, r.step);
    // Forward and backward of one micro-batch: padded to its longest sample, or packed.
    auto phases = [&](int b, int L, std::int64_t tokens, std::int64_t pairs) {
      if (run.packed)
        return std::pair(m.fwd_packed_ms(double(tokens), double(pairs)) * factor,
                         m.bwd_packed_ms(double(tokens), double(pairs)) * factor);
      return std::pair(m.fwd_ms(b, L) * factor, m.bwd_ms(b, L) * factor);
    };
    RankWork w;
    if (r.micro.empty()) {
      std::tie(w.fwd_ms, w.bwd_ms) = phases(r.batch_size, r.max_len, r.real_tokens, r.sq_tokens);
    } else {
      for (std::size_t k = 0; k + 1 < r.micro.size(); ++k) {
        const MicroBatchShape& mb = r.micro[k];
        const auto [fwd, bwd] = phases(mb.batch_size, mb.max_len, mb.real_tokens, mb.sq_tokens);
        w.accum_fwd_ms += fwd;
        w.accum_bwd_ms += bwd;
      }
      const MicroBatchShape& last = r.micro.back();
      std::tie(w.fwd_ms, w.bwd_ms) = phases(last.batch_size, last.max_len, last.real_tokens, last.sq_tokens);
    }
    w.opt_ms = m.optimizer_ms * factor;
    w.sched_ms = config.simulation.sched_measured && step_index < run.decision_us.size()
                     ? run.decision_us[step_index] * 1e-3
                     : config.simulation.sched_ms;
    pw.work.push_back(w);
  }
  return pw;
}

SimulationRun simulate(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline,
                       const std::function<void(long, long)>& progress) {
  std::vector<PolicyRun> runs;
  for (const auto& spec : config.policies)
    runs.push_back(run_policy(spec, config.shape(), config.training.steps, dataset));
  return simulate_runs(config, std::move(runs), timeline, progress);
}

SimulationRun simulate_runs(const Config& config, std::vector<PolicyRun> runs, std::pair<int, int> timeline,
                            const std::function<void(long, long)>& progress) {
  SimulationRun sim;
  sim.runs = std::move(runs);
  std::vector<PolicyWork> work;
  for (const auto& run : sim.runs) work.push_back(charge_compute(config, run));
  sim.setup.G = config.training.world_size;
  sim.setup.platform = config.platform;
  sim.setup.algorithm = config.simulation.algorithm;
  sim.setup.buckets = config_buckets(config);
  sim.setup.overlap = config.training.overlap;
  sim.setup.comm_slowdown = config.model->comm_slowdown;
  sim.setup.allreduce_slowdown = config.model->allreduce_slowdown;
  sim.setup.mode = config.simulation.mode;
  sim.setup.timeline_from = timeline.first;
  sim.setup.timeline_to = timeline.second;
  sim.engine = simulate_steps(sim.setup, work, progress);
  for (std::size_t p = 0; p < sim.runs.size(); ++p) {
    auto& rows = sim.runs[p].rows;
    const auto& timing = sim.engine.policies[p].timing;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i].fwd_ms = timing[i].fwd_ms;
      rows[i].bwd_ms = timing[i].bwd_ms;
      rows[i].comm_wait_ms = timing[i].comm_wait_ms;
      rows[i].opt_ms = timing[i].opt_ms;
      rows[i].step_ms = timing[i].step_ms;
      rows[i].peak_mem_mib = peak_mem_mib(*config.model, rows[i], sim.runs[p].packed);
    }
  }
  return sim;
}

std::string chrome_trace(const SimulationRun& sim) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (std::size_t p = 0; p < sim.runs.size(); ++p) {
    // One process per (policy, rank); thread 0 computes, thread 1 communicates.
    for (int g = 0; g < sim.setup.G; ++g) {
      const auto pid = static_cast<long>(p) * sim.setup.G + g;
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", pid},
                        {"args", {{"name", sim.runs[p].label + " rank " + std::to_string(g)}}}});
      events.push_back(
          {{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", "compute"}}}});
      events.push_back(
          {{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", 1}, {"args", {{"name", "communication"}}}});
    }
    for (const Span& s : sim.engine.policies[p].spans)
      events.push_back({{"ph", "X"},
                        {"name", s.name},
                        {"cat", s.comm ? "comm" : "compute"},
                        {"pid", static_cast<long>(p) * sim.setup.G + s.rank},
                        {"tid", s.comm ? 1 : 0},
                        {"ts", std::round(s.start_ms * 1e6) / 1e3},  // µs, ns resolution
                        {"dur", std::round(s.dur_ms * 1e6) / 1e3},
                        {"args", {{"step", s.step}}}});
  }
  return nlohmann::ordered_json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1) + "\n";
}

}  // namespace ddpsim
