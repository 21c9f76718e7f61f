#include "eval/uncertainty.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "common/stats.hpp"
#include "eval/simulate.hpp"
#include "report/outputs.hpp"

namespace ddpsim {

namespace {

// A shape's first-use cost in four bf16 sessions on one H100: 112-151 ms around the 136 ms a
// model fitted (this project's third campaign), about a fifth either way.
constexpr double kFirstUseRange = 0.2;
// A spec's efficiency is a guess: ×1.5 either way covers the 30-75% of peak that dense
// transformer training reaches in published runs.
constexpr double kSpecEfficiencyRange = 1.5;
// A launch floor per parameter tensor, forward and backward, which a spec has none of: eager
// PyTorch's under bf16 autocast on an H200 (SmolLM-135M and Llama-3.2-1B up to 2,048 tokens:
// 0.12-0.28 and 0.24-0.36 ms); LibTorch's C++ stays below it (DistilBERT: 0.03-0.05, 0.06-0.11).
constexpr double kSpecFloorPerTensorMs[2] = {0.12, 0.24};
// The first use of a shape in reduced precision, which a spec does not know either: 136 ms
// (DistilBERT in LibTorch, bf16, an H100), 181 ms (the same on an H200) and 179 ms (SmolLM-135M
// in eager PyTorch, an H200); in fp32 it was under 1 ms.
constexpr double kSpecFirstUseMs = 179;
// A spec-derived gain is held to half of itself beside its simulated ranges: the one
// spec-derived prediction compared with a run here (DistilBERT, fp32, campaign 2's setting)
// missed by 12% of its gain, and what specs cannot know — a shape's first-use cost, a launch
// floor — turned campaign 3's bf16 gains from positive to −55% (docs/intervals.md).
constexpr double kSpecGainShare = 0.5;
// A preset's link bandwidth is the wire's; collectives reach about half of it at worst.
constexpr double kSpecNetworkShare = 0.5;

// The campaigns' compute-bound figure is for rank-steps whose σ is an order of magnitude below
// the launch-bound one's (an H100's 0.002 against 0.08); a knee between two σ's of one order
// (a CPU's 0.026 and 0.012) does not make compute-bound rank-steps of that kind.
constexpr double kComputeBoundSigmaRatio = 10;

// Whether the model's knee parts two regimes of that kind. A model with measured steps
// (calibrate --training) sets its σ's to 0 and keeps the profile's two as their ratio, steps_scale.
bool regimes_apart(const PerfModel& m) {
  if (m.noise_above.tokens <= 0) return false;
  if (m.noise_sigma > 0 || m.noise_above.sigma > 0)
    return m.noise_above.sigma * kComputeBoundSigmaRatio <= m.noise_sigma;
  return m.noise_above.steps_scale * kComputeBoundSigmaRatio <= 1;
}

// The regime a run's slowest micro-batches sit in: their mean tokens against the knee.
bool compute_bound(const PerfModel& m, const TokenSummary& s) {
  const double tokens = s.mean_max_padded_tokens / std::max(1.0, s.mean_micro_batches);
  return regimes_apart(m) && tokens >= static_cast<double>(m.noise_above.tokens);
}

std::string signed_pct(double v, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%+.*f", digits, shown(v, digits));  // never "-0.00"
  return text;
}

}  // namespace

std::vector<ConfigVariant> model_variants(const Config& config) {
  std::vector<ConfigVariant> out;
  if (!config.model || !can_simulate_again(config)) return out;
  const PerfModel& m = *config.model;
  const auto with_model = [&](const char* term, auto edit) {
    auto model = std::make_shared<PerfModel>(m);
    edit(*model);
    Config variant = config;
    variant.model = std::move(model);
    out.push_back({term, std::move(variant)});
  };
  for (PhaseForm form : m.supported_forms)
    if (m.forward.has(form) && m.backward.has(form) && (form != m.forward.use || form != m.backward.use))
      with_model("model form", [form](PerfModel& v) { v.forward.use = v.backward.use = form; });
  if (m.first_use_ms > 0 && config.simulation.first_use != "off")
    for (double k : {1 - kFirstUseRange, 1 + kFirstUseRange})
      with_model("first use", [k](PerfModel& v) { v.first_use_ms *= k; });
  // Batch sizes the training runs never held: their rank-steps' level slowed as far as a halving
  // or a doubling moved it where measured, per doubling outside them, each direction a term of
  // its own (two unknowns). Whether a rank-step strays is its own samples' matter (minmax's vary,
  // a trace's are recorded), so both are simulated wherever the model records its sizes; one
  // that no rank-step strayed into changes nothing and variant_terms drops it.
  if (m.steps_samples.first > 0 && !config.parallel) {
    with_model(kUntrainedBelow, [](PerfModel& v) { v.untrained_size_slowdown.below = v.untrained_size_steps().below; });
    with_model(kUntrainedAbove, [](PerfModel& v) { v.untrained_size_slowdown.above = v.untrained_size_steps().above; });
  }
  // Tokens the training runs' levels were not measured at: those rank-steps on the profile's surface
  // in place of the level held from the table's end (padded rank-steps of 280 tokens, from levels
  // measured packed at 81-119, ran within 5% of the surface and 13-24% under the held level).
  if (m.steps_tokens.first > 0 && !config.parallel)
    with_model(kUntrainedTokens, [](PerfModel& v) { v.untrained_tokens_on_surface = true; });
  if (!m.spec_derived()) return out;
  for (double k : {kSpecEfficiencyRange, 1 / kSpecEfficiencyRange})
    with_model("spec-derived compute", [k](PerfModel& v) {
      v.forward = v.forward.scaled(k);
      v.backward = v.backward.scaled(k);
    });
  with_model("spec-derived compute", [](PerfModel& v) {
    const double tensors = static_cast<double>(v.layers.size());
    PhaseModel* phases[2] = {&v.forward, &v.backward};
    for (int p = 0; p < 2; ++p) {
      phases[p]->roofline = {kSpecFloorPerTensorMs[p] * tensors, phases[p]->analytic};
      phases[p]->has_roofline = true;
      phases[p]->use = PhaseForm::roofline;
    }
  });
  if (m.first_use_unknown() && config.simulation.first_use != "off")
    with_model("spec-derived compute", [](PerfModel& v) { v.first_use_ms = kSpecFirstUseMs; });
  // Interference factors a spec states are the user's guess: how far the gain moves without them.
  if (m.comm_slowdown != 1 || m.allreduce_slowdown != 1)
    with_model("stated interference", [](PerfModel& v) { v.comm_slowdown = v.allreduce_slowdown = 1; });
  if (m.platform.empty()) out.push_back(network_variant(config));
  return out;
}

ConfigVariant network_variant(const Config& config) {
  Config slow = config;
  slow.platform.link_GBps *= kSpecNetworkShare;
  slow.platform.nic_GBps *= kSpecNetworkShare;
  if (slow.parallel) {  // a pipeline's links were copied from the platform as the config was read
    pipeline::ChannelConfig& links = slow.parallel->setup.channels;
    links.bytes_per_s *= kSpecNetworkShare;
    links.fabric.nic_bytes_per_s *= kSpecNetworkShare;
    links.fabric.leaf_bytes_per_s *= kSpecNetworkShare;
  }
  return {"network", std::move(slow)};
}

// Below this a variant moved a gain by rounding alone (the same rank-steps summed another way).
constexpr double kNoWidthPp = 1e-6;

std::vector<UncertaintyTerm> variant_terms(double gain_pct, std::span<const VariantGain> variants) {
  std::vector<UncertaintyTerm> terms;
  for (const VariantGain& v : variants) {
    auto it = std::find_if(terms.begin(), terms.end(), [&](const UncertaintyTerm& t) { return t.name == v.term; });
    if (it == terms.end()) it = terms.insert(terms.end(), {v.term, 0});
    it->half_width_pp = std::max(it->half_width_pp, std::abs(v.gain_pct - gain_pct));
  }
  std::erase_if(terms, [](const UncertaintyTerm& t) {
    return (t.name == kUntrainedBelow || t.name == kUntrainedAbove || t.name == kUntrainedTokens) &&
           t.half_width_pp < kNoWidthPp;
  });
  return terms;
}

std::vector<UncertaintyTerm> noise_term(double gain_pct, double quiet_gain_pct) {
  if (std::isnan(quiet_gain_pct)) return {};
  return {{"noise model", std::abs(gain_pct - quiet_gain_pct)}};
}

SessionSpread session_spread(const PerfModel& model) {
  if (model.session_below_pp >= 0) return {model.session_below_pp, model.session_above_pp, model.session_source};
  return {kCampaignSessionBelowPp, kCampaignSessionAbovePp,
          "this project's H100 campaigns, not this model's: a gain moved ±2.2 pp between sessions where rank-steps "
          "were launch-bound, ±0.5 pp where compute-bound (policies trained in turn; ×2.5 for runs apart)"};
}

std::vector<UncertaintyTerm> fixed_terms(const PerfModel& model, double gain_pct, const TokenSummary& policy,
                                         const TokenSummary& base, bool runs_apart) {
  const SessionSpread s = session_spread(model);
  const auto regime = [&](const TokenSummary& t) { return compute_bound(model, t) ? s.above_pp : s.below_pp; };
  const double apart = runs_apart ? kRunsApartFactor : 1;
  std::vector<UncertaintyTerm> terms{{"session", apart * (regime(policy) + regime(base)) / 2}};
  // A held-out error e on each policy's step time moves their ratio by about e.
  if (!model.fit_warning.empty())
    terms.push_back({"fit", 100 * model.fit_heldout_mape * std::max(0.0, 1 - gain_pct / 100)});
  if (model.spec_derived()) terms.push_back({"spec-derived compute", kSpecGainShare * std::abs(gain_pct)});
  // Levels a and b of the two runs move 1 − gain by their ratio: by at most the spread.
  if (model.run_level_spread > 0)
    terms.push_back({"run level", 100 * model.run_level_spread * std::max(0.0, 1 - gain_pct / 100)});
  return terms;
}

std::string gain_regime(const PerfModel& model, const TokenSummary& policy, const TokenSummary& base) {
  if (!regimes_apart(model)) return "one regime";
  const int above = compute_bound(model, policy) + compute_bound(model, base);
  return above == 2 ? "compute-bound" : above == 1 ? "mixed" : "launch-bound";
}

GainPrediction predict_gain(double gain_pct, double seeds_lo, double seeds_hi, std::vector<UncertaintyTerm> terms) {
  GainPrediction g;
  g.gain_pct = gain_pct;
  g.seeds_lo = std::min(seeds_lo, gain_pct);
  g.seeds_hi = std::max(seeds_hi, gain_pct);
  std::vector<UncertaintyTerm> merged;  // a term simulated and also bounded counts once, its wider
  for (UncertaintyTerm& t : terms) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const UncertaintyTerm& m) { return m.name == t.name; });
    if (it == merged.end())
      merged.push_back(std::move(t));
    else
      it->half_width_pp = std::max(it->half_width_pp, t.half_width_pp);
  }
  terms = std::move(merged);
  double model = 0, widest = std::max(gain_pct - g.seeds_lo, g.seeds_hi - gain_pct);
  g.mostly = "seeds";
  for (const UncertaintyTerm& t : terms) {
    model += t.half_width_pp * t.half_width_pp;
    if (t.half_width_pp > widest) widest = t.half_width_pp, g.mostly = t.name;
  }
  g.lo = gain_pct - std::hypot(gain_pct - g.seeds_lo, std::sqrt(model));
  g.hi = gain_pct + std::hypot(g.seeds_hi - gain_pct, std::sqrt(model));
  g.terms = std::move(terms);
  return g;
}

