#include "eval/pipeline_eval.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "common/stats.hpp"
#include "eval/simulate.hpp"
#include "pipeline/schedule.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

namespace {

using pipeline::GpuWork;
using pipeline::StepWork;

// Bytes per parameter a stage keeps: weights and gradients at the model's element size, Adam's
// two fp32 moments; ZeRO-2 shards gradients and optimizer state over the D groups.
double state_bytes_per_param(const Config& config) {
  const auto& s = config.parallel->setup;
  const double element = config.model->bytes_per_param, optimizer = 8;
  return element + (element + optimizer) / (s.data_parallel == "zero2" ? s.groups : 1);
}

// Bytes per second all GPUs' links of one class can move.
double link_capacity(const Config& config) {
  const auto& s = config.parallel->setup;
  return s.gpus() * s.channels.bytes_per_s;
}

// One micro-batch's activation memory on the whole model, in bytes.
double activation_bytes(const PerfModel& m, int b, int L) {
  return (m.mem_mu_mib * b * L + m.mem_nu_mib * double(b) * L * L) * 1024 * 1024;
}

pipeline::PartitionProblem partition_problem(const Config& config) {
  const auto& s = config.parallel->setup;
  const PerfModel& m = *config.model;
  const int b = (config.training.global_batch + s.groups * s.micro_batches - 1) / (s.groups * s.micro_batches);
  const double act = activation_bytes(m, b, config.training.max_length), state = state_bytes_per_param(config);
  pipeline::PartitionProblem p;
  for (const auto& layer : m.layers)
    p.layers.push_back({layer.bwd_fraction, double(layer.params) * state, layer.bwd_fraction * act});
  for (int stage = 0; stage < s.stages; ++stage)
    p.in_flight.push_back(pipeline::max_in_flight(pipeline::stage_ops(s.schedule, s.stages, stage, s.micro_batches)));
  if (m.mem_capacity_mib > 0) p.capacity_bytes = m.mem_capacity_mib * 1024 * 1024;
  return p;
}

PipelineFigures figures_of(const Config& config, pipeline::PipelineResult&& r, std::string label) {
  const bool abstract = config.parallel->abstract_mode;
  const double time_unit = abstract ? 1 : 1e3;  // s → ms
  PipelineFigures f;
  f.label = std::move(label);
  std::vector<double>& step_s = f.step_times;
  std::vector<double>& bubble = f.bubbles;
  double busy = 0;
  for (const auto& step : r.steps) {
    double step_busy = 0;
    for (const auto& gpu : step.gpus) step_busy += gpu.busy_s;
    busy += step_busy;
    step_s.push_back(step.step_s * time_unit);
    bubble.push_back(step.step_s > 0 ? 1 - step_busy / (double(step.gpus.size()) * step.step_s) : 0);
  }
  f.step_mean = mean(step_s);
  f.step_p95 = percentile(step_s, 95);
  f.total = r.total_s * time_unit;
  f.bubble_mean = mean(bubble);
  f.bubble_p95 = percentile(bubble, 95);
  f.compute_share = r.total_s > 0 ? busy / (config.parallel->setup.gpus() * r.total_s) : 0;
  const double volume_unit = abstract ? pipeline::ABSTRACT_BYTES_PER_UNIT : 1e6;
  for (std::size_t c = 0; c < f.flows.size(); ++c) {
    const auto& s = r.flows[c];
    auto& out = f.flows[c];
    out.volume = s.bytes / volume_unit;
    out.transfers = s.transfers;
    out.mean_time = s.transfers > 0 ? s.transfer_s / double(s.transfers) * time_unit : 0;
    out.throughput = r.total_s > 0 ? s.bytes / (abstract ? pipeline::ABSTRACT_BYTES_PER_UNIT : 1e9) / r.total_s : 0;
    out.utilisation = r.total_s > 0 ? s.bytes / (r.total_s * link_capacity(config)) : 0;
  }
  f.max_in_flight = r.max_in_flight;
  f.recording = std::move(r.recording);
  return f;
}

// Compute noise and slow GPUs as in DDP (simulate.cpp): mean-one log-normal factors, one per
// step for all GPUs and one per GPU and step, times simulation.rank_speed and stragglers by GPU;
// the same draws for every policy.
class ComputeFactors {
 public:
  // `model`: the noise where the simulation section does not set it (null: none).
  ComputeFactors(const Config& config, const PerfModel* model) : config_(config), noise_(config, model) {}
  // `tokens`: each GPU's largest micro-batch in padded tokens (its noise regime); empty: all 0.
  std::vector<double> step(int step, std::span<const long long> tokens = {}) {
    std::vector<double> factor;
    noise_.next_step();
    for (int gpu = 0; gpu < config_.parallel->setup.gpus(); ++gpu) {
      const long long t = tokens.empty() ? 0 : tokens[static_cast<std::size_t>(gpu)];
      // No samples: a pipeline job charges no measured level (docs/models.md), only the draws.
      factor.push_back(noise_.next_rank(t, 0) * config_.simulation.speed_factor(gpu, step));
    }
    return factor;
  }

