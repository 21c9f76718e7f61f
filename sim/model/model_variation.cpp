// How a model's times vary around its phases: the compute noise (σ's, slow spells, measured
// training steps), how far a gain moves between sessions, and between runs trained in turn.
#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "model/model_fields.hpp"

namespace ddpsim {

namespace {

// Positive, non-decreasing factors, scaled here to median one (the phases give a quiet machine's
// time; spells lift it).
std::vector<double> quantile_table(const nlohmann::json& list, const std::string& where) {
  const char* expected =
      "an array of at least 2 non-decreasing numbers > 0 (slow-spell factors at evenly spaced "
      "probabilities from 0 to 1)";
  if (!list.is_array()) throw wrong_type(list, where, expected);
  if (list.size() < 2)
    throw InputError(where + " has " + std::to_string(list.size()) + " value(s): expected " + expected);
  std::vector<double> q;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& v = list[i];
    if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1e6) ||
        (!q.empty() && v.get<double>() < q.back()))
      throw wrong_type(v, where + "[" + std::to_string(i) + "]",
                       q.empty() ? "a number in (0, 1e6]" : "a number in (0, 1e6], at least the one before");
    q.push_back(v.get<double>());
  }
  const double scale = quantile_table_at(q, 0.5);
  for (double& x : q) x /= scale;
  return q;
}

// The compute-bound regime's noise (PerfModel::NoiseAbove): a knee of at least one token.
PerfModel::NoiseAbove parse_noise_above(const nlohmann::json& doc, const std::string& where) {
  JsonFields f(doc, where);
  PerfModel::NoiseAbove a;
  if (!f.has("tokens"))
    throw InputError(where + ": missing \"tokens\" (the padded tokens per rank-step from which this noise holds)");
  a.tokens = f.get_in<long long>("tokens", 1, 1, 1LL << 40);
  if (!f.has("sigma"))
    throw InputError(where + ": missing \"sigma\" (the log-normal σ of the rank-steps from \"tokens\" on, 0 for none)");
  a.sigma = non_negative(f, "sigma", 0, 3);
  a.shared_sigma = non_negative(f, "shared_sigma", 0, 3);
  if (f.has("spells")) a.spells = quantile_table(f.raw("spells"), where + ": spells");
  a.steps_scale = f.get<double>("steps_scale", 1);
  if (!(a.steps_scale > 0 && a.steps_scale <= 1e3))
    throw InputError(where +
                     ": steps_scale must be in (0, 1000] (a measured step's log factor across the knee is "
                     "scaled by it), got " +
                     nlohmann::json(a.steps_scale).dump());
  f.reject_unknown();
  return a;
}

// The measured steps' levels: [tokens, factor] pairs, tokens ≥ 1 strictly ascending, factor > 0.
std::vector<std::pair<double, double>> level_table(const nlohmann::json& list, const std::string& where) {
  const auto got = [](const nlohmann::json& v) {
    const std::string text = v.dump();
    return text.size() > 40 ? text.substr(0, 37) + "..." : text;
  };
  if (!list.is_array() || list.empty())
    throw InputError(where + ": expected a non-empty array of [tokens, factor] pairs, got " + got(list));
  std::vector<std::pair<double, double>> levels;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& row = list[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!(row.is_array() && row.size() == 2 && row[0].is_number() && row[1].is_number()))
      throw InputError(at + ": expected a [tokens, factor] pair of numbers, got " + got(row));
    const double tokens = row[0].get<double>(), factor = row[1].get<double>();
    const auto shown = [](double v) { return nlohmann::json(v).dump(); };
    if (!(tokens >= 1 && tokens <= 1e12)) throw InputError(at + ": tokens " + shown(tokens) + " not in [1, 1e12]");
    if (!levels.empty() && !(tokens > levels.back().first))
      throw InputError(at + ": tokens " + shown(tokens) + " not above the previous " + shown(levels.back().first) +
                       " (tokens strictly ascending)");
    if (!(factor > 0 && factor <= 1e6)) throw InputError(at + ": factor " + shown(factor) + " not in (0, 1e6]");
    levels.emplace_back(tokens, factor);
  }
  return levels;
}

// Measured steps: rows of equal length (one factor per rank), each factor > 0.
std::vector<std::vector<double>> step_table(const nlohmann::json& list, const std::string& where) {
  const char* expected = "a non-empty array of steps, each an array of one factor > 0 per rank, all of one length";
  if (!list.is_array() || list.empty()) throw wrong_type(list, where, expected);
  std::vector<std::vector<double>> steps;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const auto& row = list[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!row.is_array() || row.empty() || (!steps.empty() && row.size() != steps.front().size()))
      throw wrong_type(row, at, expected);
    std::vector<double> factors;
    for (std::size_t g = 0; g < row.size(); ++g) {
      const auto& v = row[g];
      if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1e6))
        throw wrong_type(v, at + "[" + std::to_string(g) + "]", "a number in (0, 1e6]");
      factors.push_back(v.get<double>());
    }
    steps.push_back(std::move(factors));
  }
  return steps;
}

