#include "report/policy_run.hpp"

#include <algorithm>
#include <chrono>

#include "common/stats.hpp"

namespace ddpsim {

RankStep plan_row(const StepPlan& plan, int step, int g, bool packed) {
  const auto gi = static_cast<std::size_t>(g);
  const auto& batch = plan.batches[gi];
  RankStep row;
  row.step = step;
  row.rank = g;
  row.batch_size = static_cast<int>(batch.size());
  std::size_t next = 0;
  for (const int size : plan.micro_sizes.empty() ? std::vector<int>{} : plan.micro_sizes[gi]) {
    MicroBatchShape& m = row.micro.emplace_back();
    m.batch_size = size;
    for (const auto end = next + static_cast<std::size_t>(size); next < end; ++next) {
      m.max_len = std::max(m.max_len, batch[next].len);
      m.real_tokens += batch[next].len;
      m.sq_tokens += std::int64_t{batch[next].len} * batch[next].len;
    }
    row.padded_tokens += std::int64_t{m.batch_size} * m.max_len;
  }
  for (const Sample& s : batch) {
    row.max_len = std::max(row.max_len, s.len);
    row.real_tokens += s.len;
    row.sq_tokens += std::int64_t{s.len} * s.len;
  }
  if (row.micro.empty()) row.padded_tokens = std::int64_t{row.batch_size} * row.max_len;
  if (packed) row.padded_tokens = row.real_tokens;
  row.global_batch = plan.global_batch;
  row.loss_weight = plan.loss_weights[gi];
  return row;
}

PolicyRun run_policy(const PolicySpec& spec, const StepShape& shape, int steps, std::span<const int> dataset) {
  auto policy = make_scheduler(spec, shape);
  DistributedSampler sampler(dataset, shape.G, shape.seed);
  RankBuffers buffers(sampler);
  PolicyRun run{spec.label(), policy->solver(), shape.G, {}, {}, shape.packed};
  run.rows.reserve(static_cast<std::size_t>(steps) * static_cast<std::size_t>(shape.G));
  run.decision_us.reserve(static_cast<std::size_t>(steps));
  StepPlan plan;
  for (int step = 0; step < steps; ++step) {
    buffers.fill_all(policy->buffer_size());
    const auto start = std::chrono::steady_clock::now();
    policy->plan(buffers, plan);
    const auto stop = std::chrono::steady_clock::now();
    run.decision_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    for (int g = 0; g < shape.G; ++g) run.rows.push_back(plan_row(plan, step, g, shape.packed));
  }
  return run;
}

std::vector<double> max_step_ms(const PolicyRun& run) {
  std::vector<double> out;
  const auto G = static_cast<std::size_t>(run.G);
  for (std::size_t i = 0; i < run.rows.size(); i += G) {
    double m = run.rows[i].step_ms;
    for (std::size_t g = 1; g < G; ++g) m = std::max(m, run.rows[i + g].step_ms);
    out.push_back(m);
  }
  return out;
}

TokenSummary summarize(const PolicyRun& run) {
  TokenSummary s;
  const std::size_t G = static_cast<std::size_t>(run.G);
  s.steps = G ? static_cast<int>(run.rows.size() / G) : 0;
  std::vector<double> max_padded, std_padded, global_batch, per_rank(G);
  std::int64_t padded = 0, real = 0;
  for (std::size_t i = 0; i < run.rows.size(); i += G) {
    for (std::size_t g = 0; g < G; ++g) {
      const RankStep& row = run.rows[i + g];
      per_rank[g] = static_cast<double>(row.padded_tokens);
      padded += row.padded_tokens;
      real += row.real_tokens;
      s.samples += row.batch_size;
    }
    max_padded.push_back(*std::max_element(per_rank.begin(), per_rank.end()));
    std_padded.push_back(population_std(per_rank));
    global_batch.push_back(run.rows[i].global_batch);
  }
  s.mean_max_padded_tokens = mean(max_padded);
  s.p95_max_padded_tokens = percentile(max_padded, 95);
  s.mean_std_padded_tokens = mean(std_padded);
  s.padding_waste = padded ? double(padded - real) / double(padded) : 0.0;
  s.mean_global_batch = mean(global_batch);
  if (std::any_of(run.rows.begin(), run.rows.end(), [](const RankStep& r) { return !r.micro.empty(); })) {
    double micro = 0;
    for (const RankStep& r : run.rows) micro += double(std::max<std::size_t>(r.micro.size(), 1));
    s.mean_micro_batches = micro / double(run.rows.size());
    s.micro_batched = true;
  }
  s.mean_sched_us = mean(run.decision_us);
  s.p95_sched_us = percentile(run.decision_us, 95);
  if (run.rows.empty() || std::isnan(run.rows.front().step_ms)) return s;

  const std::vector<double> max_step = max_step_ms(run);
  std::vector<double> samples_per_s, tokens_per_s, std_step, std_compute, max_compute, max_mem, std_mem;
  std::vector<double> step(G), compute(G), mem(G);
  double comm_wait = 0;
  for (std::size_t i = 0; i < run.rows.size(); i += G) {
    std::int64_t padded_step = 0;
    for (std::size_t g = 0; g < G; ++g) {
      const RankStep& row = run.rows[i + g];
      step[g] = row.step_ms;
      compute[g] = row.fwd_ms + row.bwd_ms;
      mem[g] = row.peak_mem_mib;
      comm_wait += row.comm_wait_ms;
      padded_step += row.padded_tokens;
    }
    const double m = max_step[i / G];
    samples_per_s.push_back(run.rows[i].global_batch / (m * 1e-3));
    tokens_per_s.push_back(double(padded_step) / (m * 1e-3));
    std_step.push_back(population_std(step));
    std_compute.push_back(population_std(compute));
    max_compute.push_back(*std::max_element(compute.begin(), compute.end()));
    max_mem.push_back(*std::max_element(mem.begin(), mem.end()));
    std_mem.push_back(population_std(mem));
  }
  s.mean_max_step_ms = mean(max_step);
  s.p95_max_step_ms = percentile(max_step, 95);
  s.mean_samples_per_s = mean(samples_per_s);
  s.p95_samples_per_s = percentile(samples_per_s, 95);
  s.mean_tokens_per_s = mean(tokens_per_s);
  s.p95_tokens_per_s = percentile(tokens_per_s, 95);
  s.mean_std_step_ms = mean(std_step);
  s.mean_std_compute_ms = mean(std_compute);
  s.mean_max_compute_ms = mean(max_compute);
  s.mean_comm_wait_ms = comm_wait / double(run.rows.size());
  s.mean_max_peak_mem_mib = mean(max_mem);
  s.mean_std_peak_mem_mib = mean(std_mem);
  return s;
}

}  // namespace ddpsim
