#include "eval/simulate.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/rng.hpp"
#include "eval/sharding.hpp"

namespace ddpsim {

std::vector<Bucket> config_buckets(const Config& config) {
  constexpr double MiB = 1024.0 * 1024.0;
  return make_buckets(*config.model, config.training.bucket_mb * MiB, config.training.first_bucket_mb * MiB);
}

namespace {

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

}  // namespace

long long regime_tokens(const RankStep& r, bool packed) {
  if (r.micro.empty()) return micro_tokens({r.batch_size, r.max_len, r.real_tokens, r.sq_tokens}, packed);
  long long largest = 0;
  for (const MicroBatchShape& mb : r.micro) largest = std::max(largest, micro_tokens(mb, packed));
  return largest;
}

int level_samples(const RankStep& r, bool packed) {
  if (r.micro.empty()) return r.batch_size;
  const auto largest = std::max_element(r.micro.begin(), r.micro.end(), [&](const auto& a, const auto& b) {
    return micro_tokens(a, packed) < micro_tokens(b, packed);
  });
  return largest->batch_size;
}

ComputeNoise::ComputeNoise(const Config& config, const PerfModel* model)
    : spells_shared_(config.simulation.spells == "shared"),
      model_(model),
      steps_(model ? &model->step_factors : nullptr),
      noise_(config.training.seed ^ 0x9e3779b97f4a7c15ULL),
      shared_noise_(config.training.seed ^ 0x2545f4914f6cdd1dULL),
      spell_noise_(config.training.seed ^ 0x6a09e667f3bcc909ULL),
      step_noise_(config.training.seed ^ 0xbb67ae8584caa73bULL) {
  const SimulationConfig& s = config.simulation;
  const bool spells = s.spells != "off" && model;
  if (model) {
    regime_[0] = {model->noise_sigma, model->noise_shared_sigma, 1,
                  spells ? model->spell_quantiles : std::vector<double>{}};
    knee_ = model->noise_above.tokens;
    steps_scale_ = model->noise_above.steps_scale;
    steps_above_ = model->steps_above;
    if (knee_ > 0)
      regime_[1] = {model->noise_above.sigma, model->noise_above.shared_sigma, 1,
                    spells ? model->noise_above.spells : std::vector<double>{}};
  }
  for (Regime& r : regime_) {
    if (s.noise_sigma >= 0) r.sigma = s.noise_sigma;
    if (s.noise_shared_sigma >= 0) r.shared_sigma = s.noise_shared_sigma;
    has_spells_ = has_spells_ || !r.spells.empty();
  }
}

bool ComputeNoise::draws() const {
  const auto noisy = [](const Regime& r) { return r.sigma > 0 || r.shared_sigma > 0 || !r.spells.empty(); };
  return noisy(regime_[0]) || (knee_ > 0 && noisy(regime_[1])) || (steps_ && !steps_->empty());
}

bool draws_compute_noise(const Config& config) {
  return config.model && (ComputeNoise(config, config.model.get()).draws() || config.simulation.unit_jitter > 0);
}

Config without_compute_noise(const Config& config) {
  Config quiet = config;
  quiet.simulation.noise_sigma = 0;
  quiet.simulation.noise_shared_sigma = 0;
  quiet.simulation.spells = "off";
  quiet.simulation.unit_jitter = 0;
  if (config.model && !config.model->step_factors.empty()) {
    auto model = std::make_shared<PerfModel>(*config.model);
    model->step_factors.clear();
    quiet.model = std::move(model);
  }
  return quiet;
}

ComputeCharger::ComputeCharger(const Config& config) : config_(config), noise_(config, config.model.get()) {}

double ComputeCharger::first_use_ms(int rank, int b, int L) {
  const double cost = config_.model->first_use_ms;
  if (cost <= 0 || config_.simulation.first_use == "off") return 0;
  const std::size_t process = config_.simulation.first_use == "shared" ? 0 : static_cast<std::size_t>(rank);
  if (met_.size() <= process) met_.resize(process + 1);
  return met_[process].emplace(b, L).second ? cost : 0;
}

PolicyWork ComputeCharger::charge(const PolicyRun& run) {
  check_equal_micro_batches(config_, run);
  const PerfModel& m = *config_.model;
  PolicyWork pw;
  pw.steps = run.G ? static_cast<int>(run.rows.size()) / run.G : 0;
  pw.synchronized = run.label.rfind("static", 0) != 0;
  pw.work.reserve(run.rows.size());
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    const RankStep& r = run.rows[i];
    const std::size_t step_index = i / static_cast<std::size_t>(std::max(run.G, 1));
    if (i % static_cast<std::size_t>(std::max(run.G, 1)) == 0) noise_.next_step();
    const double common = noise_.next_rank(regime_tokens(r, run.packed), level_samples(r, run.packed)) *
                          config_.simulation.speed_factor(r.rank, r.step);
    const double factor = common * noise_.measured();
    // Forward and backward of one micro-batch: padded to its longest sample, or packed.
    auto phases = [&](int b, int L, std::int64_t tokens, std::int64_t pairs) {
      if (run.packed)
        return std::pair(m.fwd_packed_ms(double(tokens), double(pairs)) * factor,
                         m.bwd_packed_ms(double(tokens), double(pairs)) * factor);
      const double fwd = m.fwd_ms(b, L), bwd = m.bwd_ms(b, L);
      // A new shape's one-off cost, split between the phases as their times are.
      const double first = first_use_ms(r.rank, b, L), share = fwd + bwd > 0 ? fwd / (fwd + bwd) : 0.5;
      return std::pair(fwd * factor + first * share, bwd * factor + first * (1 - share));
    };
    RankWork w;
    if (r.micro.empty()) {
      std::tie(w.fwd_ms, w.bwd_ms) = phases(r.batch_size, r.max_len, r.real_tokens, r.sq_tokens);
    } else {
      for (std::size_t k = 0; k + 1 < r.micro.size(); ++k) {
        const MicroBatchShape& mb = r.micro[k];
        const auto [fwd, bwd] = phases(mb.batch_size, mb.max_len, mb.real_tokens, mb.sq_tokens);
        w.earlier.push_back({fwd, bwd});
      }
      const MicroBatchShape& last = r.micro.back();
      std::tie(w.fwd_ms, w.bwd_ms) = phases(last.batch_size, last.max_len, last.real_tokens, last.sq_tokens);
    }
    w.opt_ms = m.optimizer_ms * common;
    w.sched_ms = config_.simulation.sched_measured && step_index < run.decision_us.size()
                     ? run.decision_us[step_index] * 1e-3
                     : config_.simulation.sched_ms;
    pw.work.push_back(w);
  }
  return pw;
}

