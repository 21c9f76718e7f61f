#include "report/outputs.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/input_file.hpp"

namespace ddpsim {

const std::vector<std::string>& trace_columns() {
  static const std::vector<std::string> columns = {
      "step",   "rank",         "policy", "batch_size", "max_len",      "real_tokens", "padded_tokens", "fwd_ms",
      "bwd_ms", "comm_wait_ms", "opt_ms", "step_ms",    "peak_mem_mib", "loss",        "global_batch",  "loss_weight"};
  return columns;
}

const std::vector<std::string>& micro_batch_columns() {
  static const std::vector<std::string> columns = {"micro_batches", "micro_sizes", "micro_max_lens", "micro_tokens"};
  return columns;
}

namespace {

bool changes_batch(const TokenSummary& s, const TokenSummary& base) {
  return changes_samples_per_step(s.mean_global_batch, base.mean_global_batch);
}
std::string join(const std::vector<std::string>& items, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) (out += i ? separator : "") += items[i];
  return out;
}
}  // namespace

std::string micro_batch_fields(const RankStep& r) {
  const std::vector<MicroBatchShape> one = {{r.batch_size, r.max_len, r.real_tokens}};
  const auto& micro = r.micro.empty() ? one : r.micro;
  std::string sizes, lens, tokens;
  for (std::size_t i = 0; i < micro.size(); ++i) {
    const char* sep = i ? ";" : "";
    (sizes += sep) += std::to_string(micro[i].batch_size);
    (lens += sep) += std::to_string(micro[i].max_len);
    (tokens += sep) += std::to_string(micro[i].real_tokens);
  }
  std::string out = std::to_string(micro.size());
  for (const std::string* list : {&sizes, &lens, &tokens}) (out += ',') += *list;
  return out;
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string format(const char* spec, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, spec, value);
  return buffer;
}

TraceColumns TraceColumns::of(const std::vector<PolicyRun>& runs) {
  TraceColumns c;
  for (const auto& run : runs) {
    c.packed |= run.packed;
    for (const RankStep& r : run.rows) {
      c.allreduce |= !std::isnan(r.allreduce_ms);
      c.concurrent |= !std::isnan(r.concurrent_allreduce_bytes);
      c.micro |= !r.micro.empty();
    }
  }
  return c;
}

TraceWriter::TraceWriter(std::ostream& out, const Metadata& metadata, TraceColumns columns) : out_(out), c_(columns) {
  std::string head;
  for (const auto& [key, value] : metadata) {
    // One line each: a control byte in a value (a path with a newline) is written as \xNN.
    head += "# " + key + "=";
    for (const char ch : value)
      if (const auto byte = static_cast<unsigned char>(ch); byte < 0x20 || byte == 0x7f)
        head += hex_escape(byte);
      else
        head += ch;
    head += '\n';
  }
  head += join(trace_columns(), ",");
  if (c_.allreduce) head += ",allreduce_bytes,allreduce_ms";
  if (c_.concurrent) head += ",concurrent_allreduce_bytes";
  if (c_.micro) (head += ',') += join(micro_batch_columns(), ",");
  if (c_.packed) head += c_.micro ? ",sq_tokens,micro_sq_tokens" : ",sq_tokens";
  out_ << head << '\n';
}

