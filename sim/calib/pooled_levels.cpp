#include "calib/pooled_levels.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/stats.hpp"

namespace ddpsim {

namespace {

// The model's training traces as calibrate recorded them: file → (hash, metadata).
struct Recorded {
  std::string hash;
  std::map<std::string, std::string> metadata;
};
std::map<std::string, Recorded> recorded_traces(const nlohmann::json& doc) {
  std::map<std::string, Recorded> out;
  if (!doc.contains("calibration") || !doc["calibration"].is_object() || !doc["calibration"].contains("traces") ||
      !doc["calibration"]["traces"].is_array())
    return out;
  for (const auto& t : doc["calibration"]["traces"]) {
    if (!t.is_object() || t.value("role", "") != "training" || !t.contains("file") || !t["file"].is_string()) continue;
    Recorded& r = out[t["file"].get<std::string>()];
    if (t.contains("fnv1a64") && t["fnv1a64"].is_string()) r.hash = t["fnv1a64"].get<std::string>();
    if (t.contains("metadata") && t["metadata"].is_object())
      for (const auto& [key, value] : t["metadata"].items())
        if (value.is_string()) r.metadata[key] = value.get<std::string>();
  }
  return out;
}

// Each level's session: its trace's, where every trace says it trained the same policies in
// turn (`interleaved`); else one for all, as calibrate --training took them. A level names its
// trace, or "TRACE (policy)" where the trace held several policies (one process).
std::vector<std::string> sessions_of(const std::string& path, const std::vector<std::string>& runs,
                                     const std::map<std::string, Recorded>& traces) {
  std::set<std::string> turns;
  for (const auto& [file, r] : traces) {
    const auto it = r.metadata.find("interleaved");
    turns.insert(it == r.metadata.end() ? "" : it->second);
  }
  const bool in_turn = turns.size() == 1 && !turns.begin()->empty();
  std::vector<std::string> out;
  for (const std::string& run : runs) {
    if (!in_turn) {
      out.emplace_back();
      continue;
    }
    if (const auto it = traces.find(run); it != traces.end()) {
      out.push_back(session_key(run, it->second.metadata, false));
      continue;
    }
    const auto several = std::find_if(traces.begin(), traces.end(), [&](const auto& t) {
      return run.size() > t.first.size() + 3 && run.starts_with(t.first + " (") && run.ends_with(")");
    });
    if (several == traces.end())
      throw InputError(path + ": run_level: levels: " + run +
                       " names no training trace the model recorded (calibration.traces), so its session is unknown");
    out.push_back(session_key(several->first, several->second.metadata, true));
  }
  return out;
}

PooledRunLevels read_one(const std::string& path) {
  const nlohmann::json doc = read_json_file(path);
  refuse_other_kind(doc, path, FileKind::perf_model);
  const auto none = [&](const std::string& why) {
    return InputError(path + ": " + why +
                      ": --pool-run-levels takes models that calibrate --training fitted from two training runs or "
                      "more, which write run_level.levels");
  };
  if (!doc.is_object() || !doc.contains("run_level") || !doc["run_level"].is_object()) throw none("no run_level");
  const auto& r = doc["run_level"];
  if (!r.contains("levels") || !r["levels"].is_object()) throw none("run_level has no levels");
  PooledRunLevels out;
  out.model = path;
  if (doc.contains("gpu") && doc["gpu"].is_string()) out.gpu = doc["gpu"].get<std::string>();
  out.by_tokens = doc.contains("noise") && doc["noise"].is_object() &&
                  (doc["noise"].contains("steps_levels") || doc["noise"].contains("steps_levels_by_samples"));
  std::vector<std::string> runs;
  for (const auto& [run, level] : r["levels"].items()) {
    if (!level.is_number() || !(level.get<double>() > 0 && level.get<double>() <= 100))
      throw InputError(path + ": run_level: levels: " + run + " is " + level.dump() + ": expected a level in (0, 100]");
    runs.push_back(run);
    out.levels.push_back(level.get<double>());
  }
  if (out.levels.size() < 2)
    throw none("run_level holds " + std::to_string(out.levels.size()) + " level(s), and a spread needs two");
  const auto traces = recorded_traces(doc);
  out.sessions = sessions_of(path, runs, traces);
  for (const auto& [file, t] : traces)
    if (!t.hash.empty()) out.traces.emplace_back(file, t.hash);
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
      if (const auto [it, fresh] = counted.emplace(hash, "a training run of " + path); !fresh)
        throw InputError(path + ": its training run " + trace + " has the same bytes as " + it->second +
                         ": a run counted twice would narrow the spread");
  }
  return out;
}

std::string session_key(const std::string& path, const std::map<std::string, std::string>& metadata,
                        bool several_policies) {
  if (several_policies) return path;
  // Lines that say which policy a trace holds or what its run measured (the tracer's wait at DDP's
  // buffer broadcast), not how the process was set up.
  static const std::set<std::string> own_to_each_run = {"policy", "ddp_pre_forward"};
  std::string key;
  for (const auto& [name, value] : metadata)
    if (!own_to_each_run.count(name)) key += name + "=" + value + "\n";
  return key;
}

SessionSquares within_session_squares(const std::vector<double>& logs, const std::vector<std::string>& sessions) {
  std::map<std::string, std::vector<double>> by_session;
  for (std::size_t i = 0; i < logs.size(); ++i) by_session[sessions[i]].push_back(logs[i]);
  SessionSquares out;
  out.pooled = logs.size() - by_session.size() < 1;
  if (out.pooled) by_session = {{"", logs}};
  for (const auto& [key, own] : by_session) {
    const double centre = mean(own);
    for (double x : own) out.squares += (x - centre) * (x - centre);
  }
  out.sessions = static_cast<int>(by_session.size());
  out.df = double(logs.size() - by_session.size());
  return out;
}

LevelSquares pooled_squares(const std::vector<PooledRunLevels>& pooled) {
  LevelSquares out;
  for (const PooledRunLevels& p : pooled) {
    std::vector<double> logs;
    for (double level : p.levels) logs.push_back(std::log(level));
    const SessionSquares model = within_session_squares(logs, p.sessions);
    out.squares += model.squares, out.df += model.df;
  }
  return out;
}

LevelSquares session_mean_squares(const std::vector<double>& logs, const std::vector<std::string>& sessions) {
  std::map<std::string, std::vector<double>> by_session;
  for (std::size_t i = 0; i < logs.size(); ++i) by_session[sessions[i]].push_back(logs[i]);
  LevelSquares out;
  if (by_session.size() < 2) return out;
  std::vector<double> means;
  for (const auto& [key, own] : by_session) means.push_back(mean(own));
  const double centre = mean(means);
  for (double m : means) out.squares += (m - centre) * (m - centre);
  out.df = double(means.size() - 1);
  return out;
}

LevelSquares pooled_process_squares(const std::vector<PooledRunLevels>& pooled) {
  LevelSquares out;
  for (const PooledRunLevels& p : pooled) {
    std::vector<double> logs;
    for (double level : p.levels) logs.push_back(std::log(level));
    const LevelSquares model = session_mean_squares(logs, p.sessions);
    out.squares += model.squares, out.df += model.df;
  }
  return out;
}

}  // namespace ddpsim