 private:
  const Config& config_;
  ComputeNoise noise_;
};

// Model mode: the policy's steps, as each GPU's work. Each data-parallel group is one of the
// policy's ranks; its micro-batches (training.micro_batches = parallel.micro_batches) each
// padded to their longest sample. A group given fewer samples than micro-batches runs empty
// ones.
std::vector<StepWork> model_steps(const Config& config, const PolicyRun& run, const pipeline::Partition& first,
                                  std::vector<double>& max_activation_bytes) {
  const auto& p = *config.parallel;
  const auto& s = p.setup;
  const PerfModel& m = *config.model;
  const int S = s.stages, D = s.groups, M = s.micro_batches;
  std::vector<double> fraction(static_cast<std::size_t>(S), 0), params(static_cast<std::size_t>(S), 0);
  for (int stage = 0; stage < S; ++stage) {
    const int end = pipeline::stage_end(first, stage, static_cast<int>(m.layers.size()));
    for (int l = first[static_cast<std::size_t>(stage)]; l < end; ++l) {
      fraction[static_cast<std::size_t>(stage)] += m.layers[static_cast<std::size_t>(l)].bwd_fraction;
      params[static_cast<std::size_t>(stage)] += double(m.layers[static_cast<std::size_t>(l)].params);
    }
  }
  const bool packed = config.training.attention == "packed";
  const double grad_bytes = m.bytes_per_param;
  ComputeFactors factors(config, &m);
  std::vector<StepWork> steps;
  for (std::size_t i = 0; i < run.rows.size(); i += static_cast<std::size_t>(D)) {
    StepWork work(static_cast<std::size_t>(S * D));
    std::vector<std::vector<MicroBatchShape>> micro_of(static_cast<std::size_t>(D));
    std::vector<long long> tokens(static_cast<std::size_t>(S * D), 0);
    for (int d = 0; d < D; ++d) {
      const RankStep& row = run.rows[i + static_cast<std::size_t>(d)];
      std::vector<MicroBatchShape>& micro = micro_of[static_cast<std::size_t>(d)];
      micro = row.micro;
      if (micro.empty() && row.batch_size > 0)
        micro.push_back({row.batch_size, row.max_len, row.real_tokens, row.sq_tokens});
      micro.resize(static_cast<std::size_t>(M));  // empty micro-batches where the group had too few samples
      std::fill_n(tokens.begin() + d * S, S, regime_tokens(row, packed));
    }
    const std::vector<double> factor = factors.step(static_cast<int>(i / static_cast<std::size_t>(D)), tokens);
    for (int d = 0; d < D; ++d) {
      const std::vector<MicroBatchShape>& micro = micro_of[static_cast<std::size_t>(d)];
      for (int stage = 0; stage < S; ++stage) {
        const auto st = static_cast<std::size_t>(stage);
        GpuWork& g = work[static_cast<std::size_t>(d * S + stage)];
        const double f = factor[static_cast<std::size_t>(d * S + stage)];
        for (const auto& mb : micro) {
          const bool empty = mb.batch_size == 0;
          const double tokens = packed ? double(mb.real_tokens) : double(mb.batch_size) * mb.max_len;
          const double fwd =
              packed ? m.fwd_packed_ms(tokens, double(mb.sq_tokens)) : m.fwd_ms(mb.batch_size, mb.max_len);
          const double bwd =
              packed ? m.bwd_packed_ms(tokens, double(mb.sq_tokens)) : m.bwd_ms(mb.batch_size, mb.max_len);
          const double act = packed ? (m.packed_mem_mib(tokens, double(mb.sq_tokens)) - m.mem_m0_mib) * 1024 * 1024
                                    : activation_bytes(m, mb.batch_size, mb.max_len);
          g.fwd_s.push_back(empty ? 0 : fwd * fraction[st] * f * 1e-3);
          g.bwd_s.push_back(empty ? 0 : bwd * fraction[st] * f * 1e-3);
          g.act_bytes.push_back(empty ? 0 : tokens * p.activation_bytes_per_token);
          if (!empty) max_activation_bytes[st] = std::max(max_activation_bytes[st], act * fraction[st]);
        }
        g.sync_bytes = params[st] * grad_bytes;
        g.gather_bytes = s.data_parallel == "zero2" ? params[st] * grad_bytes : 0;
        // ZeRO-2: a G-th of the update, the rest of the optimizer whole (PerfModel::optimizer_update_share).
        const double u = m.optimizer_update_share;
        g.opt_s = m.optimizer_ms * fraction[st] * f * 1e-3 * (s.data_parallel == "zero2" ? 1 - u + u / D : 1);
      }
    }
    steps.push_back(std::move(work));
  }
  return steps;
}

}  // namespace