void TraceWriter::write(const std::string& policy, std::span<const RankStep> rows) {
  // A missing measurement is an empty field, never 0; a wait that rounds to zero is 0.0000, never -0.0000.
  auto ms = [](double v) { return std::isnan(v) ? std::string() : format("%.4f", shown(v, 4)); };
  std::string out;
  for (const RankStep& r : rows) {
    out.clear();
    out += std::to_string(r.step) + "," + std::to_string(r.rank) + "," + policy + "," + std::to_string(r.batch_size) +
           "," + std::to_string(r.max_len) + "," + std::to_string(r.real_tokens) + "," +
           std::to_string(r.padded_tokens) + "," + ms(r.fwd_ms) + "," + ms(r.bwd_ms) + "," + ms(r.comm_wait_ms) + "," +
           ms(r.opt_ms) + "," + ms(r.step_ms) + "," +
           (std::isnan(r.peak_mem_mib) ? std::string() : format("%.1f", r.peak_mem_mib)) + "," +
           (std::isnan(r.loss) ? std::string() : format("%.6f", r.loss)) + "," +
           (r.global_batch > 0 ? std::to_string(r.global_batch) : std::string()) + "," + format("%.6f", r.loss_weight);
    if (c_.allreduce) {
      out += ',';
      if (!std::isnan(r.allreduce_bytes)) out += format("%.0f", r.allreduce_bytes);
      out += ',';
      out += ms(r.allreduce_ms);
    }
    if (c_.concurrent) {
      out += ',';
      if (!std::isnan(r.concurrent_allreduce_bytes)) out += format("%.0f", r.concurrent_allreduce_bytes);
    }
    if (c_.micro) (out += ',') += micro_batch_fields(r);
    if (c_.packed) (out += ',') += std::to_string(r.sq_tokens);
    if (c_.packed && c_.micro) {
      out += ',';
      if (r.micro.empty()) out += std::to_string(r.sq_tokens);
      for (std::size_t i = 0; i < r.micro.size(); ++i) (out += i ? ";" : "") += std::to_string(r.micro[i].sq_tokens);
    }
    out += '\n';
    out_ << out;
  }
}

std::string trace_csv(const std::vector<PolicyRun>& runs, const Metadata& metadata) {
  std::ostringstream out;
  TraceWriter writer(out, metadata, TraceColumns::of(runs));
  for (const auto& run : runs) writer.write(run.label, run.rows);
  return out.str();
}

nlohmann::ordered_json run_figures_json(const PolicyRun& run, const TokenSummary& s, const TokenSummary& first,
                                        bool any_micro) {
  nlohmann::ordered_json p;
  auto number = [](double v) { return std::isnan(v) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(v); };
  p["steps"] = s.steps;
  p["mean_max_step_ms"] = number(s.mean_max_step_ms);
  p["p95_max_step_ms"] = number(s.p95_max_step_ms);
  p["mean_samples_per_s"] = number(s.mean_samples_per_s);
  p["p95_samples_per_s"] = number(s.p95_samples_per_s);
  p["mean_tokens_per_s"] = number(s.mean_tokens_per_s);
  p["p95_tokens_per_s"] = number(s.p95_tokens_per_s);
  p["mean_real_tokens_per_s"] = number(s.mean_real_tokens_per_s);
  p["mean_std_step_ms"] = number(s.mean_std_step_ms);
  p["mean_std_compute_ms"] = number(s.mean_std_compute_ms);
  p["mean_std_padded_tokens"] = s.mean_std_padded_tokens;
  p["mean_std_peak_mem_mib"] = number(s.mean_std_peak_mem_mib);
  p["mean_sched_us"] = s.mean_sched_us;
  p["p95_sched_us"] = s.p95_sched_us;
  p["solver"] = run.solver.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(run.solver);
  p["mean_max_padded_tokens"] = s.mean_max_padded_tokens;
  p["p95_max_padded_tokens"] = s.p95_max_padded_tokens;
  p["padding_waste"] = s.padding_waste;
  p["samples_consumed"] = s.samples;
  p["mean_global_batch"] = s.mean_global_batch;
  if (any_micro) p["mean_micro_batches"] = s.mean_micro_batches;
  p["distinct_shapes_per_rank"] = s.mean_distinct_shapes;
  p["changes_samples_per_step"] = changes_batch(s, first);
  if (s.timed()) {
    p["mean_max_compute_ms"] = s.mean_max_compute_ms;
    p["mean_comm_wait_ms"] = s.mean_comm_wait_ms;
    p["mean_max_peak_mem_mib"] = s.mean_max_peak_mem_mib;
  }
  return p;
}