double summary_gain(const TokenSummary& s, const TokenSummary& base, bool* per_sample) {
  const bool each = changes_samples_per_step(s.mean_global_batch, base.mean_global_batch);
  const double scale = each ? base.mean_global_batch / s.mean_global_batch : 1.0;
  if (per_sample) *per_sample = each;
  return 100 * (1 - s.mean_max_step_ms * scale / base.mean_max_step_ms);
}

std::vector<double> run_gains(const SimulationRun& sim, std::vector<bool>* per_sample) {
  std::vector<double> gains;
  if (per_sample) per_sample->clear();
  for (const TokenSummary& s : sim.summaries) {
    bool each = false;
    gains.push_back(summary_gain(s, sim.summaries[0], &each));
    if (per_sample) per_sample->push_back(each);
  }
  return gains;
}

std::vector<VariantRun> simulate_variants(const Config& config, std::span<const int> dataset) {
  std::vector<VariantRun> out;
  for (const ConfigVariant& v : model_variants(config))
    out.push_back({v.term, simulate_streamed(v.config, dataset, {0, 0}, {}, {}).summaries});
  return out;
}

std::vector<GainPrediction> gain_predictions(const Config& config, std::span<const VariantRun> variant_runs,
                                             const SimulationRun& first, const SimulationRun* quiet,
                                             const std::vector<std::vector<double>>& gains) {
  std::vector<bool> per_sample;
  const std::vector<double> at_seed = run_gains(first, &per_sample);
  const std::vector<double> off = quiet ? run_gains(*quiet) : std::vector<double>(at_seed.size(), NAN);
  std::vector<std::vector<VariantGain>> variants(at_seed.size());
  for (const VariantRun& v : variant_runs)
    for (std::size_t p = 1; p < at_seed.size(); ++p)
      variants[p].push_back({v.term, summary_gain(v.summaries[p], v.summaries[0])});
  std::vector<GainPrediction> out(at_seed.size());
  for (std::size_t p = 1; p < at_seed.size(); ++p) {
    std::vector<UncertaintyTerm> terms = variant_terms(at_seed[p], variants[p]);
    for (UncertaintyTerm& t : noise_term(at_seed[p], off[p])) terms.push_back(std::move(t));
    const double center = mean(gains[p]);
    for (UncertaintyTerm& t : fixed_terms(*config.model, center, first.summaries[p], first.summaries[0]))
      terms.push_back(std::move(t));
    out[p] = predict_gain(center, percentile(gains[p], 2.5), percentile(gains[p], 97.5), std::move(terms));
    out[p].per_sample = per_sample[p];
    out[p].regime = gain_regime(*config.model, first.summaries[p], first.summaries[0]);
  }
  return out;
}