pipeline::Partition stage_partition(const Config& config) {
  const auto& p = *config.parallel;
  const pipeline::PartitionProblem problem = partition_problem(config);
  if (p.stage_layers.empty()) return pipeline::make_partition(p.partition, problem);
  int total = 0;
  pipeline::Partition first;
  for (int n : p.stage_layers) {
    first.push_back(total);
    total += n;
  }
  if (total != static_cast<int>(problem.layers.size()))
    throw InputError("partition gives " + std::to_string(total) + " layers, model " + config.model->name + " has " +
                     std::to_string(problem.layers.size()));
  return first;
}

std::vector<PipelineFigures> simulate_parallel(const Config& config, std::pair<int, int> record) {
  const auto& p = *config.parallel;
  const auto steps = static_cast<std::size_t>(config.training.steps);
  if (p.abstract_mode) {
    // The unit times, scaled like model mode's (no noise unless simulation.noise_sigma says so).
    ComputeFactors factors(config, nullptr);
    std::vector<StepWork> work(steps, pipeline::abstract_step(p.setup, p.abstract));
    for (std::size_t t = 0; t < steps; ++t) {
      const std::vector<double> factor = factors.step(static_cast<int>(t));
      for (std::size_t g = 0; g < work[t].size(); ++g) {
        for (double& s : work[t][g].fwd_s) s *= factor[g];
        for (double& s : work[t][g].bwd_s) s *= factor[g];
        work[t][g].opt_s *= factor[g];
      }
    }
    return {figures_of(config, pipeline::simulate_pipeline(p.setup, work, record), "abstract")};
  }
  const pipeline::Partition first = stage_partition(config);
  const pipeline::PartitionProblem problem = partition_problem(config);
  const auto source = make_length_source(config.data, config.training.max_length);
  const std::vector<int> dataset = config_dataset(config, *source);
  // The policies split each step's samples over the D groups, each group's into M micro-batches.
  const StepShape shape = config.shape();
  std::vector<PipelineFigures> columns;
  for (const auto& spec : config.policies) {
    if (make_scheduler(spec, shape)->forms_micro_batches())
      throw InputError(config.origin + ": policy " + spec.label() +
                       " forms its own number of micro-batches; a pipeline runs parallel.micro_batches of them");
    const PolicyRun run = run_policy(spec, shape, config.training.steps, dataset);
    std::vector<double> max_act(static_cast<std::size_t>(p.setup.stages), 0);
    const std::vector<StepWork> work = model_steps(config, run, first, max_act);
    PipelineFigures f = figures_of(config, pipeline::simulate_pipeline(p.setup, work, record), run.label);
    for (int stage = 0; stage < p.setup.stages; ++stage) {
      double state = 0;
      for (int l = first[static_cast<std::size_t>(stage)];
           l < pipeline::stage_end(first, stage, static_cast<int>(problem.layers.size())); ++l)
        state += problem.layers[static_cast<std::size_t>(l)].state_bytes;
      f.stage_mem_mib.push_back(
          (state + f.max_in_flight[static_cast<std::size_t>(stage)] * max_act[static_cast<std::size_t>(stage)]) /
          (1024.0 * 1024));
    }
    columns.push_back(std::move(f));
  }
  return columns;
}