bool any_micro_batched(const std::vector<TokenSummary>& summaries) {
  return std::any_of(summaries.begin(), summaries.end(), [](const TokenSummary& s) { return s.micro_batched; });
}

std::string summary_json(const nlohmann::json& config, const std::vector<PolicyRun>& runs,
                         const std::vector<TokenSummary>& summaries, const nlohmann::json& provenance,
                         const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json policies = nlohmann::ordered_json::object();
  const bool any_micro = any_micro_batched(summaries);
  for (std::size_t i = 0; i < runs.size(); ++i)
    policies[runs[i].label] = run_figures_json(runs[i], summaries[i], summaries.front(), any_micro);
  nlohmann::ordered_json doc;
  doc["config"] = config;
  if (!provenance.is_null()) doc["provenance"] = provenance;
  doc["policies"] = std::move(policies);
  if (extra.is_object())
    for (const auto& [key, value] : extra.items()) doc[key] = value;
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
    if (!first && base != 0) text += " (" + format("%+.1f", shown(100.0 * (v - base) / base, 1)) + "%)";
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

std::string step_table(const std::vector<PolicyRun>& runs, const std::vector<TokenSummary>& summaries, bool changes) {
  struct Row {
    const char* name;
    double TokenSummary::*field;
    const char* spec;
  };
  static const Row rows[] = {
      {"max step time, mean (ms)", &TokenSummary::mean_max_step_ms, "%.2f"},
      {"max step time, P95 (ms)", &TokenSummary::p95_max_step_ms, "%.2f"},
      {"samples/s, mean", &TokenSummary::mean_samples_per_s, "%.1f"},
      {"samples/s, P95", &TokenSummary::p95_samples_per_s, "%.1f"},
      {"tokens/s, mean", &TokenSummary::mean_tokens_per_s, "%.0f"},
      {"tokens/s, P95", &TokenSummary::p95_tokens_per_s, "%.0f"},
      {"real tokens/s, mean", &TokenSummary::mean_real_tokens_per_s, "%.0f"},
      {"std of step time, mean (ms)", &TokenSummary::mean_std_step_ms, "%.3f"},
      {"max compute (fwd+bwd), mean (ms)", &TokenSummary::mean_max_compute_ms, "%.2f"},
      {"std of compute, mean (ms)", &TokenSummary::mean_std_compute_ms, "%.3f"},
      {"exposed comm wait, mean (ms)", &TokenSummary::mean_comm_wait_ms, "%.2f"},
      {"max padded tokens, mean", &TokenSummary::mean_max_padded_tokens, "%.1f"},
      {"std of padded tokens, mean", &TokenSummary::mean_std_padded_tokens, "%.1f"},
      {"max peak memory, mean (MiB)", &TokenSummary::mean_max_peak_mem_mib, "%.0f"},
      {"std of peak memory, mean (MiB)", &TokenSummary::mean_std_peak_mem_mib, "%.1f"},
      {"distinct (b, L) shapes per rank", &TokenSummary::mean_distinct_shapes, "%.1f"},
  };
  std::vector<Row> shown(std::begin(rows), std::end(rows));
  // Gradient accumulation adds its own row; runs without it keep the study's table.
  if (std::any_of(summaries.begin(), summaries.end(), [](const TokenSummary& s) { return s.micro_batched; }))
    shown.push_back({"micro-batches per rank, mean", &TokenSummary::mean_micro_batches, "%.2f"});
  std::vector<std::vector<std::string>> cells(shown.size() + 1);
  cells[0].push_back("");
  for (std::size_t r = 0; r < shown.size(); ++r) cells[r + 1].push_back(shown[r].name);
  bool marked = false;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const bool unlike = i > 0 && changes_batch(summaries[i], summaries[0]);
    marked |= unlike;
    cells[0].push_back(runs[i].label + (unlike ? " *" : ""));
    for (std::size_t r = 0; r < shown.size(); ++r) {
      const double v = summaries[i].*shown[r].field, base = summaries[0].*shown[r].field;
      std::string text = format(shown[r].spec, v);
      if (changes && i > 0 && base != 0)
        text += " (" + format("%+.1f", ddpsim::shown(100.0 * (v - base) / base, 1)) + "%)";
      cells[r + 1].push_back(text);
    }
  }
  std::vector<std::size_t> width(runs.size() + 1, 0);
  for (const auto& line : cells)
    for (std::size_t c = 0; c < line.size(); ++c) width[c] = std::max(width[c], line[c].size());
  std::string out;
  for (const auto& line : cells) {
    for (std::size_t c = 0; c < line.size(); ++c) {
      const std::string pad(width[c] - line[c].size(), ' ');
      out += c == 0 ? line[c] + pad : "  " + pad + line[c];
    }
    out += "\n";
  }
  if (marked)
    out += "* takes another number of samples per step than " + runs.front().label +
           ": its step time is not comparable; samples/s and real tokens/s are\n";
  return out;
}