// run_level.pooled: the earlier models whose levels the spread pooled, written for the reader.
void check_pooled(const nlohmann::json& pooled, const std::string& at) {
  const char* expected = "an array of {\"model\": file, \"levels\": count ≥ 2}";
  if (!pooled.is_array()) throw wrong_type(pooled, at, expected);
  for (std::size_t i = 0; i < pooled.size(); ++i) {
    const auto& p = pooled[i];
    if (!p.is_object() || p.size() != 2 || !p.contains("model") || !p["model"].is_string() || !p.contains("levels") ||
        !p["levels"].is_number_integer() || p["levels"].get<long long>() < 2)
      throw wrong_type(p, at + "[" + std::to_string(i) + "]", expected);
  }
}

// noise.steps_levels_by_samples: a level table for each batch size, sizes ascending.
std::vector<SampleLevels> parse_samples_levels(JsonFields& n, const PerfModel& m, const std::string& origin) {
  std::vector<SampleLevels> out;
  const std::string at = origin + ": noise: steps_levels_by_samples";
  if (m.step_factors.empty()) throw InputError(at + " without steps (the levels are those of the measured steps)");
  if (!m.step_levels.empty())
    throw InputError(at + " and steps_levels both given: keep one (a table for each batch size, or one for all)");
  const auto& by = n.raw("steps_levels_by_samples");
  if (!by.is_array() || by.size() < 2) throw wrong_type(by, at, "an array of two [samples, levels] or more");
  for (std::size_t i = 0; i < by.size(); ++i) {
    const auto& e = by[i];
    const std::string here = at + "[" + std::to_string(i) + "]";
    if (!e.is_array() || e.size() != 2) throw wrong_type(e, here, "a pair [samples, [[tokens, factor], ...]]");
    if (!e[0].is_number_integer() || e[0].get<long long>() < 1 || e[0].get<long long>() > 1000000)
      throw wrong_type(e[0], here + "[0]", "samples, an integer in [1, 1e6]");
    if (i > 0 && e[0].get<int>() <= out.back().samples)
      throw InputError(here + "[0]: samples " + std::to_string(e[0].get<int>()) + " not above the previous " +
                       std::to_string(out.back().samples));
    out.push_back({e[0].get<int>(), level_table(e[1], here + "[1]")});
  }
  return out;
}

// Each size's table is of a size the training runs held: within [fewest, most] of steps_samples.
void check_tables_within(const PerfModel& m, const std::string& origin) {
  const auto [fewest, most] = m.steps_samples;
  for (const SampleLevels& table : m.samples_levels)
    if (table.samples < fewest || table.samples > most)
      throw InputError(origin + ": noise: steps_levels_by_samples has a table at " + std::to_string(table.samples) +
                       " samples, outside steps_samples [" + std::to_string(fewest) + ", " + std::to_string(most) +
                       "]: both describe the same training runs");
}

// noise.steps_tokens: the tokens range the levels by tokens were measured over.
std::pair<long long, long long> parse_steps_tokens(const nlohmann::json& v, const PerfModel& m,
                                                   const std::string& origin) {
  const std::string at = origin + ": noise: steps_tokens";
  if (m.step_levels.empty() && m.samples_levels.empty())
    throw InputError(at + " without steps_levels or steps_levels_by_samples (the tokens are those the levels were "
                          "measured at)");
  if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      v[0].get<long long>() < 1 || v[1].get<long long>() < v[0].get<long long>() ||
      v[1].get<long long>() > 1000000000)
    throw wrong_type(v, at, "[fewest, most] tokens a rank-step, integers with 1 ≤ fewest ≤ most ≤ 1e9");
  const std::pair<long long, long long> range{v[0].get<long long>(), v[1].get<long long>()};
  // A level sits at the median tokens of the rank-steps it was measured over: inside their range.
  const auto check = [&](const std::vector<std::pair<double, double>>& levels) {
    for (const auto& [tokens, factor] : levels)
      if (tokens < double(range.first) || tokens > double(range.second))
        throw InputError(at + " [" + std::to_string(range.first) + ", " + std::to_string(range.second) +
                         "] does not hold a level measured at " + std::to_string(std::lround(tokens)) +
                         " tokens: both describe the same training runs");
  };
  check(m.step_levels);
  for (const SampleLevels& table : m.samples_levels) check(table.levels);
  return range;
}

}  // namespace

double quantile_table_mean(std::span<const double> q) {
  double sum = 0;
  for (std::size_t k = 0; k + 1 < q.size(); ++k) sum += 0.5 * (q[k] + q[k + 1]);
  return q.size() < 2 ? (q.empty() ? 1.0 : q[0]) : sum / double(q.size() - 1);
}

double quantile_table_at(std::span<const double> q, double u) {
  if (q.size() < 2) return q.empty() ? 1.0 : q[0];
  const double x = std::clamp(u, 0.0, 1.0) * double(q.size() - 1);
  const std::size_t k = std::min(static_cast<std::size_t>(x), q.size() - 2);
  return q[k] + (x - double(k)) * (q[k + 1] - q[k]);
}

