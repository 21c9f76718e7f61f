#include "calib/pooled_levels.hpp"

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/json_util.hpp"

namespace ddpsim {

namespace {

PooledRunLevels read_one(const std::string& path) {
  const nlohmann::json doc = read_json_file(path);
  refuse_other_kind(doc, path, FileKind::perf_model);
  const auto none = [&](const std::string& why) {
    return InputError(path + ": " + why +
                      ": --pool-run-levels takes models that calibrate --training fitted from two training runs or "
                      "more, which write run_level.levels");
  };
  if (!doc.is_object() || !doc.contains("run_level") || !doc["run_level"].is_object())
    throw none("no run_level");
  const auto& r = doc["run_level"];
  if (!r.contains("levels") || !r["levels"].is_object()) throw none("run_level has no levels");
  PooledRunLevels out;
  out.model = path;
  if (doc.contains("gpu") && doc["gpu"].is_string()) out.gpu = doc["gpu"].get<std::string>();
  for (const auto& [run, level] : r["levels"].items()) {
    if (!level.is_number() || !(level.get<double>() > 0) || !std::isfinite(level.get<double>()))
      throw InputError(path + ": run_level: levels: " + run + " is " + level.dump() + ": expected a level > 0");
    out.levels.push_back(level.get<double>());
  }
  if (out.levels.size() < 2)
    throw none("run_level holds " + std::to_string(out.levels.size()) + " level, and a spread needs two");
  // The training traces by their bytes' hash, as calibrate recorded them: a path depends on
  // where calibrate ran.
  if (doc.contains("calibration") && doc["calibration"].is_object() && doc["calibration"].contains("traces") &&
      doc["calibration"]["traces"].is_array())
    for (const auto& t : doc["calibration"]["traces"])
      if (t.is_object() && t.value("role", "") == "training" && t.contains("fnv1a64") && t["fnv1a64"].is_string())
        out.traces.emplace_back(t.value("file", "?"), t["fnv1a64"].get<std::string>());
  return out;
}

}  // namespace

std::vector<PooledRunLevels> read_pooled_run_levels(const std::vector<std::string>& paths,
                                                    const std::vector<std::pair<std::string, std::string>>& own) {
  std::map<std::string, std::string> counted;  // a training trace's hash → who fits it already
  for (const auto& [path, hash] : own) counted.emplace(hash, "this calibration's --training " + path);
  std::set<std::string> files;
  std::vector<PooledRunLevels> out;
  for (const std::string& path : paths) {
    std::error_code ec;
    if (!files.insert(std::filesystem::weakly_canonical(path, ec).string()).second)
      throw UsageError(path + ": given twice to --pool-run-levels (its runs would count twice)");
    out.push_back(read_one(path));
    for (const auto& [trace, hash] : out.back().traces)
      if (const auto [it, fresh] = counted.emplace(hash, path); !fresh)
        throw InputError(path + ": its training run " + trace + " is " + it->second +
                         " (the same bytes): a run counted twice would narrow the spread");
  }
  return out;
}

LevelSquares pooled_squares(const std::vector<PooledRunLevels>& pooled) {
  LevelSquares out;
  for (const PooledRunLevels& p : pooled) {
    double centre = 0;
    for (double level : p.levels) centre += std::log(level) / double(p.levels.size());
    for (double level : p.levels) out.squares += (std::log(level) - centre) * (std::log(level) - centre);
    out.df += double(p.levels.size()) - 1;
  }
  return out;
}

}  // namespace ddpsim
