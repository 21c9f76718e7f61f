#include "calib/trace_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "calib/trace_row.hpp"
#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/input_file.hpp"
#include "common/split.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields = split_commas(line);
  if (!fields.empty() && !fields.back().empty() && fields.back().back() == '\r') fields.back().pop_back();
  return fields;
}

// The optional columns come in sets, and the metadata's attention line (when there is one)
// says what the columns show.
void check_optional_columns(const std::string& where, const std::map<std::string, std::size_t>& col,
                            const std::map<std::string, std::string>& metadata) {
  auto has = [&](const std::string& name) { return col.count(name) > 0; };
  bool micro = has("micro_sq_tokens");
  for (const auto& name : micro_batch_columns()) micro |= has(name);
  if (micro)
    for (const auto& name : micro_batch_columns())
      if (!has(name))
        throw InputError(where + "the header has micro-batch columns but lacks \"" + name + "\" (they come as " +
                         micro_batch_columns()[0] + ", " + micro_batch_columns()[1] + ", " + micro_batch_columns()[2] +
                         " and " + micro_batch_columns()[3] + ")");
  if (has("micro_sq_tokens") && !has("sq_tokens"))
    throw InputError(where + "the header has micro_sq_tokens but lacks \"sq_tokens\"");
  if (has("sq_tokens") && micro && !has("micro_sq_tokens"))
    throw InputError(where + "a packed trace with micro-batch columns needs \"micro_sq_tokens\" too");
  const auto attention = metadata.find("attention");
  if (attention == metadata.end()) return;
  // Earlier ddptrain traces name their (padded) attention kernel there: explicit or sdpa.
  const std::set<std::string> known = {"padded", "packed", "explicit", "sdpa"};
  if (!known.count(attention->second))
    throw InputError(where + "metadata attention=" + attention->second + ": expected padded or packed");
  if ((attention->second == "packed") != has("sq_tokens"))
    throw InputError(where + "metadata says attention=" + attention->second + " but the header " +
                     (has("sq_tokens") ? "has" : "lacks") + " the packed traces' column \"sq_tokens\"");
}

// A "# key=value" line into `metadata`: before the header, once per key, rank counts and the
// global batch as exact integers (they size the allreduce fit and the world checks).
void read_metadata_line(const std::string& line, const std::string& at_line, bool after_header,
                        std::map<std::string, std::string>& metadata) {
  const auto eq = line.find('=');
  if (eq == std::string::npos) return;
  std::string key = line.substr(1, eq - 1);
  key.erase(0, key.find_first_not_of(' '));
  key.erase(key.find_last_not_of(' ') + 1);
  const std::string value = line.substr(eq + 1);
  const std::string at = at_line + ": metadata " + printable(key);
  // Metadata describes the rows that follow; a line among them, or one given twice, would
  // silently change what the earlier lines said.
  if (after_header) throw InputError(at + " after the header: metadata lines come before it");
  if (metadata.count(key))
    throw InputError(at + " is given twice (" + printable(metadata[key]) + " and " + printable(value) +
                     "): give it once");
  const auto digits = [&](std::size_t most) {
    return !value.empty() && value.size() <= most && std::all_of(value.begin(), value.end(), ::isdigit);
  };
  if ((key == "world_size" || key == "emulated_ranks") &&
      (!digits(5) || std::stoi(value) > 65536 || (key == "world_size" && std::stoi(value) < 1)))
    throw InputError(at_line + ": metadata " + key + "=" + printable(value) + ": expected an integer from " +
                     (key == "world_size" ? "1" : "0") + " to 65536");
  if (key == "global_batch" && (!digits(8) || std::stoi(value) < 1 || std::stoi(value) > 10000000))
    throw InputError(at_line + ": metadata global_batch=" + printable(value) +
                     ": expected an integer from 1 to 10000000");
  metadata[key] = value;
}

