#include "cli/config_args.hpp"

#include <filesystem>
#include <iostream>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/split.hpp"

namespace ddpsim::cli {

namespace {

// The items of a --policies list, as written; the config parser checks each.
std::vector<std::string> split_policy_list(const std::string& list) {
  const auto specs = split_commas(list);
  for (const std::string& item : specs)
    if (item.empty()) throw InputError("--policies \"" + list + "\": empty policy name");
  return specs;
}

// --steps and --policies are shorthands for a --set, applied after every --set: beside a --set
// of the same key, one of two values the user wrote would go unused without a word ("--set
// training.steps=-1 --steps 3" ran 3 steps). Repeated --set follow the usual rule instead, the
// later wins, so that scripts can append overrides to a common list.
void refuse_shorthand_beside_set(const po::variables_map& vm) {
  if (!vm.count("set")) return;
  for (const auto& assignment : vm["set"].as<std::vector<std::string>>()) {
    const std::string key = assignment.substr(0, assignment.find('='));
    if (vm.count("steps") && key == "training.steps")
      throw UsageError("--steps and --set " + assignment + " both set training.steps: give one");
    if (vm.count("policies") && (key == "policies" || key.starts_with("policies.")))
      throw UsageError("--policies and --set " + assignment + " both set the policies: give one");
  }
}

}  // namespace

void add_config_options(po::options_description& visible, po::options_description& hidden,
                        po::positional_options_description& positional) {
  visible.add_options()("set", po::value<std::vector<std::string>>()->composing(),
                        "KEY=VALUE: override a config value, e.g. training.world_size=8 (repeatable)")(
      "policies", po::value<std::string>(), "comma-separated policies replacing the config's")(
      "steps", po::value<int>(), "steps per policy (same as --set training.steps=N)")(
      "print-config", "print the resolved config as JSON and exit");
  // config-json: a config given as a document (the Python package's dicts), its paths taken
  // from the current folder; the command line names files instead.
  hidden.add_options()("config", po::value<std::string>())("config-json", po::value<std::string>());
  positional.add("config", 1);
}

Config load_config(const po::variables_map& vm, const std::function<void(nlohmann::json&)>& adjust,
                   bool print_notes) {
  const std::string path = vm.count("config") ? vm["config"].as<std::string>() : "";
  const bool given = vm.count("config-json");
  if (given && !path.empty()) throw UsageError("a config is a file or a document, not both (" + path + ")");
  const std::string origin = given ? "config dict" : path.empty() ? "embedded default config" : path;
  nlohmann::json doc = given ? parse_json(vm["config-json"].as<std::string>(), origin) : read_config_json(path);
  if (given && !doc.is_object()) throw InputError(origin + ": expected an object of config sections");
  const nlohmann::json as_read = doc;
  std::string changes;  // the command line's own changes, to name them when they are at fault
  if (vm.count("set"))
    for (const auto& assignment : vm["set"].as<std::vector<std::string>>()) {
      apply_override(doc, assignment);
      changes += (changes.empty() ? "--set " : ", --set ") + assignment;
    }
  refuse_shorthand_beside_set(vm);  // after each --set's own syntax is checked
  if (vm.count("steps")) {
    const int steps = vm["steps"].as<int>();
    if (steps < 1) throw UsageError("--steps must be at least 1, got " + std::to_string(steps));
    const bool training_broken = doc.contains("training") && !doc["training"].is_object();  // parse names it
    if (const std::string why = training_broken ? "" : set_by_path(doc, "training.steps", steps); !why.empty())
      throw UsageError("--steps " + std::to_string(steps) + ": cannot set training.steps: " + why);
    changes += (changes.empty() ? "--steps " : ", --steps ") + std::to_string(steps);
  }
  if (vm.count("policies")) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& spec : split_policy_list(vm["policies"].as<std::string>())) list.push_back(spec);
    doc["policies"] = std::move(list);
  }
  if (adjust) adjust(doc);
  const std::string base_dir = path.empty() ? "" : std::filesystem::path(path).parent_path().string();
  const std::string policies_origin = vm.count("policies") ? "--policies" : "";
  try {
    Config config = parse_config(doc, origin, base_dir, policies_origin);
    if (print_notes)
      for (const std::string& note : config.notes) std::cerr << "note: " << note << "\n";
    return config;
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (changes.empty() || !what.starts_with(origin + ": ")) throw;
    nlohmann::json unchanged = as_read;
    if (vm.count("policies")) unchanged["policies"] = doc["policies"];
    if (adjust) adjust(unchanged);
    try {
      parse_config(unchanged, origin, base_dir, policies_origin);
    } catch (const InputError&) {
      throw e;  // the file (or the shared parts) at fault already
    }
    throw InputError(origin + " with " + changes + what.substr(origin.size()));
  }
}

bool print_config(const po::variables_map& vm, const Config& config) {
  if (!vm.count("print-config")) return false;
  for (const char* option : {"out", "timeline", "link-series"})
    if (vm.count(option))
      throw UsageError(std::string("--print-config prints the resolved config and runs nothing, so --") + option +
                       " would write nothing: leave one of them out");
  std::cout << config.printable().dump(2) << "\n";
  return true;
}

}  // namespace ddpsim::cli