PolicyWork charge_compute(const Config& config, const PolicyRun& run) {
  return ComputeCharger(config).charge(run);
}

SimulationRun simulate(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline,
                       const std::function<void(long, long)>& progress) {
  std::vector<PolicyRun> runs;
  for (const auto& spec : config.policies)
    runs.push_back(run_policy(spec, config.shape(), config.training.steps, dataset));
  return simulate_runs(config, std::move(runs), timeline, progress);
}

namespace {

EngineSetup engine_setup(const Config& config, std::pair<int, int> timeline) {
  EngineSetup setup;
  setup.G = config.training.world_size;
  setup.platform = config.platform;
  setup.algorithm = config.simulation.algorithm;
  setup.buckets = config_buckets(config);
  setup.sharding = config.training.data_parallel;
  if (config.training.fully_sharded()) {
    setup.units = shard_units(*config.model, config.training.wrap, config.training.min_num_params);
    setup.shard_group = config.training.shard_group;
    setup.reshard_after_forward = config.training.reshard_after_forward;
    setup.no_sync = config.training.no_sync;
    setup.backward_prefetch = config.training.backward_prefetch;
    setup.forward_prefetch = config.training.forward_prefetch;
    setup.backward_prefetch_depth = config.training.backward_prefetch_depth;
    setup.unit_jitter = config.simulation.unit_jitter;
    setup.jitter_seed = config.training.seed ^ 0x3c6ef372fe94f82bULL;
  }
  setup.overlap = config.training.overlap;
  setup.comm_slowdown = config.model->comm_slowdown;
  setup.allreduce_slowdown = config.model->allreduce_slowdown;
  setup.allgather_factor = config.model->allgather_factor;
  if (!config.training.fully_sharded()) setup.sync_ms = config.model->sync_ms;
  setup.optimizer_update_share = config.model->optimizer_update_share;
  if (config.training.zero_partition != "even")
    setup.shard_shares = zero_shares(*config.model, config.training.world_size, config.training.zero_partition);
  setup.mode = config.simulation.mode;
  setup.timeline_from = timeline.first;
  setup.timeline_to = timeline.second;
  return setup;
}

// The engine's timings into the rows, and the memory the model gives each.
void fill_rows(const Config& config, PolicyRun& run, const std::vector<RankTiming>& timing) {
  for (std::size_t i = 0; i < run.rows.size(); ++i) {
    RankStep& r = run.rows[i];
    r.fwd_ms = timing[i].fwd_ms;
    r.bwd_ms = timing[i].bwd_ms;
    r.comm_wait_ms = timing[i].comm_wait_ms;
    r.opt_ms = timing[i].opt_ms;
    r.step_ms = timing[i].step_ms;
    r.peak_mem_mib = peak_mem_mib(*config.model, r, run.packed);
  }
}

// A block of steps whose timings are in: its rows are filled, summed up and handed to the sink;
// what is kept of it is its run without rows (its label, solver, G and attention).
PolicyRun retire_block(const Config& config, PolicyRun& block, const std::vector<RankTiming>& timing,
                       SummaryBuilder& summary, const RowSink& sink) {
  fill_rows(config, block, timing);
  summary.add_steps(block);
  if (sink) sink(block.label, block.rows);
  block.rows = {};
  block.decision_us = {};
  return std::move(block);
}

// Full mode a block at a time: SimGrid asks for each block's work when its ranks first need it
// and hands its timings back when they have all finished it; rows are then filled, summed up,
// written and dropped, as in fast mode.
SimulationRun simulate_full_streamed(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline,
                                     const std::function<void(long, long)>& progress, const RowSink& sink,
                                     int block_steps) {
  const StepShape shape = config.shape();
  const std::size_t P = config.policies.size();
  SimulationRun sim;
  sim.setup = engine_setup(config, timeline);
  sim.runs.resize(P);
  std::vector<std::unique_ptr<PolicyStream>> streams(P);
  std::vector<std::unique_ptr<ComputeCharger>> chargers(P);
  std::vector<SummaryBuilder> summaries;
  for (std::size_t p = 0; p < P; ++p)
    summaries.emplace_back(config.training.world_size, config.model->mem_capacity_mib);
  std::vector<std::map<int, PolicyRun>> pending(P);  // blocks planned, their timings to come
  StepBlocks blocks;
  blocks.steps.assign(P, config.training.steps);
  blocks.block_steps = block_steps;
  blocks.work = [&](int p, int first, int count) {
    const auto q = static_cast<std::size_t>(p);
    if (!streams[q]) {
      streams[q] = std::make_unique<PolicyStream>(config.policies[q], shape, dataset);
      chargers[q] = std::make_unique<ComputeCharger>(config);
    }
    const PolicyRun& block = pending[q][first] = streams[q]->next(count);
    return chargers[q]->charge(block);
  };
  blocks.done = [&](int p, int first, std::vector<RankTiming>& timing) {
    const auto q = static_cast<std::size_t>(p);
    sim.runs[q] = retire_block(config, pending[q].at(first), timing, summaries[q], sink);
    pending[q].erase(first);
    if (first + block_steps >= config.training.steps) {  // the policy's last block
      streams[q].reset();
      chargers[q].reset();
    }
  };
  sim.engine = simulate_full(sim.setup, blocks, progress);
  for (auto& summary : summaries) sim.summaries.push_back(summary.finish());
  return sim;
}

}  // namespace

