#include "report/policy_run.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

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

int padded_length(int longest, int multiple, int max_length) {
  if (longest <= 0 || multiple <= 1) return longest;
  const int rounded = (longest + multiple - 1) / multiple * multiple;
  return std::max(longest, std::min(rounded, max_length));  // a sample is never cut to fit
}

void pad_row(RankStep& row, int multiple, int max_length) {
  if (multiple <= 1) return;
  row.max_len = padded_length(row.max_len, multiple, max_length);
  if (row.micro.empty()) {
    row.padded_tokens = std::int64_t{row.batch_size} * row.max_len;
    return;
  }
  row.padded_tokens = 0;
  for (auto& m : row.micro) {
    m.max_len = padded_length(m.max_len, multiple, max_length);
    row.padded_tokens += std::int64_t{m.batch_size} * m.max_len;
  }
}

PolicyStream::PolicyStream(const PolicySpec& spec, const StepShape& shape, std::span<const int> dataset)
    : label_(spec.label()),
      shape_(shape),
      policy_(make_scheduler(spec, shape)),
      sampler_(std::make_unique<DistributedSampler>(dataset, shape.G, shape.seed)),
      buffers_(std::make_unique<RankBuffers>(*sampler_)) {}

PolicyRun PolicyStream::next(int steps) {
  PolicyRun run{label_, policy_->solver(), shape_.G, {}, {}, shape_.packed};
  run.rows.reserve(static_cast<std::size_t>(steps) * static_cast<std::size_t>(shape_.G));
  run.decision_us.reserve(static_cast<std::size_t>(steps));
  for (int end = step_ + steps; step_ < end; ++step_) {
    buffers_->fill_all(policy_->buffer_size());
    const auto start = std::chrono::steady_clock::now();
    policy_->plan(*buffers_, plan_);
    const auto stop = std::chrono::steady_clock::now();
    run.decision_us.push_back(std::chrono::duration<double, std::micro>(stop - start).count());
    for (int g = 0; g < shape_.G; ++g) {
      run.rows.push_back(plan_row(plan_, step_, g, shape_.packed));
      pad_row(run.rows.back(), shape_.pad_to_multiple_of, shape_.max_length);
    }
  }
  return run;
}

