#include "cli/config_args.hpp"

#include <filesystem>

#include "common/error.hpp"

namespace ddpsim::cli {

namespace {

// The items of a --policies list, as written; the config parser checks each.
std::vector<std::string> split_policy_list(const std::string& list) {
  std::vector<std::string> specs;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const auto comma = std::min(list.find(',', begin), list.size());
    const std::string item = list.substr(begin, comma - begin);
    if (item.empty()) throw UsageError("--policies \"" + list + "\": empty policy name");
    specs.push_back(item);
    begin = comma + 1;
  }
  return specs;
}

}  // namespace

void add_config_options(po::options_description& visible, po::options_description& hidden,
                        po::positional_options_description& positional) {
  visible.add_options()("set", po::value<std::vector<std::string>>()->composing(),
                        "KEY=VALUE: override a config value, e.g. training.world_size=8 (repeatable)")(
      "policies", po::value<std::string>(), "comma-separated policies replacing the config's")(
      "steps", po::value<int>(), "steps per policy (same as --set training.steps=N)")(
      "print-config", "print the resolved config as JSON and exit");
  hidden.add_options()("config", po::value<std::string>());
  positional.add("config", 1);
}

Config load_config(const po::variables_map& vm, const std::function<void(nlohmann::json&)>& adjust) {
  const std::string path = vm.count("config") ? vm["config"].as<std::string>() : "";
  nlohmann::json doc = read_config_json(path);
  if (vm.count("set"))
    for (const auto& assignment : vm["set"].as<std::vector<std::string>>()) apply_override(doc, assignment);
  if (vm.count("steps")) apply_override(doc, "training.steps=" + std::to_string(vm["steps"].as<int>()));
  if (vm.count("policies")) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& spec : split_policy_list(vm["policies"].as<std::string>())) list.push_back(spec);
    doc["policies"] = std::move(list);
  }
  if (adjust) adjust(doc);
  const std::string base_dir = path.empty() ? "" : std::filesystem::path(path).parent_path().string();
  return parse_config(doc, path.empty() ? "embedded default config" : path, base_dir,
                      vm.count("policies") ? "--policies" : "");
}

}  // namespace ddpsim::cli