void parse_variation(const JsonFields& f, PerfModel& m, const std::string& origin) {
  if (f.has("session")) {
    JsonFields s(f.raw("session"), origin + ": session");
    for (const char* key : {"below_pp", "above_pp", "source"})
      if (!s.has(key))
        throw InputError(s.where() + ": missing \"" + key +
                         "\" (below_pp and above_pp: a gain's 95% half-width between sessions, in percentage points, "
                         "launch-bound and compute-bound; source: where the figures come from)");
    m.session_below_pp = non_negative(s, "below_pp", 0, 100);
    m.session_above_pp = non_negative(s, "above_pp", 0, 100);
    m.session_source = s.require<std::string>("source");
    s.reject_unknown();
  }
  if (f.has("noise")) {
    JsonFields n(f.raw("noise"), origin + ": noise");
    if (!n.has("sigma")) throw InputError(origin + ": noise: missing \"sigma\" (each rank's log-normal σ, 0 for none)");
    m.noise_sigma = non_negative(n, "sigma", 0, 3);
    m.noise_shared_sigma = non_negative(n, "shared_sigma", 0, 3);
    if (n.has("spells")) m.spell_quantiles = quantile_table(n.raw("spells"), origin + ": noise: spells");
    if (n.has("steps")) m.step_factors = step_table(n.raw("steps"), origin + ": noise: steps");
    if (n.has("steps_levels")) {
      if (m.step_factors.empty())
        throw InputError(origin + ": noise: steps_levels without steps (the levels are those of the measured steps)");
      m.step_levels = level_table(n.raw("steps_levels"), origin + ": noise: steps_levels");
    }
    if (n.has("steps_levels_by_samples")) m.samples_levels = parse_samples_levels(n, m, origin);
    if (n.has("steps_samples")) {
      if (m.step_factors.empty())
        throw InputError(origin + ": noise: steps_samples without steps (the samples are those of the measured steps)");
      const auto& v = n.raw("steps_samples");
      if (!v.is_array() || v.size() != 2 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
          v[0].get<long long>() < 1 || v[1].get<long long>() < v[0].get<long long>() || v[1].get<long long>() > 1000000)
        throw wrong_type(v, origin + ": noise: steps_samples",
                         "[fewest, most] samples a (micro-)batch, integers with 1 ≤ fewest ≤ most ≤ 1e6");
      m.steps_samples = {v[0].get<int>(), v[1].get<int>()};
      check_tables_within(m, origin);
    } else if (!m.samples_levels.empty()) {
      throw InputError(origin +
                       ": noise: steps_levels_by_samples without steps_samples (the fewest and most samples "
                       "a (micro-)batch of the training runs held, which calibrate --training writes beside them)");
    }
    if (n.has("steps_tokens")) m.steps_tokens = parse_steps_tokens(n.raw("steps_tokens"), m, origin);
    m.step_factors_source = n.get<std::string>("steps_source", "");
    const std::string regime = n.get<std::string>("steps_regime", "below");
    if (regime != "below" && regime != "above")
      throw InputError(origin + ": noise: steps_regime is \"below\" or \"above\" the knee, got \"" + regime + "\"");
    m.steps_above = regime == "above";
    if (n.has("above")) m.noise_above = parse_noise_above(n.raw("above"), origin + ": noise: above");
    n.reject_unknown();
  }
  if (f.has("run_level")) {
    JsonFields r(f.raw("run_level"), origin + ": run_level");
    for (const char* key : {"spread", "source"})
      if (!r.has(key))
        throw InputError(r.where() + ": missing \"" + key +
                         "\" (spread: how far the levels of runs of one setting trained in turn differed, a "
                         "fraction; source: where it was measured)");
    m.run_level_spread = non_negative(r, "spread", 0, 1);
    m.run_level_source = r.require<std::string>("source");
    if (m.run_level_source.empty())
      throw InputError(r.where() + ": source is empty: say where the spread was measured");
    if (r.has("levels")) {  // each run's level, written for the reader
      const auto& levels = r.raw("levels");
      if (!levels.is_object()) throw wrong_type(levels, r.where() + ": levels", "an object of run: level > 0");
      for (const auto& [run, level] : levels.items())
        if (!level.is_number() || !(level.get<double>() > 0 && level.get<double>() <= 100))
          throw wrong_type(level, r.where() + ": levels: " + run, "a level in (0, 100]");
    }
    if (r.has("process_spread")) {
      m.process_level_spread = non_negative(r, "process_spread", 0, 1);
      m.process_level_source = r.get<std::string>("process_source", "");
      if (m.process_level_source.empty())
        throw InputError(r.where() + ": process_spread without process_source: say where it was measured");
    }
    if (r.has("alone")) non_negative(r, "alone", 0, 1);  // the spread the model's own runs gave
    if (r.has("df") && !(r.raw("df").is_number_integer() && r.raw("df").get<long long>() >= 1))
      throw wrong_type(r.raw("df"), r.where() + ": df", "the spread's degrees of freedom, an integer ≥ 1");
    if (r.has("pooled")) check_pooled(r.raw("pooled"), r.where() + ": pooled");
    r.reject_unknown();
  }
}

}  // namespace ddpsim