SimulationRun simulate_runs(const Config& config, std::vector<PolicyRun> runs, std::pair<int, int> timeline,
                            const std::function<void(long, long)>& progress) {
  SimulationRun sim;
  sim.runs = std::move(runs);
  std::vector<PolicyWork> work;
  for (const auto& run : sim.runs) work.push_back(charge_compute(config, run));
  sim.setup = engine_setup(config, timeline);
  sim.engine = simulate_steps(sim.setup, work, progress);
  for (std::size_t p = 0; p < sim.runs.size(); ++p) {
    fill_rows(config, sim.runs[p], sim.engine.policies[p].timing);
    sim.summaries.push_back(summarize(sim.runs[p], config.model->mem_capacity_mib));
  }
  return sim;
}

SimulationRun simulate_streamed(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline,
                                const std::function<void(long, long)>& progress, const RowSink& sink, int block_steps) {
  const int G = config.training.world_size, steps = config.training.steps;
  if (block_steps < 1) block_steps = std::max(1, (1 << 18) / G);  // about 2^18 rows in flight
  if (config.simulation.mode != "fast")
    return simulate_full_streamed(config, dataset, timeline, progress, sink, block_steps);
  SimulationRun sim;
  sim.setup = engine_setup(config, timeline);
  FastEngine engine(sim.setup);
  sim.engine.allreduce_ms = engine.allreduce_ms();
  const StepShape shape = config.shape();
  long done = 0;
  const long total = static_cast<long>(steps) * static_cast<long>(config.policies.size());
  for (const auto& spec : config.policies) {
    PolicyStream stream(spec, shape, dataset);
    ComputeCharger charger(config);
    SummaryBuilder summary(G, config.model->mem_capacity_mib);
    PolicyTimes times;  // spans only: a block's timings are used and dropped
    engine.start_policy();
    PolicyRun run;
    for (int first = 0; first < steps; first += block_steps) {
      PolicyRun block = stream.next(std::min(block_steps, steps - first));
      PolicyTimes block_times;
      engine.advance(charger.charge(block), block_times, [&](int n) {
        done += n;
        if (progress) progress(done, total);
      });
      run = retire_block(config, block, block_times.timing, summary, sink);
      std::move(block_times.spans.begin(), block_times.spans.end(), std::back_inserter(times.spans));
    }
    sim.runs.push_back(std::move(run));
    sim.summaries.push_back(summary.finish());
    sim.engine.policies.push_back(std::move(times));
  }
  return sim;
}

