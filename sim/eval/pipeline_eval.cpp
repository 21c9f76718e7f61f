#include "eval/pipeline_eval.hpp"

#include <sstream>

#include "common/stats.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

pipeline::PipelineResult simulate_parallel(const Config& config) {
  const auto& p = *config.parallel;
  const std::vector<pipeline::StepWork> steps(static_cast<std::size_t>(config.training.steps),
                                              pipeline::abstract_step(p.setup, p.abstract));
  return pipeline::simulate_pipeline(p.setup, steps);
}

PipelineFigures pipeline_figures(const Config& config, const pipeline::PipelineResult& result) {
  PipelineFigures f;
  std::vector<double> step_s;
  double busy = 0;
  for (const auto& step : result.steps) {
    step_s.push_back(step.step_s);
    for (const auto& gpu : step.gpus) busy += gpu.busy_s;
  }
  f.step_mean = mean(step_s);
  f.step_p95 = percentile(step_s, 95);
  f.total = result.total_s;
  const int gpus = config.parallel->setup.gpus();
  f.compute_share = result.total_s > 0 ? busy / (gpus * result.total_s) : 0;
  for (std::size_t c = 0; c < f.flows.size(); ++c) {
    const auto& s = result.flows[c];
    auto& out = f.flows[c];
    out.volume = s.bytes / pipeline::ABSTRACT_BYTES_PER_UNIT;
    out.transfers = s.transfers;
    out.mean_time = s.transfers > 0 ? s.transfer_s / static_cast<double>(s.transfers) : 0;
    out.throughput = result.total_s > 0 ? out.volume / result.total_s : 0;
  }
  f.max_in_flight = result.max_in_flight;
  return f;
}

std::string pipeline_table(const Config& config, const PipelineFigures& f) {
  const auto& s = config.parallel->setup;
  std::ostringstream out;
  auto row = [&](const std::string& name, const std::string& value) {
    out << "  " << name << std::string(name.size() < 40 ? 40 - name.size() : 1, ' ') << value << "\n";
  };
  row("step time, mean (units)", format("%.4f", f.step_mean));
  row("step time, P95 (units)", format("%.4f", f.step_p95));
  row("compute share", format("%.4f", f.compute_share));
  row("bubble and waiting (1 - compute share)", format("%.4f", 1 - f.compute_share));
  for (std::size_t c = 0; c < f.flows.size(); ++c) {
    const auto& flow = f.flows[c];
    if (flow.transfers == 0) continue;
    const std::string& name = pipeline::flow_class_names()[c];
    row(name + ": transfers", std::to_string(flow.transfers));
    row(name + ": mean transfer time (units)", format("%.4f", flow.mean_time));
    row(name + ": throughput (units/unit)", format("%.4f", flow.throughput));
  }
  std::string in_flight;
  for (int v : f.max_in_flight) in_flight += (in_flight.empty() ? "" : " ") + std::to_string(v);
  row("activations held at most, per stage", in_flight);
  return out.str();
}

nlohmann::json pipeline_summary(const Config& config, const PipelineFigures& f) {
  nlohmann::json flows = nlohmann::json::object();
  for (std::size_t c = 0; c < f.flows.size(); ++c)
    flows[pipeline::flow_class_names()[c]] = {{"volume", f.flows[c].volume},
                                              {"transfers", f.flows[c].transfers},
                                              {"mean_transfer_time", f.flows[c].mean_time},
                                              {"throughput", f.flows[c].throughput}};
  return {{"config", config.resolved},        {"units", "abstract time units"},
          {"steps", config.training.steps},   {"step_time_mean", f.step_mean},
          {"step_time_p95", f.step_p95},      {"total_time", f.total},
          {"compute_share", f.compute_share}, {"flows", flows},
          {"max_in_flight", f.max_in_flight}};
}

}  // namespace ddpsim