// A run's rows in step and rank order, its world size, and the checks a whole run allows: every
// step holds every rank, steps are consecutive, a step's batch sizes sum to its global batch.
// `top`: the run's highest rank and its line; `step_line`: each step's first line.
void finish_run(PolicyRun& run, const std::string& path, const std::map<std::string, std::string>& metadata,
                const std::pair<int, long>& top, const std::map<std::pair<std::string, int>, long>& step_line) {
  std::stable_sort(run.rows.begin(), run.rows.end(), [](const RankStep& a, const RankStep& b) {
    return std::tie(a.step, a.rank) < std::tie(b.step, b.rank);
  });
  int G = 0;
  for (const auto& r : run.rows) G = std::max(G, r.rank + 1);
  run.G = G;
  // A training trace has a row per rank (ddptrain's emulated ranks included); a profile
  // records its communication on rank 0 only.
  auto said = metadata.find("emulated_ranks");
  if (said == metadata.end() || said->second == "0") said = metadata.find("world_size");
  if (said != metadata.end() && !metadata.count("profile") && said->second != std::to_string(G)) {
    const auto& [rank, line] = top;
    const bool numeric = !said->second.empty() && said->second.size() < 10 &&
                         std::all_of(said->second.begin(), said->second.end(), ::isdigit);
    if (numeric && G > std::atoi(said->second.c_str()))  // a rank beyond the world
      throw InputError(path + ":" + std::to_string(line) + ": rank " + std::to_string(rank) + ", but metadata " +
                       said->first + "=" + said->second + " (ranks 0 to " +
                       std::to_string(std::atoi(said->second.c_str()) - 1) + ")");
    throw InputError(path + ": metadata " + said->first + "=" + said->second + ", but policy " + run.label +
                     " has ranks 0 to " + std::to_string(G - 1) + " only");
  }
  if (run.rows.size() % static_cast<std::size_t>(G) != 0) {
    const auto& [rank, line] = top;
    throw InputError(path + ":" + std::to_string(line) + ": rank " + std::to_string(rank) + ", but policy " +
                     run.label + "'s steps do not all have " + std::to_string(G) + " ranks");
  }
  for (std::size_t i = 0; i < run.rows.size(); ++i)
    if (run.rows[i].rank != static_cast<int>(i % static_cast<std::size_t>(G)))
      throw InputError(path + ": policy " + run.label + ": step " + std::to_string(run.rows[i].step) + " lacks rank " +
                       std::to_string(i % static_cast<std::size_t>(G)));
  // A resumed run's trace starts at its checkpoint's step; within a trace, no step is missing.
  for (std::size_t i = static_cast<std::size_t>(G); i < run.rows.size(); i += static_cast<std::size_t>(G))
    if (run.rows[i].step != run.rows[i - static_cast<std::size_t>(G)].step + 1)
      throw InputError(path + ":" + std::to_string(step_line.at({run.label, run.rows[i].step})) + ": policy " +
                       run.label + ": step " + std::to_string(run.rows[i].step) + " follows step " +
                       std::to_string(run.rows[i - static_cast<std::size_t>(G)].step) +
                       " (a trace's steps are consecutive; a resumed run's may start late)");
  // The metadata's global batch is every step's, except where a token budget (or a profile's
  // grid) sets each step's.
  const std::string policy = run.label != "trace" || !metadata.count("policy") ? run.label : metadata.at("policy");
  const int fixed_B = metadata.count("global_batch") && !metadata.count("profile") &&
                              policy.substr(0, policy.find(':')) != "token_budget"
                          ? std::stoi(metadata.at("global_batch"))
                          : 0;
  for (std::size_t i = 0; i < run.rows.size(); i += static_cast<std::size_t>(G)) {  // B_t where not given
    int total = 0;
    for (int g = 0; g < G; ++g) total += run.rows[i + static_cast<std::size_t>(g)].batch_size;
    for (int g = 0; g < G; ++g) {
      RankStep& r = run.rows[i + static_cast<std::size_t>(g)];
      if (r.global_batch == 0) r.global_batch = total;
      if (r.global_batch != total)
        throw InputError(path + ": policy " + run.label + ", step " + std::to_string(r.step) + ": global_batch " +
                         std::to_string(r.global_batch) + " is not the sum of the ranks' batch_size (" +
                         std::to_string(total) + ")");
    }
    if (fixed_B && total != fixed_B)
      throw InputError(path + ":" + std::to_string(step_line.at({run.label, run.rows[i].step})) + ": policy " +
                       run.label + ", step " + std::to_string(run.rows[i].step) + ": the ranks' batch_size sum to " +
                       std::to_string(total) + ", but metadata global_batch=" + std::to_string(fixed_B) +
                       " (only token_budget varies the global batch)");
  }
}

}  // namespace

std::optional<ModelledAllreduce> modelled_allreduce(const Trace& trace) {
  const auto it = trace.metadata.find("allreduce");
  if (it == trace.metadata.end()) return std::nullopt;
  ModelledAllreduce m;
  int used = 0;
  if (std::sscanf(it->second.c_str(), "modelled: ring alpha-beta over %lf GB/s, %lf us per step%n", &m.link_GBps,
                  &m.step_latency_us, &used) != 2 ||
      used == 0 || !(m.link_GBps > 0) || !(m.step_latency_us >= 0))
    return std::nullopt;
  m.overlap = it->second.find("(no overlap)") == std::string::npos;
  return m;
}

