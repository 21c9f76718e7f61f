#include "cli/against.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/config_args.hpp"
#include "cli/progress.hpp"
#include "cli/replicates.hpp"
#include "cli/run_report.hpp"
#include "common/error.hpp"
#include "common/stats.hpp"
#include "eval/simulate.hpp"
#include "eval/step_interval.hpp"
#include "eval/uncertainty.hpp"
#include "report/outputs.hpp"

namespace ddpsim::cli {

namespace {

constexpr const char* kBaseLabel = "base";

// One column: its config, the data it draws and the --set values that made it.
struct Side {
  std::string label;
  std::vector<std::string> sets;
  Config config;
  std::unique_ptr<LengthSource> source;
  std::vector<int> dataset;
  std::vector<std::string> data_notes;  // the base's notes that need its data (Config::add_data_notes)
};

std::string joined_sets(const std::vector<std::string>& sets) {
  std::string out;
  for (const std::string& s : sets) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// "--against zero1 (training.data_parallel=zero1)"; a column labelled by its one value, once.
std::string column_name(const std::string& label, const std::vector<std::string>& sets) {
  const std::string values = joined_sets(sets);
  return "--against " + label + (values == label ? "" : " (" + values + ")");
}

// Runs `body` for a column, an input error then naming it.
template <class Body>
auto in_column(const Side& side, Body&& body) {
  if (side.label == kBaseLabel) return body();
  try {
    return body();
  } catch (const InputError& e) {
    throw InputError(column_name(side.label, side.sets) + ": " + e.what());
  }
}

// The config with the column's values set last; an error names the column.
Config load_variant(const po::variables_map& vm, const AgainstColumn& column) {
  const auto adjust = [&](nlohmann::json& doc) {
    for (const std::string& s : column.sets) apply_override(doc, s);
  };
  const std::string where = column_name(column.label, column.sets) + ": ";
  // The value's own messages speak of --set, which reads it: here it came from --against.
  const auto said = [](const std::string& what) { return what.starts_with("--set ") ? what.substr(6) : what; };
  try {
    return load_config(vm, adjust, /*print_notes=*/false);
  } catch (const UsageError& e) {
    throw UsageError(where + said(e.what()));
  } catch (const InputError& e) {
    throw InputError(where + said(e.what()));
  }
}

}  // namespace

void check_against(const po::variables_map& vm, const Config& base) {
  for (const char* option : {"timeline", "timeline-steps", "link-series", "link-bin"})
    if (vm.count(option) && !vm[option].defaulted())
      throw UsageError(std::string("--against sets configs side by side, and --") + option +
                       " is of one config's run: run each config with ddpsim compare --set KEY=VALUE --" + option);
  if (vm.count("out") && std::filesystem::exists(std::filesystem::path(vm["out"].as<std::string>()) / "steps.csv"))
    throw UsageError("--out " + vm["out"].as<std::string>() +
                     " holds a steps.csv, which --against does not write (its columns are different configs), so "
                     "it would stand beside a summary.json it does not belong to: give another folder");
  if (base.parallel)
    throw UsageError(
        "--against sets data-parallel configs side by side, and the config is a pipeline job (its parallel "
        "section): compare its settings with ddpsim sweep");
  if (!can_simulate_again(base))
    throw UsageError(std::string("--against simulates several configs in one process, and ") + kXmlOncePerProcess);
  if (base.policies.size() != 1) {
    std::string names;
    for (const auto& p : base.policies) names += (names.empty() ? "" : ", ") + p.label();
    throw UsageError("--against compares configs under one policy, and the config has " +
                     std::to_string(base.policies.size()) + " (" + names +
                     "): choose one with --policies, e.g. --policies " + base.policies.front().label());
  }
}

namespace {

// A column must differ from the base in its setting alone: the same policy, steps and seeds (its
// gain is then the setting's, not the plan's, the length's or the draw's), and a data-parallel run.
void check_column(const Config& base, const Config& config, const std::string& name) {
  if (config.policies.size() != 1 || config.policies.front().label() != base.policies.front().label())
    throw UsageError(name + " sets the policies: every column runs the config's " + base.policies.front().label() +
                     " (policies against each other: compare without --against)");
  if (config.training.steps != base.training.steps)
    throw UsageError(name + " sets training.steps: every column runs the config's " +
                     std::to_string(base.training.steps) + " steps (more steps: --steps N for all)");
  if (config.training.seed != base.training.seed)
    throw UsageError(name + " sets training.seed: every column runs at the config's seeds (another seed's run: "
                     "--set training.seed=N, or --replicates R for the seeds' range)");
  if (config.parallel)
    throw UsageError(name + " makes a pipeline job (a parallel section): --against sets data-parallel configs side "
                     "by side");
  if (!can_simulate_again(config)) throw UsageError(name + " loads a user XML platform, and " + kXmlOncePerProcess);
}

// The columns' configs, each checked to be a config of its own, with their data.
std::vector<Side> load_sides(const po::variables_map& vm, const Config& base) {
  std::vector<Side> sides;
  sides.push_back({kBaseLabel, {}, base, nullptr, {}, {}});
  for (const AgainstColumn& column : against_columns(vm["against"].as<std::vector<std::string>>())) {
    Config config = load_variant(vm, column);
    const std::string name = column_name(column.label, column.sets);
    check_column(base, config, name);
    for (const Side& other : sides)
      if (other.config.resolved == config.resolved)
        throw UsageError(name + " is the same config as " +
                         (other.label == kBaseLabel ? "the config itself" : "--against " + other.label) +
                         ": a column must change something");
    sides.push_back({column.label, column.sets, std::move(config), nullptr, {}, {}});
  }
  for (Side& side : sides) {
    side.source = make_length_source(side.config.data, side.config.training.max_length);
    side.dataset = in_column(side, [&] { return config_dataset(side.config, *side.source); });
    const std::vector<std::string> added = side.config.add_data_notes(side.dataset);
    if (side.label == kBaseLabel) side.data_notes = added;  // said by print_columns, as the columns' own
  }
  return sides;
}

// What each column changes: its values, its own notes, and the lines of its header that differ
// from the config's (the world, the sharding, the platform, ...).
void print_columns(const std::vector<Side>& sides) {
  for (const std::string& note : sides[0].data_notes) std::cerr << "note: " << note << "\n";
  std::ostringstream base_header;
  print_header(base_header, sides[0].config, *sides[0].source, "compare");
  std::cout << base_header.str();
  std::printf("columns, each under the policy %s and a run of its own:\n  %s: the config above\n",
              sides[0].config.policies.front().label().c_str(), kBaseLabel);
  std::vector<std::string> base_lines;
  std::istringstream in(base_header.str());
  for (std::string line; std::getline(in, line);) base_lines.push_back(line);
  for (std::size_t c = 1; c < sides.size(); ++c) {
    std::printf("  %s: %s\n", sides[c].label.c_str(), joined_sets(sides[c].sets).c_str());
    std::ostringstream header;
    print_header(header, sides[c].config, *sides[c].source, "compare");
    std::istringstream lines(header.str());
    std::string line;
    std::getline(lines, line);  // the origin, the same
    while (std::getline(lines, line))
      if (!line.empty() && std::find(base_lines.begin(), base_lines.end(), line) == base_lines.end())
        std::printf("    %s\n", line.substr(line.find_first_not_of(' ')).c_str());
    for (const std::string& note : sides[c].config.notes)
      if (std::find(sides[0].config.notes.begin(), sides[0].config.notes.end(), note) == sides[0].config.notes.end())
        std::cerr << "note (" << sides[c].label << "): " << note << "\n";
  }
  std::cout << "\n";
}

// Every column at seed + `offset`, with the compute noise or without, as the columns of one run.
SimulationRun simulate_sides(const std::vector<Side>& sides, int offset, bool quiet,
                             std::vector<std::string>* warnings) {
  SimulationRun all;
  for (const Side& side : sides) {
    Config config = quiet ? without_compute_noise(side.config) : side.config;
    config.training.seed += offset;
    SimulationRun one = in_column(side, [&] {
      const std::vector<int> dataset = offset == 0 ? side.dataset : config_dataset(config, *side.source);
      if (offset > 0 || quiet) return simulate_streamed(config, dataset, {0, 0}, {}, {});
      Progress progress("simulating " + side.label, "steps");
      return simulate_streamed(config, dataset, {0, 0}, std::ref(progress), {});
    });
    if (warnings)
      for (const std::string& w : capacity_warnings(config, one)) warnings->push_back(side.label + ": " + w);
    all.runs.push_back(std::move(one.runs.at(0)));
    all.runs.back().label = side.label;
    all.summaries.push_back(one.summaries.at(0));
  }
  return all;
}

bool any_noise(const std::vector<Side>& sides) {
  return std::any_of(sides.begin(), sides.end(), [](const Side& s) { return draws_compute_noise(s.config); });
}

// The seeds' table and each column's prediction interval, as compare --replicates gives a policy's.
Replicates seeds_report(const std::vector<Side>& sides, const SimulationRun& first, const SimulationRun* quiet,
                        int replicates) {
  std::vector<std::string> labels;
  for (const Side& side : sides) labels.push_back(side.label);
  SeedFigures f(std::move(labels), quiet != nullptr);
  f.column = "config";
  f.add(first);
  if (quiet) f.add(*quiet, true);
  Progress progress("replicates", "seeds");
  for (int r = 1; r < replicates; ++r) {
    as_replicate(sides[0].config.training.seed + r, r, replicates, [&] {
      f.add(simulate_sides(sides, r, false, nullptr));
      if (quiet) f.add(simulate_sides(sides, r, true, nullptr), true);
    });
    progress(r + 1, replicates);
  }
  std::vector<Config> configs;
  std::vector<std::vector<int>> datasets;
  for (const Side& side : sides) configs.push_back(side.config), datasets.push_back(side.dataset);
  const std::vector<std::vector<VariantRun>> variants = config_variant_runs(configs, datasets);
  Replicates out = replicates_result(sides[0].config, f, replicates,
                                     config_gain_predictions(configs, variants, first, quiet, f.gains),
                                     config_step_predictions(configs, variants, first, quiet, f.means));
  out.report += "  configs: each column is a run of its own, so the session term is that of runs apart (×" +
                format("%g", kRunsApartFactor) + "), and the model's variants are set on both sides of a gain\n";
  out.json["columns"] = std::move(out.json["policies"]);
  out.json.erase("policies");
  return out;
}

// summary.json: the config and the policy, then each column's values, config, provenance and
// figures, then the seeds' figures and intervals where there are replicates.
std::string summary(const std::vector<Side>& sides, const SimulationRun& sim, const std::vector<std::string>& warnings,
                    const nlohmann::ordered_json& seeds) {
  nlohmann::ordered_json doc;
  doc["config"] = sides[0].config.resolved;
  doc["provenance"] = provenance(sides[0].config, warnings);
  doc["policy"] = sides[0].config.policies.front().label();
  nlohmann::ordered_json columns = nlohmann::ordered_json::object();
  const bool any_micro = any_micro_batched(sim.summaries);
  for (std::size_t c = 0; c < sides.size(); ++c) {
    nlohmann::ordered_json column{{"sets", sides[c].sets}};
    if (c > 0) column["config"] = sides[c].config.resolved, column["provenance"] = sides[c].config.provenance();
    column.update(run_figures_json(sim.runs[c], sim.summaries[c], sim.summaries[0], any_micro));
    columns[sides[c].label] = std::move(column);
  }
  doc["columns"] = std::move(columns);
  if (!seeds.is_null()) doc["replicates"] = seeds;
  return doc.dump(2) + "\n";
}

}  // namespace

std::vector<AgainstColumn> against_columns(const std::vector<std::string>& values) {
  std::vector<AgainstColumn> columns;
  for (const std::string& value : values) {
    const auto eq = value.find('=');
    const auto colon = value.find(':');
    const bool labelled = colon != std::string::npos && (eq == std::string::npos || colon < eq);
    const std::string label = labelled ? value.substr(0, colon) : value;
    const std::string set = labelled ? value.substr(colon + 1) : value;
    const auto set_eq = set.find('=');
    if (label.empty() || set_eq == std::string::npos || set_eq == 0 || set_eq + 1 == set.size())
      throw UsageError("--against \"" + value +
                       "\": expected [LABEL:]KEY=VALUE, e.g. zero1:training.data_parallel=zero1 (values sharing a "
                       "LABEL make one column)");
    // A label heads a table column, padded by bytes: plain ASCII keeps it aligned and visible.
    if (labelled && !std::all_of(label.begin(), label.end(), [](unsigned char c) {
          return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '+' || c == '/';
        }))
      throw UsageError("--against \"" + value + "\": label \"" + label +
                       "\": expected ASCII letters, digits and - _ . + / (it heads a column)");
    if (label == kBaseLabel)
      throw UsageError("--against \"" + value + "\": \"" + kBaseLabel + "\" names the config's own column");
    auto it = std::find_if(columns.begin(), columns.end(), [&](const AgainstColumn& c) { return c.label == label; });
    if (it == columns.end()) it = columns.insert(columns.end(), {label, {}});
    const std::string key = set.substr(0, set_eq);
    for (const std::string& earlier : it->sets)
      if (earlier.substr(0, earlier.find('=')) == key)
        throw UsageError("--against \"" + value + "\": column " + label + " sets " + key + " already (" + earlier +
                         "): give each key once a column");
    it->sets.push_back(set);
  }
  return columns;
}

namespace {

// The registration of the columns' prediction: compare's, with each column's setting.
nlohmann::ordered_json column_registration(const std::string& file, const std::vector<Side>& sides,
                                           const RegisteredInputs& inputs, const nlohmann::ordered_json& seeds) {
  nlohmann::ordered_json doc = registration_json(file, sides[0].config, inputs, seeds);
  doc["what"] =
      "configs against each other, registered before their runs; score a column's run with ddpsim validate "
      "--registered THIS_FILE --column LABEL --measured RUN/steps.csv --baseline BASE_RUN/steps.csv";
  nlohmann::ordered_json columns = nlohmann::ordered_json::object();
  for (const Side& side : sides) columns[side.label] = column_setting(side.config, side.sets);
  doc["setting"]["columns"] = std::move(columns);
  return doc;
}

}  // namespace

int against_verb(const po::variables_map& vm, const Config& base, int replicates, const RegisteredInputs& inputs) {
  if (vm.count("out")) check_outputs({std::filesystem::path(vm["out"].as<std::string>()) / "summary.json"});
  const std::vector<Side> sides = load_sides(vm, base);
  if (vm.count("print-config")) {
    for (const char* option : {"out", "register"})
      if (vm.count(option))
        throw UsageError(std::string("--print-config prints the columns' configs and runs nothing, so --") + option +
                         " would write nothing: leave one of them out");
    nlohmann::ordered_json columns = nlohmann::ordered_json::object();
    for (const Side& side : sides) columns[side.label] = side.config.printable();
    std::cout << columns.dump(2) << "\n";
    return 0;
  }
  print_columns(sides);
  std::vector<std::string> warnings;
  const SimulationRun sim = simulate_sides(sides, 0, false, &warnings);
  std::cout << step_table(sim.runs, sim.summaries, /*changes=*/true);
  std::optional<SimulationRun> quiet;
  if (any_noise(sides)) {
    quiet = simulate_sides(sides, 0, true, nullptr);
    std::cout << noise_off_report(sim, *quiet);
  }
  Replicates seeds;
  if (replicates > 1) {
    seeds = seeds_report(sides, sim, quiet ? &*quiet : nullptr, replicates);
    std::cout << seeds.report;
  }
  for (const std::string& warning : warnings) std::cerr << "ddpsim compare: warning: " << warning << "\n";
  std::vector<std::pair<std::filesystem::path, std::string>> files;  // written together, or none
  if (vm.count("register")) {
    const std::string file = vm["register"].as<std::string>();
    files.emplace_back(file, column_registration(file, sides, inputs, seeds.json).dump(2) + "\n");
  }
  if (vm.count("out"))
    files.emplace_back(std::filesystem::path(vm["out"].as<std::string>()) / "summary.json",
                       summary(sides, sim, warnings, seeds.json));
  publish_and_say(files);
  return 0;
}

}  // namespace ddpsim::cli