namespace {

// Each variant with the occurrence of its term it is: the k-th "first use" is paired with the
// other config's k-th.
std::vector<std::pair<std::string, int>> occurrences(std::span<const VariantRun> variants) {
  std::vector<std::pair<std::string, int>> out;
  for (const VariantRun& v : variants)
    out.emplace_back(v.term, std::count_if(out.begin(), out.end(), [&](const auto& o) { return o.first == v.term; }));
  return out;
}

// A config's model variants, and its network slowed where that is not the model's measured one:
// within a config a preset's network moves policies' gains little, but between configs (PCIe
// against NVLink, 4 GPUs against 16 over a cluster) it is what the gain is made of.
std::vector<ConfigVariant> config_variants(const Config& config) {
  std::vector<ConfigVariant> out = model_variants(config);
  const bool has_network =
      std::any_of(out.begin(), out.end(), [](const ConfigVariant& v) { return v.term == "network"; });
  if (!has_network && !config.network_from_model && can_simulate_again(config)) out.push_back(network_variant(config));
  return out;
}

// One config's run beside another's under a model variant: the variant of the same occurrence
// where that config has one, else the config's own run.
struct VariantSide {
  std::span<const VariantRun> variants;
  std::vector<std::pair<std::string, int>> keys;
  const TokenSummary& unvaried;

