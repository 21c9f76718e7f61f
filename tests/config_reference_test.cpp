// docs/config.md against the parser: every key the parser reads must have a row there, and
// every row must name a key the parser reads. The parser's keys are recorded while it reads one
// config per branch that asks for keys of its own (each data source, platform topology and
// pipeline mode), so a key added to any of those branches fails here until it is documented.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/json_util.hpp"
#include "common/known_keys.hpp"
#include "eval/config.hpp"

using namespace ddpsim;

namespace {
const std::string source_dir = DDPSIM_SOURCE_DIR;
const std::string origin = "reference.json";

// Each a config that reaches a branch with keys of its own; all of them parse.
std::vector<nlohmann::json> branch_configs() {
  using nlohmann::json;
  std::vector<json> out;
  json d = default_config_json();
  d["simulation"] = {{"stragglers", json::array({{{"rank", 1}, {"factor", 1.2}}})}};
  out.push_back(d);
  for (const json& data : {json{{"source", "histogram"}, {"path", "traces/sst2-train-lengths.json"}},
                           json{{"source", "trace"}, {"path", "lengths.txt"}},
                           json{{"source", "tsv"}, {"path", "train.tsv"}, {"vocab", "vocab.txt"}},
                           json{{"source", "lognormal"}, {"mean", 20}, {"std", 10}, {"min", 2}, {"max", 200}}}) {
    json c = default_config_json();
    c["data"] = data;
    out.push_back(c);
  }
  for (const json& platform : {json{{"topology", "nvlink"}}, json{{"topology", "cluster"}, {"gpus_per_node", 2}},
                               json{{"topology", "xml"},
                                    {"file", "models/pcie-4x-rtx3090.xml"},
                                    {"hosts", {"gpu0", "gpu1", "gpu2", "gpu3"}}}}) {
    json c = default_config_json();
    c["platform"] = platform;
    out.push_back(c);
  }
  for (const char* file : {"configs/pipeline-study.json", "configs/llama3-8b-pipeline.json"}) {
    json c = read_config_json(source_dir + "/" + file);
    c["parallel"]["channels"] = {{"model", "shared"}, {"weights", {{"grad_sync", 0.1}}}, {"exclusive", "bwd_prop"}};
    if (c.contains("model")) c["model"] = "models/llama-3-8b-h100-packed.json";
    out.push_back(c);
  }
  return out;
}

// "training.world_size", "simulation.stragglers[].rank", "model": every key the parser read,
// less the sections themselves (an object path), which the page need not give a row of its own.
std::set<std::string> parser_keys(std::set<std::string>& sections) {
  KnownKeysRecorder recorder(origin);
  for (const nlohmann::json& config : branch_configs()) parse_config(config, origin, source_dir);
  std::set<std::string> keys;
  for (const auto& [object, names] : recorder.keys()) {
    if (!object.empty()) sections.insert(std::regex_replace(object, std::regex(R"(\[\])"), ""));
    for (const std::string& name : names) keys.insert(object.empty() ? name : object + "." + name);
  }
  for (const std::string& s : sections) keys.erase(s);
  return keys;
}

// The first cell of every table row that is one backquoted key: | `training.steps` | ...
std::set<std::string> documented_keys() {
  std::ifstream in(source_dir + "/docs/config.md");
  REQUIRE(in);
  std::set<std::string> keys;
  const std::regex row(R"(^\| `([A-Za-z_][A-Za-z0-9_.\[\]]*)` \|)");
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row)) keys.insert(m[1]);
  return keys;
}
}  // namespace

TEST_CASE("docs/config.md has a row for every key the config parser reads, and no other") {
  std::set<std::string> sections;
  const std::set<std::string> parser = parser_keys(sections);
  const std::set<std::string> documented = documented_keys();
  // The recorder saw the sections a config has (a guard against recording nothing).
  for (const char* s : {"data", "training", "simulation", "platform", "parallel", "parallel.channels"})
    CHECK_MESSAGE(sections.count(s), "the parser was not seen reading ", s);
  for (const std::string& key : parser)
    CHECK_MESSAGE(documented.count(key), "docs/config.md has no row for ", key);
  for (const std::string& key : documented)
    CHECK_MESSAGE((parser.count(key) || sections.count(key)), "docs/config.md documents ", key,
                  ", which the parser does not read");
}

TEST_CASE("the recorder names objects by path and ignores other documents") {
  KnownKeysRecorder recorder("a.json");
  const nlohmann::json doc = nlohmann::json::parse(R"({"x": 1})"), empty = nlohmann::json::object();
  JsonFields top(doc, "a.json");
  top.get<int>("x", 0);
  top.reject_unknown();
  JsonFields item(empty, "a.json: sim: list[3]");
  item.has("rank");
  item.reject_unknown({"factor"});
  JsonFields other(empty, "model.json: noise");
  other.has("sigma");
  other.reject_unknown();
  const std::map<std::string, std::set<std::string>> expected = {{"", {"x"}}, {"sim.list[]", {"factor", "rank"}}};
  CHECK(recorder.keys() == expected);
}