TraceColumns trace_columns_for(const Config& config) {
  TraceColumns c;
  c.packed = config.training.attention == "packed";
  c.micro = config.training.micro_batches > 1;
  for (const auto& spec : config.policies) c.micro |= make_scheduler(spec, config.shape())->forms_micro_batches();
  return c;
}

std::string chrome_trace(const SimulationRun& sim) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  const EngineSetup& e = sim.setup;
  const bool replicas = e.sharding == "hybrid" && e.shard_group > 0 && e.shard_group < e.G;
  for (std::size_t p = 0; p < sim.runs.size(); ++p) {
    // One process per (policy, rank); thread 0 computes, thread 1 communicates (HSDP: in its
    // group; thread 2 across the groups).
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
      if (replicas)
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", pid},
                          {"tid", 2},
                          {"args", {{"name", "communication across groups"}}}});
    }
    for (const Span& s : sim.engine.policies[p].spans)
      events.push_back({{"ph", "X"},
                        {"name", s.name},
                        {"cat", s.comm ? "comm" : "compute"},
                        {"pid", static_cast<long>(p) * sim.setup.G + s.rank},
                        {"tid", across_groups(s) ? 2
                                : s.comm         ? 1
                                                 : 0},
                        {"ts", std::round(s.start_ms * 1e6) / 1e3},  // µs, ns resolution
                        {"dur", std::round(s.dur_ms * 1e6) / 1e3},
                        {"args", {{"step", s.step}}}});
  }
  return nlohmann::ordered_json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1) + "\n";
}

}  // namespace ddpsim