  VariantSide(std::span<const VariantRun> v, const TokenSummary& s) : variants(v), keys(occurrences(v)), unvaried(s) {}
  const TokenSummary& under(const std::pair<std::string, int>& key) const {
    const auto it = std::find(keys.begin(), keys.end(), key);
    return it == keys.end() ? unvaried : variants[static_cast<std::size_t>(it - keys.begin())].summaries.at(0);
  }
};

// The model variants of a gain between two configs: every term occurrence in either side.
std::vector<VariantGain> paired_variant_gains(const VariantSide& base, const VariantSide& other) {
  std::vector<std::pair<std::string, int>> keys = base.keys;
  for (const auto& key : other.keys)
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  std::vector<VariantGain> out;
  for (const auto& key : keys) out.push_back({key.first, summary_gain(other.under(key), base.under(key))});
  return out;
}

}  // namespace

std::vector<std::vector<VariantRun>> config_variant_runs(std::span<const Config> configs,
                                                         std::span<const std::vector<int>> datasets) {
  std::vector<std::vector<VariantRun>> out;
  for (std::size_t c = 0; c < configs.size(); ++c) {
    auto& own = out.emplace_back();
    for (const ConfigVariant& v : config_variants(configs[c]))
      own.push_back({v.term, simulate_streamed(v.config, datasets[c], {0, 0}, {}, {}).summaries});
  }
  return out;
}