PolicyRun run_policy(const PolicySpec& spec, const StepShape& shape, int steps, std::span<const int> dataset) {
  return PolicyStream(spec, shape, dataset).next(steps);
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

std::vector<double> samples_per_step(const PolicyRun& run) {
  std::vector<double> out;
  const auto G = static_cast<std::size_t>(run.G);
  for (std::size_t i = 0; i < run.rows.size(); i += G) {
    double samples = 0;
    for (std::size_t g = 0; g < G; ++g) samples += run.rows[i + g].batch_size;
    out.push_back(samples);
  }
  return out;
}

SummaryBuilder::SummaryBuilder(int G, double capacity_mib)
    : G_(static_cast<std::size_t>(G)),
      capacity_mib_(capacity_mib),
      per_rank_(G_),
      compute_(G_),
      mem_(G_),
      shapes_(G_) {}

void SummaryBuilder::add_shape(std::size_t g, int b, int L) {
  const std::uint64_t key = std::uint64_t{static_cast<std::uint32_t>(b)} << 32 | static_cast<std::uint32_t>(L);
  auto& met = shapes_[g];
  const auto at = std::lower_bound(met.begin(), met.end(), key);
  if (at == met.end() || *at != key) met.insert(at, key);
}

void SummaryBuilder::add_step(std::span<const RankStep> rows) {
  if (steps_ == 0) timed_ = !rows.empty() && !std::isnan(rows.front().step_ms);
  ++steps_;
  double max_step = 0;
  std::int64_t padded_step = 0, real_step = 0;
  for (std::size_t g = 0; g < G_; ++g) {
    const RankStep& row = rows[g];
    if (row.micro.empty()) {
      if (row.batch_size > 0) add_shape(g, row.batch_size, row.max_len);
    } else {
      for (const auto& m : row.micro) add_shape(g, m.batch_size, m.max_len);
    }
    real_step += row.real_tokens;
    per_rank_[g] = static_cast<double>(row.padded_tokens);
    padded_ += row.padded_tokens;
    padded_step += row.padded_tokens;
    real_ += row.real_tokens;
    samples_ += row.batch_size;
    micro_ += double(std::max<std::size_t>(row.micro.size(), 1));
    micro_batched_ |= !row.micro.empty();
    if (!timed_) continue;
    max_step = std::max(max_step, row.step_ms);
    compute_[g] = row.fwd_ms + row.bwd_ms;
    mem_[g] = row.peak_mem_mib;
    comm_wait_ += row.comm_wait_ms;
  }
  max_padded_.push_back(*std::max_element(per_rank_.begin(), per_rank_.end()));
  sum_std_padded_ += population_std(per_rank_);
  sum_global_batch_ += rows.front().global_batch;
  if (!timed_) return;
  for (std::size_t g = 0; g < G_; ++g) per_rank_[g] = rows[g].step_ms;
  max_step_.push_back(max_step);
  samples_per_s_.push_back(rows.front().global_batch / (max_step * 1e-3));
  tokens_per_s_.push_back(double(padded_step) / (max_step * 1e-3));
  sum_real_tokens_per_s_ += double(real_step) / (max_step * 1e-3);
  sum_std_step_ += population_std(per_rank_);
  sum_std_compute_ += population_std(compute_);
  sum_max_compute_ += *std::max_element(compute_.begin(), compute_.end());
  const double max_mem = *std::max_element(mem_.begin(), mem_.end());
  sum_max_mem_ += max_mem;
  max_mem_ = std::max(max_mem_, max_mem);
  over_capacity_ += capacity_mib_ > 0 && max_mem > capacity_mib_;
  sum_std_mem_ += population_std(mem_);
}

TokenSummary SummaryBuilder::finish() const {
  TokenSummary s;
  s.steps = static_cast<int>(steps_);
  s.samples = samples_;
  s.mean_max_padded_tokens = mean(max_padded_);
  s.p95_max_padded_tokens = percentile(max_padded_, 95);
  const double n = steps_ ? double(steps_) : 1.0;  // means as stats.hpp's mean() takes them
  s.mean_std_padded_tokens = sum_std_padded_ / n;
  s.padding_waste = padded_ ? double(padded_ - real_) / double(padded_) : 0.0;
  s.mean_global_batch = sum_global_batch_ / n;
  if (micro_batched_) {
    s.mean_micro_batches = micro_ / double(steps_ * G_);
    s.micro_batched = true;
  }
  double shapes = 0;
  for (const auto& met : shapes_) shapes += double(met.size());
  s.mean_distinct_shapes = G_ ? shapes / double(G_) : 0;
  s.mean_sched_us = mean(decision_us_);
  s.p95_sched_us = percentile(decision_us_, 95);
  if (!timed_ || steps_ == 0) return s;
  s.mean_max_step_ms = mean(max_step_);
  s.p95_max_step_ms = percentile(max_step_, 95);
  s.mean_samples_per_s = mean(samples_per_s_);
  s.p95_samples_per_s = percentile(samples_per_s_, 95);
  s.mean_tokens_per_s = mean(tokens_per_s_);
  s.p95_tokens_per_s = percentile(tokens_per_s_, 95);
  s.mean_real_tokens_per_s = sum_real_tokens_per_s_ / n;
  s.mean_std_step_ms = sum_std_step_ / n;
  s.mean_std_compute_ms = sum_std_compute_ / n;
  s.mean_max_compute_ms = sum_max_compute_ / n;
  s.mean_comm_wait_ms = comm_wait_ / double(steps_ * G_);
  s.mean_max_peak_mem_mib = sum_max_mem_ / n;
  s.mean_std_peak_mem_mib = sum_std_mem_ / n;
  s.max_peak_mem_mib = max_mem_;
  s.steps_over_capacity = over_capacity_;
  return s;
}

void SummaryBuilder::add_steps(const PolicyRun& block) {
  for (std::size_t i = 0; G_ && i + G_ <= block.rows.size(); i += G_) add_step({block.rows.data() + i, G_});
  for (double us : block.decision_us) add_decision(us);
}

TokenSummary summarize(const PolicyRun& run, double capacity_mib) {
  SummaryBuilder builder(run.G, capacity_mib);
  builder.add_steps(run);
  return builder.finish();
}

double levels_apart(std::span<const double> medians) {
  if (medians.size() < 2) return -1;
  const auto [low, high] = std::minmax_element(medians.begin(), medians.end());
  return *low > 0 ? *high / *low - 1 : -1;
}

std::string optimizer_levels_text(const std::vector<std::pair<std::string, double>>& medians, bool interleaved) {
  std::vector<double> values;
  std::string each;
  char text[64];
  for (const auto& [policy, ms] : medians) {
    values.push_back(ms);
    std::snprintf(text, sizeof text, " %.1f", ms);
    each += (each.empty() ? "" : ", ") + policy + text;
  }
  const double apart = levels_apart(values);
  if (apart < 0) return "";
  std::snprintf(text, sizeof text, " ms (%.1f%% apart)\n", 100 * apart);
  std::string out = "optimizer, the same work in every policy's model, median after step 0: " + each + text;
  if (apart <= kOwnLevelApart) return out;
  return out + (interleaved ? "warning: this machine ran each policy's model at a level of its own; a gain between "
                              "these runs carries it (ddpsim calibrate --training and validate say so too)\n"
                            : "warning: the policies, trained one after another, met the machine at levels of their "
                              "own; a gain between these runs carries it (trained a step each in turn, they would "
                              "share one)\n");
}

}  // namespace ddpsim
