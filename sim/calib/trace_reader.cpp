#include "calib/trace_reader.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/input_file.hpp"
#include "common/split.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {
constexpr long long MAX_LENGTH = 1000000;  // training.max_length's limit
}  // namespace

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

}  // namespace

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
  std::map<std::string, std::pair<int, long>> top_rank;  // per policy: its highest rank, and that row's line
  std::map<std::pair<std::string, int>, long> step_line;  // per policy and step: its first row's line
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line[0] == '#') {
      const auto eq = line.find('=');
      if (eq != std::string::npos) {
        std::string key = line.substr(1, eq - 1);
        key.erase(0, key.find_first_not_of(' '));
        key.erase(key.find_last_not_of(' ') + 1);
        const std::string value = line.substr(eq + 1);
        const std::string at = path + ":" + std::to_string(line_no) + ": metadata " + printable(key);
        // Metadata describes the rows that follow; a line among them, or one given twice, would
        // silently change what the earlier lines said.
        if (!col.empty()) throw InputError(at + " after the header: metadata lines come before it");
        if (trace.metadata.count(key))
          throw InputError(at + " is given twice (" + printable(trace.metadata[key]) + " and " + printable(value) +
                           "): give it once");
        // The rank counts size the allreduce fit and the world checks: read exactly.
        if ((key == "world_size" || key == "emulated_ranks") &&
            (value.empty() || value.size() > 5 || !std::all_of(value.begin(), value.end(), ::isdigit) ||
             std::stoi(value) > 65536 || (key == "world_size" && std::stoi(value) < 1)))
          throw InputError(path + ":" + std::to_string(line_no) + ": metadata " + key + "=" + printable(value) +
                           ": expected an integer from " + (key == "world_size" ? "1" : "0") + " to 65536");
        if (key == "global_batch" &&
            (value.empty() || value.size() > 8 || !std::all_of(value.begin(), value.end(), ::isdigit) ||
             std::stoi(value) < 1 || std::stoi(value) > 10000000))
          throw InputError(path + ":" + std::to_string(line_no) + ": metadata global_batch=" + printable(value) +
                           ": expected an integer from 1 to 10000000");
        trace.metadata[key] = value;
      }
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
    auto number = [&](const char* name) -> double {
      const auto it = col.find(name);
      if (it == col.end() || fields[it->second].empty()) return NOT_MEASURED;
      const std::string& f = fields[it->second];
      double v = 0;
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), v);
      if (ec != std::errc() || end != f.data() + f.size() || !std::isfinite(v))
        throw InputError(where(name) + "\"" + f + "\" is not a number");
      return v;
    };
    auto integer = [&](const char* name) {
      const double v = number(name);
      if (std::isnan(v) || v < 0 || v != std::floor(v) || v > std::numeric_limits<int>::max())
        throw InputError(where(name) + "expected an integer from 0 to " +
                         std::to_string(std::numeric_limits<int>::max()) + ", got \"" + fields[col.at(name)] + "\"");
      return static_cast<long long>(v);
    };
    // Times, sizes and memory are never negative.
    auto amount = [&](const char* name) {
      const double v = number(name);
      if (v < 0) throw InputError(where(name) + "expected a value ≥ 0, got \"" + fields[col.at(name)] + "\"");
      return v;
    };
    // A phase's time in ms, within what a performance model can hold (10⁷ ms, 2.8 hours), so a
    // wild value is named here rather than as a coefficient the fit cannot use.
    auto duration = [&](const char* name) {
      const double v = amount(name);
      if (v > 1e7)
        throw InputError(where(name) + "expected a time from 0 to 1e7 ms, got \"" + fields[col.at(name)] + "\"");
      return v;
    };
    // A ';'-separated list of micro_batches integers in [0, maximum].
    auto list = [&](const std::string& name, long long count, long long maximum) {
      std::vector<long long> values;
      const std::string& f = fields[col.at(name)];
      for (std::size_t begin = 0; begin <= f.size();) {
        const auto end = std::min(f.find(';', begin), f.size());
        long long v = 0;
        const auto [stop, ec] = std::from_chars(f.data() + begin, f.data() + end, v);
        if (ec != std::errc() || stop != f.data() + end || v < 0 || v > maximum)
          throw InputError(where(name) + "expected integers from 0 to " + std::to_string(maximum) +
                           " separated by ';', got \"" + f + "\"");
        values.push_back(v);
        begin = end + 1;
      }
      if (static_cast<long long>(values.size()) != count)
        throw InputError(where(name) + std::to_string(values.size()) + " values, but micro_batches is " +
                         std::to_string(count));
      return values;
    };
    // Σ s² of `tokens` tokens in `samples` samples of at most `longest`: between tokens²/samples
    // (all equal) and samples·longest², and at least tokens (every sample has a token).
    auto possible_pairs = [](long long pairs, long long tokens, long long samples, long long longest) {
      const long double p = pairs, t = tokens, b = samples, L = longest;
      return samples == 0 ? pairs == 0 && tokens == 0 : p >= t && t * t <= b * p && p <= b * L * L;
    };
    // The micro-batch columns (outputs.hpp): each micro-batch possible, and together the row.
    auto read_micro_batches = [&](RankStep& r) {
      const long long count = integer("micro_batches");
      const long long INT = std::numeric_limits<int>::max(), PAIRS = std::numeric_limits<std::int64_t>::max() / 4;
      const auto sizes = list("micro_sizes", count, INT), lens = list("micro_max_lens", count, INT),
                 tokens = list("micro_tokens", count, INT);
      const auto pairs =
          col.count("micro_sq_tokens") ? list("micro_sq_tokens", count, PAIRS) : std::vector<long long>(sizes.size());
      long long samples = 0, longest = 0, real = 0, sq = 0;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const std::string which = "micro-batch " + std::to_string(k + 1) + " of " + std::to_string(count) + ": ";
        if (count > 1 && sizes[k] < 1) throw InputError(where("micro_sizes") + which + "no samples");
        if (sizes[k] > 0 && (lens[k] < 1 || tokens[k] < sizes[k] || tokens[k] > sizes[k] * lens[k]))
          throw InputError(where("micro_tokens") + which + std::to_string(tokens[k]) + " tokens cannot be " +
                           std::to_string(sizes[k]) + " samples of 1 to " + std::to_string(lens[k]) + " tokens");
        if (col.count("micro_sq_tokens") && !possible_pairs(pairs[k], tokens[k], sizes[k], lens[k]))
          throw InputError(where("micro_sq_tokens") + which + "Σ s² = " + std::to_string(pairs[k]) +
                           " is impossible for " + std::to_string(sizes[k]) + " samples of " +
                           std::to_string(tokens[k]) + " tokens, at most " + std::to_string(lens[k]) + " long");
        if (__builtin_add_overflow(samples, sizes[k], &samples) || __builtin_add_overflow(real, tokens[k], &real) ||
            __builtin_add_overflow(sq, pairs[k], &sq))
          throw InputError(where("micro_sizes") + "the micro-batches' sums overflow");
        longest = std::max(longest, lens[k]);
      }
      auto differs = [&](const char* column, const char* what, long long lists, long long row) {
        if (lists != row)
          throw InputError(where(column) + "the micro-batches hold " + std::to_string(lists) + " " + what +
                           ", the row " + std::to_string(row));
      };
      differs("micro_sizes", "samples", samples, r.batch_size);
      differs("micro_max_lens", "tokens as their longest sample", longest, r.max_len);
      if (r.real_tokens > 0) differs("micro_tokens", "tokens", real, r.real_tokens);
      if (col.count("micro_sq_tokens")) differs("micro_sq_tokens", "as Σ s²", sq, r.sq_tokens);
      if (count < 2) return;
      r.padded_tokens = 0;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        r.micro.push_back({static_cast<int>(sizes[k]), static_cast<int>(lens[k]), tokens[k], pairs[k]});
        r.padded_tokens += sizes[k] * lens[k];
      }
    };
    RankStep r;
    r.step = static_cast<int>(integer("step"));
    if (r.step == std::numeric_limits<int>::max())  // a replay runs steps 0 … step: one more than an int holds
      throw InputError(where("step") + "expected an integer from 0 to " +
                       std::to_string(std::numeric_limits<int>::max() - 1) + ", got \"" + fields[col.at("step")] +
                       "\"");
    r.rank = static_cast<int>(integer("rank"));
    r.batch_size = static_cast<int>(integer("batch_size"));
    r.max_len = static_cast<int>(integer("max_len"));
    r.real_tokens = col.count("real_tokens") && !fields[col["real_tokens"]].empty() ? integer("real_tokens") : 0;
    r.padded_tokens = std::int64_t{r.batch_size} * r.max_len;
    r.fwd_ms = duration("fwd_ms");
    r.bwd_ms = duration("bwd_ms");
    r.comm_wait_ms = duration("comm_wait_ms");
    r.opt_ms = duration("opt_ms");
    r.step_ms = duration("step_ms");
    // A rank's step holds its phases (the writers round each to 1e-4 ms).
    if (const double phases = r.fwd_ms + r.bwd_ms + r.opt_ms; r.step_ms < phases - 1e-3 - 1e-9 * phases)
      throw InputError(where("step_ms") + fields[col.at("step_ms")] + " is less than fwd_ms + bwd_ms + opt_ms (" +
                       std::to_string(phases) + "): a rank's step time includes its phases");
    r.peak_mem_mib = amount("peak_mem_mib");
    r.loss = number("loss");
    r.global_batch = col.count("global_batch") && !fields[col["global_batch"]].empty()
                         ? static_cast<int>(integer("global_batch"))
                         : 0;
    // 0 belongs to rows without a batch (a profile's communication rows).
    if (r.global_batch == 0 && r.batch_size > 0 && col.count("global_batch") && !fields[col["global_batch"]].empty())
      throw InputError(where("global_batch") + "expected at least 1 (or empty: the sum of the step's batch sizes)");
    r.loss_weight = col.count("loss_weight") ? amount("loss_weight") : NOT_MEASURED;
    // Byte counts, when given: whole bytes, at most a petabyte.
    auto bytes = [&](const char* name) {
      const double v = number(name);
      if (!std::isnan(v) && !(v >= 0 && v <= 1e15 && v == std::floor(v)))
        throw InputError(where(name) + "expected a whole number of bytes from 0 to 1e15, got \"" +
                         fields[col.at(name)] + "\"");
      return v;
    };
    r.allreduce_bytes = bytes("allreduce_bytes");
    r.allreduce_ms = duration("allreduce_ms");
    r.concurrent_allreduce_bytes = bytes("concurrent_allreduce_bytes");
    // Packed sequences: the attention pairs, and nothing padded.
    if (col.count("sq_tokens")) {
      const double pairs = amount("sq_tokens");
      if (std::isnan(pairs) || pairs != std::floor(pairs) || pairs > 9e18)
        throw InputError(where("sq_tokens") + "expected Σ s² as an integer ≥ 0, got \"" + fields[col["sq_tokens"]] +
                         "\"");
      r.sq_tokens = static_cast<std::int64_t>(pairs);
      if (r.real_tokens > 0 && !possible_pairs(r.sq_tokens, r.real_tokens, r.batch_size, r.max_len))
        throw InputError(where("sq_tokens") + "Σ s² = " + fields[col["sq_tokens"]] + " is impossible for " +
                         std::to_string(r.batch_size) + " samples of " + std::to_string(r.real_tokens) +
                         " tokens, at most " + std::to_string(r.max_len) + " long");
    }
    if (col.count("micro_batches")) {
      if (!fields[col["micro_batches"]].empty()) {
        read_micro_batches(r);
      } else {
        for (const auto& name : micro_batch_columns())
          if (!fields[col[name]].empty())
            throw InputError(where("micro_batches") + "empty, but " + name + " lists micro-batches");
      }
    }
    if (col.count("sq_tokens")) r.padded_tokens = r.real_tokens;
    if (r.max_len > MAX_LENGTH)
      throw InputError(where("max_len") + "expected at most " + std::to_string(MAX_LENGTH) + " tokens, got " +
                       std::to_string(r.max_len));
    if (r.real_tokens > 0 && r.batch_size > 0 &&
        (r.real_tokens < r.batch_size || r.real_tokens > std::int64_t{r.batch_size} * r.max_len))
      throw InputError(where("real_tokens") + std::to_string(r.real_tokens) + " tokens cannot be " +
                       std::to_string(r.batch_size) + " samples of 1 to " + std::to_string(r.max_len) + " tokens");
    if (col.count("padded_tokens") && !fields[col["padded_tokens"]].empty() &&
        integer("padded_tokens") != r.padded_tokens)
      throw InputError(where("padded_tokens") + "expected " + std::to_string(r.padded_tokens) + " (" +
                       (col.count("sq_tokens") ? "packed: the real tokens"
                        : r.micro.empty()      ? "batch_size × max_len"
                                               : "Σ micro_sizes × micro_max_lens") +
                       "), got " + fields[col["padded_tokens"]]);
    // Rows of communication alone have no batch; compute was measured on one.
    if ((!std::isnan(r.fwd_ms) || !std::isnan(r.bwd_ms)) && (r.batch_size < 1 || r.max_len < 1))
      throw InputError(path + ":" + std::to_string(line_no) +
                       ": a row with compute times needs batch_size and max_len ≥ 1, got " +
                       std::to_string(r.batch_size) + " and " + std::to_string(r.max_len));
    for (const auto& name : required)
      if (std::isnan(number(name.c_str())))
        throw InputError(where(name) + "empty, but this command needs it on every row");
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
  for (auto& run : trace.runs) {
    std::stable_sort(run.rows.begin(), run.rows.end(), [](const RankStep& a, const RankStep& b) {
      return std::tie(a.step, a.rank) < std::tie(b.step, b.rank);
    });
    int G = 0;
    for (const auto& r : run.rows) G = std::max(G, r.rank + 1);
    run.G = G;
    // A training trace has a row per rank (ddptrain's emulated ranks included); a profile
    // records its communication on rank 0 only.
    auto said = trace.metadata.find("emulated_ranks");
    if (said == trace.metadata.end() || said->second == "0") said = trace.metadata.find("world_size");
    if (said != trace.metadata.end() && !trace.metadata.count("profile") && said->second != std::to_string(G)) {
      const auto& [rank, line] = top_rank[run.label];
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
      const auto& [rank, line] = top_rank[run.label];
      throw InputError(path + ":" + std::to_string(line) + ": rank " + std::to_string(rank) + ", but policy " +
                       run.label + "'s steps do not all have " + std::to_string(G) + " ranks");
    }
    for (std::size_t i = 0; i < run.rows.size(); ++i)
      if (run.rows[i].rank != static_cast<int>(i % static_cast<std::size_t>(G)))
        throw InputError(path + ": policy " + run.label + ": step " + std::to_string(run.rows[i].step) +
                         " lacks rank " + std::to_string(i % static_cast<std::size_t>(G)));
    // A resumed run's trace starts at its checkpoint's step; within a trace, no step is missing.
    for (std::size_t i = static_cast<std::size_t>(G); i < run.rows.size(); i += static_cast<std::size_t>(G))
      if (run.rows[i].step != run.rows[i - static_cast<std::size_t>(G)].step + 1)
        throw InputError(path + ":" + std::to_string(step_line.at({run.label, run.rows[i].step})) + ": policy " +
                         run.label + ": step " + std::to_string(run.rows[i].step) + " follows step " +
                         std::to_string(run.rows[i - static_cast<std::size_t>(G)].step) +
                         " (a trace's steps are consecutive; a resumed run's may start late)");
    // The metadata's global batch is every step's, except where a token budget (or a profile's
    // grid) sets each step's.
    const std::string policy = run.label != "trace" || !trace.metadata.count("policy") ? run.label
                                                                                        : trace.metadata.at("policy");
    const int fixed_B = trace.metadata.count("global_batch") && !trace.metadata.count("profile") &&
                                policy.substr(0, policy.find(':')) != "token_budget"
                            ? std::stoi(trace.metadata.at("global_batch"))
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
  return trace;
}

}  // namespace ddpsim
