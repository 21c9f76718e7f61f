#include "sweep/cells.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/input_file.hpp"
#include "common/json_util.hpp"
#include "pipeline/network.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"

namespace fs = std::filesystem;

namespace ddpsim {

namespace {

// The summary metrics results.csv carries, in column order: summary.json's, less the measured
// decision times, which differ from run to run.
constexpr const char* METRICS[] = {"steps",
                                   "mean_max_step_ms",
                                   "p95_max_step_ms",
                                   "mean_samples_per_s",
                                   "p95_samples_per_s",
                                   "mean_tokens_per_s",
                                   "p95_tokens_per_s",
                                   "mean_std_step_ms",
                                   "mean_std_compute_ms",
                                   "mean_std_padded_tokens",
                                   "mean_std_peak_mem_mib",
                                   "mean_max_padded_tokens",
                                   "p95_max_padded_tokens",
                                   "padding_waste",
                                   "samples_consumed",
                                   "mean_global_batch",
                                   "mean_max_compute_ms",
                                   "mean_comm_wait_ms",
                                   "mean_max_peak_mem_mib"};
// A pipeline job's (pipeline_summary), with the flow classes' figures.
const std::vector<std::string>& pipeline_metrics() {
  static const std::vector<std::string> metrics = [] {
    std::vector<std::string> out = {"mean_step_time", "p95_step_time", "total_time",
                                    "compute_share",  "bubble_mean",   "bubble_p95"};
    for (const auto& c : pipeline::flow_class_names())
      for (const char* what : {"_volume", "_transfers", "_mean_transfer_time", "_throughput", "_utilisation"})
        out.push_back(c + what);
    out.push_back("max_stage_peak_mem_mib");
    return out;
  }();
  return metrics;
}

// The figures results.csv takes from a cell: a pipeline job's, or a DDP run's.
std::vector<std::string> cell_metrics(bool pipeline) {
  return pipeline ? pipeline_metrics() : std::vector<std::string>(std::begin(METRICS), std::end(METRICS));
}

std::string number_field(const nlohmann::ordered_json& value) {
  if (!value.is_number()) return "";
  char text[32];
  std::snprintf(text, sizeof text, "%.10g", value.get<double>());
  return text;
}

// 100 · (1 − value / baseline): the share of the baseline's step time a policy saves; per
// sample (each time over its mean global batch) where `per_sample`.
std::string gain_field(const nlohmann::ordered_json& value, const nlohmann::ordered_json& baseline, bool per_sample,
                       const nlohmann::ordered_json& batch, const nlohmann::ordered_json& baseline_batch) {
  if (!value.is_number() || !baseline.is_number() || baseline.get<double>() <= 0) return "";
  const double scale = per_sample ? baseline_batch.get<double>() / batch.get<double>() : 1.0;
  return number_field(100 * (1 - value.get<double>() * scale / baseline.get<double>()));
}

// Whether a cell's policy gains per sample (report/policy_run.hpp), from its summary's batch.
bool per_sample_gain(const nlohmann::ordered_json& p, const nlohmann::ordered_json& first) {
  const char* key = "mean_global_batch";
  if (!p.contains(key) || !first.contains(key) || !p[key].is_number() || !first[key].is_number()) return false;
  return changes_samples_per_step(p[key].get<double>(), first[key].get<double>());
}

}  // namespace

std::optional<nlohmann::ordered_json> load_cell(const fs::path& cells_dir, const std::string& hash) {
  const fs::path path = cells_dir / (hash + ".json");
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const std::string text = read_own_file(path.string(), "sweep cell");
  // Values nested past MAX_JSON_DEPTH are dropped (nlohmann copies recursively): the cell then
  // fails the checks below like any edited one.
  const auto shallow = [](int depth, nlohmann::ordered_json::parse_event_t, nlohmann::ordered_json&) {
    return depth <= MAX_JSON_DEPTH;
  };
  auto doc = nlohmann::ordered_json::parse(text, shallow, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("config") || !doc.contains("policies") ||
      !doc["policies"].is_object() || doc["policies"].empty())
    throw InputError(path.string() +
                     ": not a sweep cell (expected the {\"config\", \"policies\"} of a summary.json); "
                     "remove it and the sweep runs the cell again");
  const std::string damaged = " (an edited or damaged file); remove it and the sweep runs the cell again";
  const bool pipeline = doc["config"].contains("parallel");
  if (fnv1a64_hex(doc["config"].dump()) != hash)
    throw InputError(path.string() + ": holds another config than its name says" + damaged);
  // Its figures go into results.csv as they are: each of the config's policies once, every
  // metric a number ≥ 0 (or null), every metric of a DDP run present.
  const auto policies = doc["config"].value("policies", nlohmann::ordered_json());
  if (!pipeline && policies.is_array() && policies.size() != doc["policies"].size())
    throw InputError(path.string() + ": " + std::to_string(doc["policies"].size()) + " policies, its config " +
                     std::to_string(policies.size()) + damaged);
  const std::vector<std::string> metrics = cell_metrics(pipeline);
  for (const auto& [label, figures] : doc["policies"].items())
    for (const auto& metric : metrics) {
      const bool present = figures.is_object() && figures.contains(metric);
      if (!present && pipeline) continue;
      const auto& v = present ? figures[metric] : nlohmann::ordered_json();
      if (!present || !(v.is_null() || (v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0)))
        throw InputError(path.string() + ": policy " + printable(label) + ": " + metric +
                         (present ? " is " + printable(v.dump()) + ", not a number ≥ 0" : " is missing") + damaged);
    }
  // A DDP cell ran its config's steps, every policy all of them.
  const auto& training = doc["config"].value("training", nlohmann::ordered_json());
  if (!pipeline && training.is_object() && training.contains("steps"))
    for (const auto& [label, figures] : doc["policies"].items())
      if (figures["steps"] != training["steps"])
        throw InputError(path.string() + ": policy " + printable(label) + ": steps is " +
                         printable(figures["steps"].dump()) + ", its config's training.steps " +
                         training["steps"].dump() + damaged);
  return doc;
}

std::string results_csv(const SweepGrid& grid, const std::vector<nlohmann::ordered_json>& cells) {
  // Every cell sets the swept keys and no more, so all are pipeline jobs (a `parallel` section) or none are.
  const bool pipelines = !cells.empty() && cells.front()["config"].contains("parallel");
  const std::vector<std::string> metrics = cell_metrics(pipelines);
  const std::array<std::string, 2> gains = pipelines
                                               ? std::array<std::string, 2>{"mean_step_time", "p95_step_time"}
                                               : std::array<std::string, 2>{"mean_max_step_ms", "p95_max_step_ms"};
  std::string out = "cell";
  const auto add = [&out](const std::string& field) {
    out += ',';
    out += field;
  };
  for (const auto& key : grid.keys) add(csv_field(key));
  add("policy");
  for (const auto& metric : metrics) add(metric);
  out += ",gain_pct,p95_gain_pct,gain_per,gain_lo95,gain_hi95,gain_mostly,step_lo95,step_hi95,step_mostly\n";
  for (std::size_t i = 0; i < grid.cells.size(); ++i) {
    const auto& policies = cells[i]["policies"];
    const auto& first = policies.begin().value();
    for (const auto& [label, p] : policies.items()) {
      out += grid.cells[i].hash;
      for (const auto& value : grid.cells[i].values) add(csv_field(value_text(value)));
      add(csv_field(label));
      for (const auto& metric : metrics) add(p.contains(metric) ? number_field(p[metric]) : "");
      const bool per_sample = !pipelines && per_sample_gain(p, first);
      for (const auto& metric : gains)
        add(p.contains(metric) && first.contains(metric)
                ? gain_field(p[metric], first[metric], per_sample, p["mean_global_batch"], first["mean_global_batch"])
                : "");
      add(per_sample ? "sample" : "step");
      // A prediction interval's bounds and widest source, where the cell recorded one.
      const auto interval = [&, &policy = label](const char* key, const char* bounds) {
        const auto& predicted = cells[i].value(key, nlohmann::ordered_json::object());
        if (!predicted.contains(policy)) return void(out += ",,,");
        add(number_field(predicted[policy][bounds][0]));
        add(number_field(predicted[policy][bounds][1]));
        add(csv_field(predicted[policy]["mostly"].get<std::string>()));
      };
      interval("gain_predictions", "prediction_interval");
      interval("step_predictions", "prediction_interval_ms");
      out += '\n';
    }
  }
  return out;
}

std::vector<nlohmann::ordered_json> collect_cells(const SweepGrid& grid, const std::vector<fs::path>& dirs) {
  std::vector<nlohmann::ordered_json> cells;
  std::vector<std::size_t> missing;
  for (const auto& cell : grid.cells) {
    std::optional<nlohmann::ordered_json> found;
    for (const auto& dir : dirs)
      if ((found = load_cell(dir / "cells", cell.hash))) break;
    if (found) {
      cells.push_back(std::move(*found));
    } else {
      missing.push_back(cell.index);
      cells.emplace_back();
    }
  }
  if (!missing.empty()) {
    std::string where;
    for (const auto& dir : dirs) where += (where.empty() ? "" : ", ") + dir.string();
    std::string which;
    for (std::size_t i = 0; i < std::min<std::size_t>(missing.size(), 3); ++i)
      which += (i ? "; " : "") + grid.describe(grid.cells[missing[i]]);
    throw InputError(std::to_string(missing.size()) + " of " + std::to_string(grid.cells.size()) +
                     " cells are in none of " + where + ": " + which + (missing.size() > 3 ? "; …" : "") +
                     " (run the missing shards, or rerun the sweep there)");
  }
  return cells;
}

std::vector<std::string> cell_note_lines(const SweepGrid& grid, const std::vector<nlohmann::ordered_json>& cells) {
  CellNotes notes;
  const std::string unknown = "cells written by an earlier ddpsim keep no notes; remove their files to run them again";
  for (std::size_t i = 0; i < cells.size(); ++i) {
    const auto& cell = cells[i];
    const auto provenance = cell.value("provenance", nlohmann::ordered_json());
    // A pipeline cell without one is in time units (abstract), or from before its data had notes.
    if (provenance.is_null() && cell["config"].contains("parallel")) continue;
    const auto kept = provenance.is_object() ? provenance.value("notes", nlohmann::ordered_json::array())
                                             : nlohmann::ordered_json();
    if (!kept.is_array()) {
      add_cell_note(notes, unknown, grid.cells[i].index);
      continue;
    }
    for (const auto& note : kept) {
      if (!note.is_string()) continue;
      // Raw, as the grid keeps its own: note_lines escapes what it writes.
      const std::string text = note.get<std::string>();
      if (!has_cell_note(grid.notes, text)) add_cell_note(notes, text, grid.cells[i].index);
    }
  }
  return note_lines(notes, cells.size());
}

}  // namespace ddpsim