Trace read_trace(const std::string& path, const std::vector<std::string>& required) {
  const std::string text = read_input_file(path, "trace", 1024 * MiB);
  Trace trace;
  trace.path = path;
  trace.hash = fnv1a64_hex(text);
  if (text.rfind("\x1F\x8B", 0) == 0)
    throw InputError(path + ": gzip-compressed; the trace reader takes plain CSV (gunzip -k " + path + ")");

  // A byte order mark (a spreadsheet's export) is not part of the first column's name.
  std::istringstream lines(text);
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) lines.ignore(3);
  std::string line;
  long line_no = 0;
  std::map<std::string, std::size_t> col;
  auto where = [&](const std::string& column) {
    return path + ":" + std::to_string(line_no) + ": column " + column + ": ";
  };
  std::map<std::string, std::size_t> run_of;  // policy → index in trace.runs
  std::set<std::tuple<std::string, int, int>> seen;
  std::map<std::string, std::pair<int, long>> top_rank;   // per policy: its highest rank, and that row's line
  std::map<std::pair<std::string, int>, long> step_line;  // per policy and step: its first row's line
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      read_metadata_line(line, path + ":" + std::to_string(line_no), !col.empty(), trace.metadata);
      continue;
    }
    const auto fields = split(line);
    if (col.empty()) {  // the header
      trace.columns = fields;
      for (std::size_t i = 0; i < fields.size(); ++i)
        if (!col.emplace(fields[i], i).second)
          throw InputError(path + ":" + std::to_string(line_no) + ": column \"" + fields[i] +
                           "\" appears twice in the header");
      std::vector<std::string> needed = {"step", "rank", "batch_size", "max_len"};
      needed.insert(needed.end(), required.begin(), required.end());
      for (const auto& name : needed)
        if (!col.count(name))
          throw InputError(path + ":" + std::to_string(line_no) + ": the header lacks column \"" + name +
                           "\" (a trace needs step, rank, batch_size, max_len and the timing columns it is used for)");
      check_optional_columns(path + ":" + std::to_string(line_no) + ": ", col, trace.metadata);
      continue;
    }
    if (fields.size() != trace.columns.size())
      throw InputError(path + ":" + std::to_string(line_no) + ": " + std::to_string(fields.size()) +
                       " fields, the header has " + std::to_string(trace.columns.size()));
    const RankStep r = read_trace_row(col, fields, path + ":" + std::to_string(line_no), required);
    const std::string policy = col.count("policy") ? fields[col["policy"]] : "trace";
    if (policy.empty()) throw InputError(where("policy") + "empty (expected the policy that planned the row)");
    if (policy.find('"') != std::string::npos)  // the writers never quote: a quote would become part of the name
      throw InputError(where("policy") + printable(policy) + ": a trace's fields are never quoted");
    if (!seen.insert({policy, r.step, r.rank}).second)
      throw InputError(
          path + ":" + std::to_string(line_no) + ": step " + std::to_string(r.step) + ", rank " +
          std::to_string(r.rank) + " appears twice" +
          (col.count("policy") ? " for policy " + policy : ": several runs mixed without a policy column"));
    if (!run_of.count(policy)) {
      run_of[policy] = trace.runs.size();
      trace.runs.push_back(PolicyRun{policy, "", 0, {}, {}, col.count("sq_tokens") > 0});
    }
    trace.runs[run_of[policy]].rows.push_back(r);
    trace.rows++;
    step_line.emplace(std::make_pair(policy, r.step), line_no);
    auto& top = top_rank[policy];
    if (r.rank >= top.first) top = {r.rank, line_no};
  }
  if (col.empty()) throw InputError(path + ": no header line (expected step,rank,policy,batch_size,...)");
  if (trace.rows == 0) throw InputError(path + ": no data rows");
  for (auto& run : trace.runs) finish_run(run, path, trace.metadata, top_rank[run.label], step_line);
  return trace;
}

std::string trace_names(const std::vector<Trace>& traces) {
  std::vector<std::vector<std::string>> parts;
  for (const Trace& t : traces) {
    parts.emplace_back();
    for (const auto& part : std::filesystem::path(t.path).lexically_normal()) parts.back().push_back(part.string());
  }
  if (parts.empty()) return "";
  std::size_t shared = 0;  // leading folders every path has
  const auto folder_shared = [&](std::size_t k) {
    return std::all_of(parts.begin(), parts.end(),
                       [&](const auto& p) { return p.size() > k + 1 && p[k] == parts[0][k]; });
  };
  if (parts.size() == 1)
    shared = parts[0].size() > 2 ? parts[0].size() - 2 : 0;
  else
    while (folder_shared(shared)) ++shared;
  std::string names;
  for (const auto& p : parts) {
    std::filesystem::path name;
    for (std::size_t k = shared; k < p.size(); ++k) name /= p[k];
    names += (names.empty() ? "" : ", ") + name.string();
  }
  return names;
}

}  // namespace ddpsim