void write_outputs(const std::filesystem::path& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::pair<std::filesystem::path, std::string>> paths;
  for (const auto& [name, content] : files) paths.emplace_back(dir / name, content);
  publish(paths);
}

void check_output_path(const std::filesystem::path& path, const std::string& option) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw UsageError(option + " " + path.string() + ": is a folder, expected a file name");
  const auto name = path.filename();
  if (name.empty() || name == "." || name == "..")  // "dir/" names a folder even before it exists
    throw UsageError(option + " " + path.string() + ": names a folder, expected a file name");
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw UsageError(option + " " + path.string() + ": is a device or a pipe, expected a file name");
  // The nearest folder on the way that exists must be a folder we may write in: no output can
  // go there otherwise, so say it before the work.
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  for (auto parent = absolute.parent_path(); !parent.empty(); parent = parent.parent_path()) {
    if (std::filesystem::exists(parent, ec)) {
      if (!std::filesystem::is_directory(parent, ec))
        throw UsageError(option + " " + path.string() + ": " + parent.string() + " is not a folder");
      if (::access(parent.c_str(), W_OK | X_OK) != 0)
        throw InputError(option + " " + path.string() + ": cannot write in " + parent.string() + " (" +
                         std::strerror(errno) + ")");
      break;
    }
    if (parent == parent.parent_path()) break;
  }
}

void check_outputs(const std::vector<std::filesystem::path>& paths) {
  std::set<std::filesystem::path> seen;
  for (const auto& path : paths) {
    check_output_path(path, "output");
    check_not_input(path);
    // One spelling per file: ./o/x and o/x, or a/../x and x, before the folders exist.
    std::error_code ec;
    if (!seen.insert(std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec).lexically_normal())
             .second)
      throw UsageError(path.string() + ": named twice among this command's outputs");
  }
}

void publish(const std::vector<std::pair<std::filesystem::path, std::string>>& files) {
  publish(files, {});
}

void publish(const std::vector<std::pair<std::filesystem::path, std::string>>& files,
             std::vector<std::unique_ptr<AtomicFile>> written) {
  for (const auto& [path, content] : files) check_output_path(path, "output");
  std::vector<std::unique_ptr<AtomicFile>> pending = std::move(written);
  for (const auto& [path, content] : files) {
    pending.push_back(std::make_unique<AtomicFile>(path));
    pending.back()->stream() << content;
  }
  for (const auto& file : pending)
    if (!file->stream().flush()) throw InputError(file->target().string() + ": write failed (disk full?)");
  // The previous set goes before the new one moves in: a kill between two renames leaves an
  // incomplete set, never new files beside old ones.
  for (const auto& file : pending) {
    std::error_code ignored;
    std::filesystem::remove(file->target(), ignored);
  }
  for (auto& file : pending) file->commit();
}

}  // namespace ddpsim
