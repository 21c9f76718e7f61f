// A predicted gain's 95% prediction interval: what a real run's gain may be, not only what
// other seeds would draw. Beside the seeds' spread it holds what the model does not know — the
// forms its fit supports, the session a run meets, the first-use cost, a poor fit's held-out
// error, and for a model derived from specs its efficiency, launch floor and network — each as
// a half-width in percentage points, combined in quadrature (they are independent sources).
#pragma once

#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/config.hpp"
#include "eval/simulate.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

// One source of a gain's uncertainty: its 95% half-width in percentage points.
struct UncertaintyTerm {
  std::string name;  // "model form", "session", "first use", "spec-derived compute", "network", "fit", "run level"
  double half_width_pp = 0;
};

// A config as plausible as the one given, differing in one thing its model does not know;
// the gain it predicts, set beside the config's, gives that term's half-width.
struct ConfigVariant {
  std::string term;
  Config config;
};
std::vector<ConfigVariant> model_variants(const Config& config);
// The terms of batch sizes a model's training runs never held (PerfModel::steps_samples).
inline constexpr const char* kUntrainedBelow = "untrained batch size (below)";
inline constexpr const char* kUntrainedAbove = "untrained batch size (above)";
// The term of rank-steps outside the tokens a model's levels were measured at (PerfModel::steps_tokens).
inline constexpr const char* kUntrainedTokens = "untrained tokens";
// The config with its network at the share of its links' bandwidth that collectives reach at
// worst: the "network" term of a network that was not measured.
ConfigVariant network_variant(const Config& config);

// The variants' terms for one policy: the largest |variant gain − gain| of each term (an
// untrained-size or -tokens term of no width left out: no rank-step strayed there).
struct VariantGain {
  std::string term;
  double gain_pct = 0;
};
std::vector<UncertaintyTerm> variant_terms(double gain_pct, std::span<const VariantGain> variants);

// The noise model's term: |gain − the same gain with the compute noise off| (NaN: no noise
// drawn, no term). A regime's σ is the least-known part of a calibration (few repeated shapes,
// measured at other shapes than the run's: campaign 2's registered σ cost 5 pp of its gain), and
// the noise-off gain bounds what it does on one side; the term mirrors that on the other.
std::vector<UncertaintyTerm> noise_term(double gain_pct, double quiet_gain_pct);

// How far a gain moves between sessions, by regime (PerfModel::session_*), with where the
// figures come from: the model's own, or this project's campaigns where it has none.
struct SessionSpread {
  double below_pp = 0, above_pp = 0;
  std::string source;
};
SessionSpread session_spread(const PerfModel& model);
inline constexpr double kCampaignSessionBelowPp = 2.2, kCampaignSessionAbovePp = 0.5;
// Policies run as processes of their own, at different times, rather than in turn: a
// launch-bound gain moved ±5.5 pp between such runs on the H100 against ±2.2 in turn.
inline constexpr double kRunsApartFactor = 2.5;

// The terms a gain carries without simulating: the session's, for the regime that each of the
// two runs' slowest micro-batches sits in (TokenSummary) and wider for runs apart (a prediction
// assumes policies trained in turn), a poor fit's held-out error, a spec's share of its gain, and
// how far runs trained in turn differed in level (PerfModel::run_level_spread).
std::vector<UncertaintyTerm> fixed_terms(const PerfModel& model, double gain_pct, const TokenSummary& policy,
                                         const TokenSummary& base, bool runs_apart = false);
// The regime of a gain's two runs, as the session term reads it: "compute-bound",
// "launch-bound", "mixed" (one of each) or "one regime" (a model without the split).
std::string gain_regime(const PerfModel& model, const TokenSummary& policy, const TokenSummary& base);

// A gain, the range its seeds (or its steps) give, and the prediction interval around it.
struct GainPrediction {
  double gain_pct = 0;
  double seeds_lo = 0, seeds_hi = 0;
  double lo = 0, hi = 0;
  std::string mostly;  // the widest source: "seeds" or a term's name
  std::string regime;  // gain_regime(), where the caller knows it
  std::vector<UncertaintyTerm> terms;
  bool per_sample = false;  // the two policies take different samples a step
  bool told_from_noise() const { return lo > 0 || hi < 0; }
};
GainPrediction predict_gain(double gain_pct, double seeds_lo, double seeds_hi, std::vector<UncertaintyTerm> terms);

// Each policy's gain over the first in one run, in %: per sample where the two take different
// samples a step (`per_sample`, when given, says which).
std::vector<double> run_gains(const SimulationRun& sim, std::vector<bool>* per_sample = nullptr);

// A gain of one run's summary over a base run's, in %: per sample where they take different
// samples a step (`per_sample`, when given, says whether).
double summary_gain(const TokenSummary& s, const TokenSummary& base, bool* per_sample = nullptr);

// The model's variants (model_variants) simulated at the config's seed on `dataset`: each
// policy's summary under each, simulated once for a gain's interval and a step's.
struct VariantRun {
  std::string term;
  std::vector<TokenSummary> summaries;
};
std::vector<VariantRun> simulate_variants(const Config& config, std::span<const int> dataset);

// Each policy's gain prediction (none for the first): `gains[p]` over the seeds, the first at the
// config's seed, whose run is `first` (its noise-off run `quiet`, null: none), beside the
// model's variants at that seed. One seed gives a seeds' range of the gain alone.
std::vector<GainPrediction> gain_predictions(const Config& config, std::span<const VariantRun> variants,
                                             const SimulationRun& first, const SimulationRun* quiet,
                                             const std::vector<std::vector<double>>& gains);

// The same for configs rather than policies (`ddpsim compare --against`): each column's config,
// one policy each, against the first's. `variants[c]`: column c's config's variants on its own
// dataset (config_variant_runs). Each variant is applied to both sides of a gain (its k-th
// occurrence of a term in one config paired with the k-th in the other; a side without it runs
// unvaried), and the fixed terms are those of runs apart, from both models where they differ:
// two configs never train in one process in turn.
std::vector<GainPrediction> config_gain_predictions(std::span<const Config> configs,
                                                    std::span<const std::vector<VariantRun>> variants,
                                                    const SimulationRun& first, const SimulationRun* quiet,
                                                    const std::vector<std::vector<double>>& gains);
// Each column's config's variants: the model's, and the network at half its links' bandwidth
// where it is not the model's measured one, simulated on `datasets[c]` under its one policy.
std::vector<std::vector<VariantRun>> config_variant_runs(std::span<const Config> configs,
                                                         std::span<const std::vector<int>> datasets);

// "+21.30% (seeds [+20.30, +22.20]; prediction [+9.0, +31.0], mostly: spec-derived compute)"
std::string gain_prediction_text(const GainPrediction& g, const char* seeds_name = "seeds");
nlohmann::ordered_json gain_prediction_json(const GainPrediction& g);
// The terms' half-widths in one line: "model form ±1.6, session ±0.5, first use ±0.2 pp" (a gain's
// in pp, a step time's in %), and as a JSON object of name: half-width.
std::string terms_text(std::span<const UncertaintyTerm> terms, const char* unit);
std::string terms_text(const GainPrediction& g);
nlohmann::ordered_json terms_json(std::span<const UncertaintyTerm> terms);

}  // namespace ddpsim