std::vector<GainPrediction> config_gain_predictions(std::span<const Config> configs,
                                                    std::span<const std::vector<VariantRun>> variants,
                                                    const SimulationRun& first, const SimulationRun* quiet,
                                                    const std::vector<std::vector<double>>& gains) {
  std::vector<bool> per_sample;
  const std::vector<double> at_seed = run_gains(first, &per_sample);
  const std::vector<double> off = quiet ? run_gains(*quiet) : std::vector<double>(at_seed.size(), NAN);
  const VariantSide base_side(variants[0], first.summaries[0]);
  std::vector<GainPrediction> out(at_seed.size());
  for (std::size_t c = 1; c < at_seed.size(); ++c) {
    std::vector<UncertaintyTerm> terms =
        variant_terms(at_seed[c], paired_variant_gains(base_side, VariantSide(variants[c], first.summaries[c])));
    for (UncertaintyTerm& t : noise_term(at_seed[c], off[c])) terms.push_back(std::move(t));
    const double center = mean(gains[c]);
    const TokenSummary &s = first.summaries[c], &base = first.summaries[0];
    for (UncertaintyTerm& t : fixed_terms(*configs[0].model, center, s, base, /*runs_apart=*/true))
      terms.push_back(std::move(t));
    if (configs[c].model->origin != configs[0].model->origin)  // predict_gain keeps the wider of a term twice
      for (UncertaintyTerm& t : fixed_terms(*configs[c].model, center, s, base, /*runs_apart=*/true))
        terms.push_back(std::move(t));
    out[c] = predict_gain(center, percentile(gains[c], 2.5), percentile(gains[c], 97.5), std::move(terms));
    out[c].per_sample = per_sample[c];
    out[c].regime = gain_regime(*configs[0].model, s, base);
  }
  return out;
}

std::string gain_prediction_text(const GainPrediction& g, const char* seeds_name) {
  return signed_pct(g.gain_pct, 2) + "% (" + seeds_name + " [" + signed_pct(g.seeds_lo, 2) + ", " +
         signed_pct(g.seeds_hi, 2) + "]; prediction [" + signed_pct(g.lo, 1) + ", " + signed_pct(g.hi, 1) +
         "], mostly: " + (g.mostly == "seeds" ? seeds_name : g.mostly) +
         (g.told_from_noise() ? ")" : "; cannot be told from no gain)");
}

std::string terms_text(std::span<const UncertaintyTerm> terms, const char* unit) {
  std::string out;
  for (const UncertaintyTerm& t : terms) {
    char text[96];
    std::snprintf(text, sizeof text, "%s%s ±%.2f", out.empty() ? "" : ", ", t.name.c_str(), t.half_width_pp);
    out += text;
  }
  return out.empty() ? "none" : out + " " + unit;
}

std::string terms_text(const GainPrediction& g) {
  return terms_text(g.terms, "pp");
}

nlohmann::ordered_json terms_json(std::span<const UncertaintyTerm> terms) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const UncertaintyTerm& t : terms) out[t.name] = t.half_width_pp;
  return out;
}

nlohmann::ordered_json gain_prediction_json(const GainPrediction& g) {
  return {{"gain_pct", g.gain_pct},
          {"seeds_interval", {g.seeds_lo, g.seeds_hi}},
          {"prediction_interval", {g.lo, g.hi}},
          {"mostly", g.mostly},
          {"regime", g.regime},
          {"terms_half_width_pp", terms_json(g.terms)},
          {"told_from_noise", g.told_from_noise()},
          {"per_sample", g.per_sample}};
}

}  // namespace ddpsim
