#include "calib/trace_row.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "common/error.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {
constexpr long long MAX_LENGTH = 1000000;  // training.max_length's limit
}  // namespace

RankStep read_trace_row(const std::map<std::string, std::size_t>& col, const std::vector<std::string>& fields,
                        const std::string& at, const std::vector<std::string>& required) {
  auto where = [&](const std::string& column) { return at + ": column " + column + ": "; };
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
      if (col.count("micro_sq_tokens") && !possible_sq_tokens(pairs[k], tokens[k], sizes[k], lens[k]))
        throw InputError(where("micro_sq_tokens") + which + "Σ s² = " + std::to_string(pairs[k]) +
                         " is impossible for " + std::to_string(sizes[k]) + " samples of " + std::to_string(tokens[k]) +
                         " tokens, at most " + std::to_string(lens[k]) + " long");
      if (__builtin_add_overflow(samples, sizes[k], &samples) || __builtin_add_overflow(real, tokens[k], &real) ||
          __builtin_add_overflow(sq, pairs[k], &sq))
        throw InputError(where("micro_sizes") + "the micro-batches' sums overflow");
      longest = std::max(longest, lens[k]);
    }
    auto differs = [&](const char* column, const char* what, long long lists, long long row) {
      if (lists != row)
        throw InputError(where(column) + "the micro-batches hold " + std::to_string(lists) + " " + what + ", the row " +
                         std::to_string(row));
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
                     std::to_string(std::numeric_limits<int>::max() - 1) + ", got \"" + fields[col.at("step")] + "\"");
  r.rank = static_cast<int>(integer("rank"));
  r.batch_size = static_cast<int>(integer("batch_size"));
  r.max_len = static_cast<int>(integer("max_len"));
  r.real_tokens = col.count("real_tokens") && !fields[col.at("real_tokens")].empty() ? integer("real_tokens") : 0;
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
  r.global_batch = col.count("global_batch") && !fields[col.at("global_batch")].empty()
                       ? static_cast<int>(integer("global_batch"))
                       : 0;
  // 0 belongs to rows without a batch (a profile's communication rows).
  if (r.global_batch == 0 && r.batch_size > 0 && col.count("global_batch") && !fields[col.at("global_batch")].empty())
    throw InputError(where("global_batch") + "expected at least 1 (or empty: the sum of the step's batch sizes)");
  r.loss_weight = col.count("loss_weight") ? amount("loss_weight") : NOT_MEASURED;
  // Byte counts, when given: whole bytes, at most a petabyte.
  auto bytes = [&](const char* name) {
    const double v = number(name);
    if (!std::isnan(v) && !(v >= 0 && v <= 1e15 && v == std::floor(v)))
      throw InputError(where(name) + "expected a whole number of bytes from 0 to 1e15, got \"" + fields[col.at(name)] +
                       "\"");
    return v;
  };
  r.allreduce_bytes = bytes("allreduce_bytes");
  r.allreduce_ms = duration("allreduce_ms");
  r.concurrent_allreduce_bytes = bytes("concurrent_allreduce_bytes");
  // Packed sequences: the attention pairs, and nothing padded.
  if (col.count("sq_tokens")) {
    const double pairs = amount("sq_tokens");
    if (std::isnan(pairs) || pairs != std::floor(pairs) || pairs > 9e18)
      throw InputError(where("sq_tokens") + "expected Σ s² as an integer ≥ 0, got \"" + fields[col.at("sq_tokens")] +
                       "\"");
    r.sq_tokens = static_cast<std::int64_t>(pairs);
    if (r.real_tokens > 0 && !possible_sq_tokens(r.sq_tokens, r.real_tokens, r.batch_size, r.max_len))
      throw InputError(where("sq_tokens") + "Σ s² = " + fields[col.at("sq_tokens")] + " is impossible for " +
                       std::to_string(r.batch_size) + " samples of " + std::to_string(r.real_tokens) +
                       " tokens, at most " + std::to_string(r.max_len) + " long");
  }
  if (col.count("micro_batches")) {
    if (!fields[col.at("micro_batches")].empty()) {
      read_micro_batches(r);
    } else {
      for (const auto& name : micro_batch_columns())
        if (!fields[col.at(name)].empty())
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
  if (col.count("padded_tokens") && !fields[col.at("padded_tokens")].empty() &&
      integer("padded_tokens") != r.padded_tokens)
    throw InputError(where("padded_tokens") + "expected " + std::to_string(r.padded_tokens) + " (" +
                     (col.count("sq_tokens") ? "packed: the real tokens"
                      : r.micro.empty()      ? "batch_size × max_len"
                                             : "Σ micro_sizes × micro_max_lens") +
                     "), got " + fields[col.at("padded_tokens")]);
  // Rows of communication alone have no batch; compute was measured on one.
  if ((!std::isnan(r.fwd_ms) || !std::isnan(r.bwd_ms)) && (r.batch_size < 1 || r.max_len < 1))
    throw InputError(at + ": a row with compute times needs batch_size and max_len ≥ 1, got " +
                     std::to_string(r.batch_size) + " and " + std::to_string(r.max_len));
  for (const auto& name : required)
    if (std::isnan(number(name.c_str())))
      throw InputError(where(name) + "empty, but this command needs it on every row");
  return r;
}

}  // namespace ddpsim