std::string pipeline_table(const Config& config, const std::vector<PipelineFigures>& columns) {
  const bool abstract = config.parallel->abstract_mode;
  const std::string time = abstract ? "units" : "ms", volume = abstract ? "units" : "MB",
                    rate = abstract ? "units/unit" : "GB/s";
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  auto row = [&](const std::string& name, auto value) {
    std::vector<std::string> cells;
    for (const auto& f : columns) cells.push_back(value(f));
    rows.emplace_back(name, std::move(cells));
  };
  const char* spec = abstract ? "%.4f" : "%.2f";
  row("step time, mean (" + time + ")", [&](const PipelineFigures& f) { return format(spec, f.step_mean); });
  row("step time, P95 (" + time + ")", [&](const PipelineFigures& f) { return format(spec, f.step_p95); });
  row("compute share", [](const PipelineFigures& f) { return format("%.4f", f.compute_share); });
  row("bubble per step, mean", [](const PipelineFigures& f) { return format("%.4f", f.bubble_mean); });
  row("bubble per step, P95", [](const PipelineFigures& f) { return format("%.4f", f.bubble_p95); });
  for (std::size_t c = 0; c < pipeline::FLOW_CLASSES; ++c) {
    if (columns.front().flows[c].transfers == 0) continue;
    const std::string& name = pipeline::flow_class_names()[c];
    row(name + ": volume (" + volume + ")",
        [&](const PipelineFigures& f) { return format("%.1f", f.flows[c].volume); });
    row(name + ": mean transfer (" + time + ")",
        [&](const PipelineFigures& f) { return format(spec, f.flows[c].mean_time); });
    row(name + ": throughput (" + rate + ")",
        [&](const PipelineFigures& f) { return format("%.3f", f.flows[c].throughput); });
  }
  row("activations held at most, per stage", [](const PipelineFigures& f) {
    std::string text;
    for (int v : f.max_in_flight) (text += text.empty() ? "" : " ") += std::to_string(v);
    return text;
  });
  if (!abstract)
    row("peak memory per stage (MiB)", [](const PipelineFigures& f) {
      std::string text;
      for (double v : f.stage_mem_mib) (text += text.empty() ? "" : " ") += format("%.0f", v);
      return text;
    });
  std::size_t name_width = 0;
  std::vector<std::size_t> width;
  for (const auto& f : columns) width.push_back(f.label.size());
  for (const auto& [name, cells] : rows) {
    name_width = std::max(name_width, name.size());
    for (std::size_t k = 0; k < cells.size(); ++k) width[k] = std::max(width[k], cells[k].size());
  }
  std::ostringstream out;
  out << std::string(name_width, ' ');
  for (std::size_t k = 0; k < columns.size(); ++k)
    out << "  " << std::string(width[k] - columns[k].label.size(), ' ') << columns[k].label;
  out << "\n";
  for (const auto& [name, cells] : rows) {
    out << name << std::string(name_width - name.size(), ' ');
    for (std::size_t k = 0; k < cells.size(); ++k)
      out << "  " << std::string(width[k] - cells[k].size(), ' ') << cells[k];
    out << "\n";
  }
  return out.str();
}

