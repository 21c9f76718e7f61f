#include "eval/outputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

namespace ddpsim {

const std::vector<std::string>& trace_columns() {
  static const std::vector<std::string> columns = {
      "step",   "rank",         "policy", "batch_size", "max_len",      "real_tokens", "padded_tokens", "fwd_ms",
      "bwd_ms", "comm_wait_ms", "opt_ms", "step_ms",    "peak_mem_mib", "loss",        "global_batch",  "loss_weight"};
  return columns;
}

namespace {

std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

}  // namespace

std::string balance_trace_csv(const std::vector<PolicyRun>& runs, const Metadata& metadata) {
  std::string out;
  for (const auto& [key, value] : metadata) out += "# " + key + "=" + value + "\n";
  for (std::size_t i = 0; i < trace_columns().size(); ++i) out += (i ? "," : "") + trace_columns()[i];
  out += "\n";
  for (const auto& run : runs) {
    for (const RankStep& r : run.rows) {
      // Timing, memory and loss are not modelled at token level: empty, never 0.
      out += std::to_string(r.step) + "," + std::to_string(r.rank) + "," + run.label + "," +
             std::to_string(r.batch_size) + "," + std::to_string(r.max_len) + "," + std::to_string(r.real_tokens) +
             "," + std::to_string(r.padded_tokens) + ",,,,,,,," + std::to_string(r.global_batch) + "," +
             format("%.6f", r.loss_weight) + "\n";
    }
  }
  return out;
}

std::string balance_summary_json(const Config& config, const std::vector<PolicyRun>& runs,
                                 const std::vector<TokenSummary>& summaries) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const TokenSummary& s = summaries[i];
    nlohmann::ordered_json p;
    p["steps"] = s.steps;
    for (const char* timed : {"mean_max_step_ms", "p95_max_step_ms", "mean_samples_per_s", "p95_samples_per_s",
                              "mean_tokens_per_s", "p95_tokens_per_s", "mean_std_step_ms", "mean_std_compute_ms"})
      p[timed] = nullptr;
    p["mean_std_padded_tokens"] = s.mean_std_padded_tokens;
    p["mean_std_peak_mem_mib"] = nullptr;
    p["mean_sched_us"] = s.mean_sched_us;
    p["p95_sched_us"] = s.p95_sched_us;
    p["solver"] = runs[i].solver.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(runs[i].solver);
    p["mean_max_padded_tokens"] = s.mean_max_padded_tokens;
    p["p95_max_padded_tokens"] = s.p95_max_padded_tokens;
    p["padding_waste"] = s.padding_waste;
    p["samples_consumed"] = s.samples;
    p["mean_global_batch"] = s.mean_global_batch;
    policies[runs[i].label] = std::move(p);
  }
  nlohmann::ordered_json doc;
  doc["config"] = config.resolved;
  doc["policies"] = std::move(policies);
  return doc.dump(2) + "\n";
}

std::string balance_table(const std::vector<PolicyRun>& runs, const std::vector<TokenSummary>& summaries) {
  std::size_t name_width = 6;
  for (const auto& run : runs) name_width = std::max(name_width, run.label.size());
  auto cell = [](const std::string& text, std::size_t w) {
    return text.size() >= w ? " " + text : std::string(w - text.size(), ' ') + text;
  };
  // A value, and for every policy after the first its change against the first.
  auto compared = [&](double v, double base, bool first) {
    std::string text = format("%.1f", v);
    if (!first && base != 0) text += " (" + format("%+.1f", 100.0 * (v - base) / base) + "%)";
    return cell(text, 17);
  };
  std::string out = std::string(name_width, ' ');
  out.replace(0, 6, "policy");
  for (const char* header : {"max padded mean", "max padded P95", "std padded mean"}) out += cell(header, 17);
  out += cell("waste %", 9) + cell("batch", 8) + cell("samples", 9) + cell("decide us", 11) + "\n";
  const TokenSummary& base = summaries.front();
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const TokenSummary& s = summaries[i];
    std::string line = runs[i].label;
    line.resize(name_width, ' ');
    line += compared(s.mean_max_padded_tokens, base.mean_max_padded_tokens, i == 0);
    line += compared(s.p95_max_padded_tokens, base.p95_max_padded_tokens, i == 0);
    line += compared(s.mean_std_padded_tokens, base.mean_std_padded_tokens, i == 0);
    line += cell(format("%.1f", 100.0 * s.padding_waste), 9) + cell(format("%.1f", s.mean_global_batch), 8) +
            cell(std::to_string(s.samples), 9) + cell(format("%.2f", s.mean_sched_us), 11);
    out += line + "\n";
  }
  return out;
}

void write_outputs(const std::filesystem::path& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(dir.string() + ": cannot create output folder: " + ec.message());
  std::vector<std::unique_ptr<AtomicFile>> pending;
  for (const auto& [name, content] : files) {
    pending.push_back(std::make_unique<AtomicFile>(dir / name));
    pending.back()->stream() << content;
  }
  for (auto& file : pending) file->commit();
}

}  // namespace ddpsim