nlohmann::ordered_json pipeline_summary(const Config& config, const std::vector<PipelineFigures>& columns) {
  const bool abstract = config.parallel->abstract_mode;
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  for (const auto& f : columns) {
    nlohmann::ordered_json run = {{"mean_step_time", f.step_mean}, {"p95_step_time", f.step_p95},
                                  {"total_time", f.total},         {"compute_share", f.compute_share},
                                  {"bubble_mean", f.bubble_mean},  {"bubble_p95", f.bubble_p95}};
    for (std::size_t c = 0; c < f.flows.size(); ++c) {
      const std::string& name = pipeline::flow_class_names()[c];
      run[name + "_volume"] = f.flows[c].volume;
      run[name + "_transfers"] = f.flows[c].transfers;
      run[name + "_mean_transfer_time"] = f.flows[c].mean_time;
      run[name + "_throughput"] = f.flows[c].throughput;
      run[name + "_utilisation"] = f.flows[c].utilisation;
    }
    run["max_in_flight"] = f.max_in_flight;
    if (!abstract) {
      run["stage_peak_mem_mib"] = f.stage_mem_mib;
      run["max_stage_peak_mem_mib"] = *std::max_element(f.stage_mem_mib.begin(), f.stage_mem_mib.end());
    }
    policies[f.label] = std::move(run);
  }
  nlohmann::ordered_json units =
      abstract ? nlohmann::ordered_json{{"time", "unit"}, {"volume", "unit"}, {"throughput", "unit/unit"}}
               : nlohmann::ordered_json{{"time", "ms"}, {"volume", "MB"}, {"throughput", "GB/s"}};
  nlohmann::ordered_json out = {{"config", config.resolved}, {"units", units}, {"steps", config.training.steps}};
  if (!abstract)
    out["stage_layers"] =
        pipeline::layers_per_stage(stage_partition(config), static_cast<int>(config.model->layers.size()));
  out["policies"] = std::move(policies);
  return out;
}

std::string pipeline_timeline(const Config& config, const std::vector<PipelineFigures>& columns) {
  const int G = config.parallel->setup.gpus(), S = config.parallel->setup.stages;
  const double to_us = config.parallel->abstract_mode ? 1e3 : 1e6;  // a unit shows as 1 ms
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (std::size_t k = 0; k < columns.size(); ++k) {
    for (int g = 0; g < G; ++g) {
      const auto pid = static_cast<long>(k) * G + g;
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", pid},
                        {"args",
                         {{"name", columns[k].label + " gpu " + std::to_string(g) + " (group " + std::to_string(g / S) +
                                       ", stage " + std::to_string(g % S) + ")"}}}});
      events.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"args", {{"sort_index", pid}}}});
      for (int lane = 0; lane <= pipeline::FLOW_CLASSES; ++lane)
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", pid},
                          {"tid", lane},
                          {"args",
                           {{"name", lane == 0 ? std::string("compute")
                                               : pipeline::flow_class_names()[static_cast<std::size_t>(lane - 1)]}}}});
    }
    for (const auto& s : columns[k].recording.spans) {
      nlohmann::ordered_json args = {{"step", s.step}};
      if (s.micro >= 0) args["micro_batch"] = s.micro;
      if (s.peer >= 0) args["to_gpu"] = s.peer;
      events.push_back({{"ph", "X"},
                        {"name", s.micro >= 0 ? s.name + " " + std::to_string(s.micro) : s.name},
                        {"cat", s.lane == 0 ? std::string("compute")
                                            : pipeline::flow_class_names()[static_cast<std::size_t>(s.lane - 1)]},
                        {"pid", static_cast<long>(k) * G + s.gpu},
                        {"tid", s.lane},
                        {"ts", std::round(s.start_s * to_us * 1e3) / 1e3},  // ns resolution
                        {"dur", std::round(s.dur_s * to_us * 1e3) / 1e3},
                        {"args", args}});
    }
  }
  return nlohmann::ordered_json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1) + "\n";
}

std::string link_series_csv(const Config& config, const std::vector<PipelineFigures>& columns, double bin) {
  constexpr double MAX_LINK_BINS = 1e6;                             // per column: tens of MB of CSV
  const double to_time = config.parallel->abstract_mode ? 1 : 1e3;  // s → ms (units)
  std::string out = std::string("policy,start_") + (config.parallel->abstract_mode ? "unit" : "ms") + ",end_" +
                    (config.parallel->abstract_mode ? "unit" : "ms");
  for (const auto& name : pipeline::flow_class_names()) out += "," + name;
  out += "\n";
  for (const auto& f : columns) {
    const auto& samples = f.recording.samples;
    if (samples.size() < 2) continue;
    const double span_s = samples.back().time_s;
    const double bin_s = bin > 0 ? bin / to_time : span_s / 200;
    // Bytes a class had moved at time t: linear between samples, the rates being constant there.
    std::size_t i = 0;
    auto moved = [&](double t, std::size_t c) {
      while (i + 1 < samples.size() && samples[i + 1].time_s <= t) ++i;
      if (i + 1 == samples.size()) return samples[i].moved[c];
      const auto &a = samples[i], &b = samples[i + 1];
      return a.moved[c] + (b.moved[c] - a.moved[c]) * (t - a.time_s) / (b.time_s - a.time_s);
    };
    std::array<double, pipeline::FLOW_CLASSES> before{};
    for (std::size_t c = 0; c < before.size(); ++c) before[c] = samples.front().moved[c];
    const double count = std::ceil(span_s / bin_s - 1e-9);
    if (!(count <= MAX_LINK_BINS))
      throw UsageError("--link-bin " + format("%g", bin) + ": " + format("%.3g", count) + " bins over the " +
                       format("%g", span_s * to_time) + (config.parallel->abstract_mode ? " units" : " ms") +
                       " recorded (" + f.label + "), at most " + format("%g", MAX_LINK_BINS) + ": a bin of at least " +
                       format("%.3g", span_s * to_time / MAX_LINK_BINS));
    const long bins = std::max(1L, static_cast<long>(count));
    for (long n = 0; n < bins; ++n) {
      const double end = n + 1 == bins ? span_s : (n + 1) * bin_s;
      // Bin edges to 10 digits, so that a long run's fine bins stay distinct.
      out += csv_field(f.label) + "," + format("%.10g", n * bin_s * to_time) + "," + format("%.10g", end * to_time);
      for (std::size_t c = 0; c < before.size(); ++c) {
        const double now = moved(end, c);
        out += "," + format("%.6g", (now - before[c]) / ((end - n * bin_s) * link_capacity(config)));
        before[c] = now;
      }
      out += "\n";
    }
  }
  return out;
}

std::string pipeline_steps_csv(const Config& config, const std::vector<PipelineFigures>& columns) {
  std::string out = std::string("policy,step,step_") + (config.parallel->abstract_mode ? "unit" : "ms") + ",bubble\n";
  for (const auto& f : columns)
    for (std::size_t t = 0; t < f.step_times.size(); ++t)
      out += csv_field(f.label) + "," + std::to_string(t) + "," + format("%.10g", f.step_times[t]) + "," +
             format("%.10g", f.bubbles[t]) + "\n";
  return out;
}

}  // namespace ddpsim
