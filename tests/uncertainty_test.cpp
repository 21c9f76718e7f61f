// Prediction intervals: how the terms combine, which variants a model gets, and, on synthetic
// runs whose true form lies anywhere between the two a fit supports, that the interval holds
// the truth at its stated rate where the seeds' range alone does not.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "common/stats.hpp"
#include "eval/config.hpp"
#include "eval/pipeline_uncertainty.hpp"
#include "eval/simulate.hpp"
#include "eval/uncertainty.hpp"
#include "gain_terms.hpp"

using namespace ddpsim;

namespace {

Config small_config(std::uint64_t seed) {
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 50}, {"min", 8}, {"max", 256}, {"samples", 20000}}},
      {"training", {{"world_size", 4}, {"global_batch", 64}, {"max_length", 256}, {"steps", 60}, {"seed", seed}}},
      {"policies", {"static", "minmax"}}};
  return parse_config(doc, "test config", "");
}

// Analytic in use, a roofline whose launch floor hides small shapes beside it, both supported.
PerfModel two_form_model() {
  PerfModel m = load_perf_model("rtx3090-distilbert");
  for (PhaseModel* p : {&m.forward, &m.backward}) {
    const double k = p == &m.forward ? 1 : 2;
    p->analytic = {0, 0.004 * k, 1e-6 * k};
    p->roofline = {20 * k, {0, 0.004 * k, 1e-6 * k}};
    p->has_roofline = true;
    p->grid = {};
    p->use = PhaseForm::analytic;
  }
  m.supported_forms = {PhaseForm::analytic, PhaseForm::roofline};
  m.noise_sigma = 0.03;
  m.noise_shared_sigma = 0;
  m.spell_quantiles.clear();
  m.noise_above = {};
  m.session_below_pp = m.session_above_pp = 0;  // the synthetic runs have no session
  m.session_source = "none: synthetic runs";
  m.first_use_ms = 0;
  return m;
}

// The roofline with its floor at w times the fitted one: a truth between the two forms (w = 0:
// the analytic form, w = 1: the roofline).
PerfModel between(const PerfModel& m, double w) {
  PerfModel t = m;
  for (PhaseModel* p : {&t.forward, &t.backward}) {
    p->roofline.floor_ms *= w;
    p->use = PhaseForm::roofline;
  }
  return t;
}

double gain_of(const Config& c) {
  const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(c.training.seed);
  const SimulationRun sim = simulate(c, dataset);
  return 100 * (1 - sim.summaries[1].mean_max_step_ms / sim.summaries[0].mean_max_step_ms);
}

Config with_model(Config c, const PerfModel& m) {
  c.model = std::make_shared<PerfModel>(m);
  return c;
}

}  // namespace

TEST_CASE("terms combine in quadrature with each side of the seeds' range; the widest names the interval") {
  const GainPrediction g = predict_gain(10, 9, 11.5, {{"session", 3}, {"model form", 4}, {"session", 1}});
  REQUIRE(g.terms.size() == 2);  // a term given twice counts once, its wider
  CHECK(g.terms[0].half_width_pp == 3);
  CHECK(g.lo == doctest::Approx(10 - std::sqrt(1 + 25)));
  CHECK(g.hi == doctest::Approx(10 + std::sqrt(1.5 * 1.5 + 25)));
  CHECK(g.mostly == "model form");
  CHECK(g.told_from_noise());
  CHECK(gain_prediction_text(g) == "+10.00% (seeds [+9.00, +11.50]; prediction [+4.9, +15.2], mostly: model form)");
  const GainPrediction small = predict_gain(0.4, 0.3, 0.5, {{"session", 2.2}});
  CHECK_FALSE(small.told_from_noise());
  CHECK(gain_prediction_text(small).find("cannot be told from no gain") != std::string::npos);
  CHECK(predict_gain(0, 0, 0, {}).mostly == "seeds");
}

TEST_CASE("a model's variants: its other supported forms, first use either way, a spec's ranges") {
  Config c = small_config(0);
  PerfModel m = two_form_model();
  auto variants = model_variants(with_model(c, m));
  REQUIRE(variants.size() == 1);
  CHECK(variants[0].term == "model form");
  CHECK(variants[0].config.model->forward.use == PhaseForm::roofline);

  m.supported_forms.clear();  // no held-out errors by form: no form term
  m.first_use_ms = 100;
  variants = model_variants(with_model(c, m));
  REQUIRE(variants.size() == 2);
  CHECK(variants[0].config.model->first_use_ms == doctest::Approx(80));
  CHECK(variants[1].config.model->first_use_ms == doctest::Approx(120));
  c.simulation.first_use = "off";
  CHECK(model_variants(with_model(c, m)).empty());

  m.source = "derived from specs, not profiled: a test";
  m.platform = nlohmann::json::object();  // no measured network: the preset's is an assumption
  const auto spec = model_variants(with_model(c, m));
  int compute = 0, network = 0;
  for (const auto& v : spec) compute += v.term == "spec-derived compute", network += v.term == "network";
  CHECK(compute == 3);  // efficiency either way, and a launch floor
  CHECK(network == 1);
  CHECK(spec.back().config.platform.link_GBps == doctest::Approx(c.platform.link_GBps / 2));
  CHECK(std::none_of(spec.begin(), spec.end(), [](const auto& v) { return v.term == "stated interference"; }));

  // In reduced precision a spec also lacks the first use of a shape, which the H100 and H200
  // measured at 136-179 ms in bf16 (under 1 ms in fp32): one more compute variant.
  m.first_use_ms = 0;
  c.simulation.first_use = "shared";
  const auto count_compute = [&](const PerfModel& model) {
    const auto variants = model_variants(with_model(c, model));
    return std::count_if(variants.begin(), variants.end(),
                         [](const auto& v) { return v.term == "spec-derived compute"; });
  };
  m.precision = "fp32";
  CHECK(count_compute(m) == 3);
  for (const char* reduced : {"bf16", "fp16", "fp8"}) {
    m.precision = reduced;
    CHECK(count_compute(m) == 4);
  }
  const auto bf16 = model_variants(with_model(c, m));
  CHECK(std::any_of(bf16.begin(), bf16.end(), [](const auto& v) { return v.config.model->first_use_ms > 100; }));
  m.first_use_ms = 50;  // a spec that states its own: the first-use term varies that one instead
  CHECK(count_compute(m) == 3);
  m.first_use_ms = 0;
  c.simulation.first_use = "off";
  CHECK(count_compute(m) == 3);

  m.comm_slowdown = 1.2;  // a spec's stated factor: the gain without it bounds the guess
  const auto stated = model_variants(with_model(c, m));
  const auto it =
      std::find_if(stated.begin(), stated.end(), [](const auto& v) { return v.term == "stated interference"; });
  REQUIRE(it != stated.end());
  CHECK(it->config.model->comm_slowdown == 1);
}

TEST_CASE("the session term follows the regime of both runs' slowest micro-batches") {
  PerfModel m = load_perf_model("rtx3090-distilbert");
  m.noise_above.tokens = 1000;
  m.noise_sigma = 0.08;
  m.noise_above.sigma = 0.002;
  TokenSummary below, above;
  below.mean_max_padded_tokens = 600;
  above.mean_max_padded_tokens = 3000;
  above.mean_micro_batches = 2;  // 1,500 tokens a micro-batch: still above
  CHECK(fixed_terms(m, 5, above, above)[0].half_width_pp == doctest::Approx(kCampaignSessionAbovePp));
  CHECK(fixed_terms(m, 5, below, above)[0].half_width_pp ==
        doctest::Approx((kCampaignSessionBelowPp + kCampaignSessionAbovePp) / 2));
  CHECK(session_spread(m).source.find("campaigns") != std::string::npos);
  m.noise_above.sigma = 0.04;  // σ's of one order: one kind of rank-step, the launch-bound figure
  CHECK(fixed_terms(m, 5, above, above)[0].half_width_pp == doctest::Approx(kCampaignSessionBelowPp));
  // Measured steps in place of the σ's (both 0): the profile's ratio, steps_scale, tells.
  m.noise_sigma = m.noise_above.sigma = 0;
  m.noise_above.steps_scale = 0.44;  // a CPU's
  CHECK(fixed_terms(m, 5, above, above)[0].half_width_pp == doctest::Approx(kCampaignSessionBelowPp));
  m.noise_above.steps_scale = 0.015;  // an H100's
  CHECK(fixed_terms(m, 5, above, above)[0].half_width_pp == doctest::Approx(kCampaignSessionAbovePp));
  m.fit_warning = "fits poorly";
  m.fit_heldout_mape = 0.2;
  const auto terms = fixed_terms(m, 20, below, below);
  REQUIRE(terms.size() == 2);
  CHECK(terms[1].name == "fit");
  CHECK(terms[1].half_width_pp == doctest::Approx(16));  // 20% of the 80% of the step left
}

TEST_CASE("over 200 synthetic runs whose true form lies between the supported two, the interval holds the truth") {
  const PerfModel m = two_form_model();
  const Config base = with_model(small_config(0), m);
  std::vector<double> seeds;
  for (std::uint64_t s = 0; s < 20; ++s) seeds.push_back(gain_of(with_model(small_config(s), m)));
  std::vector<VariantGain> variants;
  for (const ConfigVariant& v : model_variants(base)) variants.push_back({v.term, gain_of(v.config)});
  std::vector<UncertaintyTerm> terms = variant_terms(seeds[0], variants);
  for (auto& t : noise_term(seeds[0], gain_of(without_compute_noise(base)))) terms.push_back(t);
  const GainPrediction g = predict_gain(mean(seeds), percentile(seeds, 2.5), percentile(seeds, 97.5), terms);
  REQUIRE(g.mostly == "model form");  // the setting makes the form matter more than the seeds

  int inside = 0, inside_seeds = 0;
  constexpr int kRuns = 200;
  for (int k = 0; k < kRuns; ++k) {
    const double truth = gain_of(with_model(small_config(1000 + k), between(m, (k + 0.5) / kRuns)));
    inside += g.lo <= truth && truth <= g.hi;
    inside_seeds += g.seeds_lo <= truth && truth <= g.seeds_hi;
  }
  MESSAGE("prediction ", g.lo, " .. ", g.hi, " covers ", inside, " of ", kRuns, "; the seeds' range ", g.seeds_lo,
          " .. ", g.seeds_hi, " covers ", inside_seeds);
  // Stated rate 95%; tolerance 5 pp (3.3 binomial standard deviations at 200 runs).
  CHECK(inside >= 0.90 * kRuns);
  CHECK(inside_seeds < 0.60 * kRuns);  // what the seeds alone would claim
}

TEST_CASE("a pipeline job's network variant slows the links it copied from the platform, and moves its gains") {
  // A spec-derived Llama on 2 nodes of 4 GPUs: each stage's syncs cross the NICs.
  const Config c = parse_config(
      nlohmann::json{{"model", std::string(DDPSIM_SOURCE_DIR) + "/models/llama-3.2-1b-h100.json"},
                     {"training", {{"world_size", 8}, {"global_batch", 16}, {"steps", 3}, {"max_length", 512}}},
                     {"policies", {"static", "kk"}},
                     {"platform", {{"topology", "cluster"}, {"gpus_per_node", 4}}},
                     {"data", {{"source", "lognormal"}, {"mean", 300}, {"std", 200}, {"max", 512}}},
                     {"parallel", {{"stages", 2}, {"micro_batches", 2}}}},
      "c.json", "");
  const auto variants = model_variants(c);
  const auto network =
      std::find_if(variants.begin(), variants.end(), [](const auto& v) { return v.term == "network"; });
  REQUIRE(network != variants.end());
  const auto &slow = network->config.parallel->setup.channels, &given = c.parallel->setup.channels;
  CHECK(slow.bytes_per_s == doctest::Approx(given.bytes_per_s / 2));
  CHECK(slow.fabric.nic_bytes_per_s == doctest::Approx(given.fabric.nic_bytes_per_s / 2));
  CHECK(slow.fabric.leaf_bytes_per_s == doctest::Approx(given.fabric.leaf_bytes_per_s / 2));
  const auto first = simulate_parallel(c), slower = simulate_parallel(network->config);
  CHECK(slower[0].step_mean > first[0].step_mean);
  const auto both = pipeline_predictions(c, first, nullptr, {{0.0}, pipeline_gains(first)},
                                         {{first[0].step_mean}, {first[1].step_mean}});
  const auto& predicted = both.gains;
  REQUIRE(predicted.size() == 2);
  CHECK(predicted[1].lo <= predicted[1].gain_pct);
  CHECK(predicted[1].hi >= predicted[1].gain_pct);
  const auto session = std::find_if(predicted[1].terms.begin(), predicted[1].terms.end(),
                                    [](const UncertaintyTerm& t) { return t.name == "session"; });
  REQUIRE(session != predicted[1].terms.end());
  CHECK(session->half_width_pp == doctest::Approx(kCampaignSessionBelowPp));  // a pipeline takes the wider one
  // Each mean step carries the same variants, as its own change; a spec-derived model no level.
  REQUIRE(both.steps.size() == 2);
  for (std::size_t p = 0; p < 2; ++p) {
    const auto& terms = both.steps[p].terms;
    const auto net =
        std::find_if(terms.begin(), terms.end(), [](const UncertaintyTerm& t) { return t.name == "network"; });
    REQUIRE(net != terms.end());
    const double slowed = 100 * (simulate_parallel(network->config)[p].step_mean / first[p].step_mean - 1);
    CHECK(net->half_width_pp == doctest::Approx(slowed));
    CHECK(std::none_of(terms.begin(), terms.end(), [](const UncertaintyTerm& t) {
      return t.name == "process level" || t.name == "training loop";
    }));
    CHECK(both.steps[p].lo_ms < first[p].step_mean * (1 - slowed / 100 + 1e-9));
    CHECK(both.steps[p].hi_ms > first[p].step_mean * (1 + slowed / 100 - 1e-9));
  }
}

namespace {

Config one_policy_config(int world_size, const char* topology) {
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", 60}, {"std", 50}, {"min", 8}, {"max", 256}, {"samples", 20000}}},
      {"training", {{"world_size", world_size}, {"global_batch", 64}, {"max_length", 256}, {"steps", 40}, {"seed", 5}}},
      {"platform", {{"topology", topology}}},
      {"policies", {"static"}}};
  return parse_config(doc, "test config", "");
}

// Each config's data and its run at its seed, as `compare --against` sets columns side by side.
struct Columns {
  std::vector<std::vector<int>> datasets;
  SimulationRun first;
};
Columns simulate_columns(const std::vector<Config>& configs) {
  Columns out;
  for (const Config& c : configs) {
    out.datasets.push_back(make_length_source(c.data, c.training.max_length)->dataset(c.training.seed));
    SimulationRun one = simulate(c, out.datasets.back());
    out.first.runs.push_back(one.runs.at(0));
    out.first.summaries.push_back(one.summaries.at(0));
  }
  return out;
}

}  // namespace

TEST_CASE("a gain between configs sets each model variant on both sides; its session is that of runs apart") {
  PerfModel m = two_form_model();
  m.session_below_pp = m.session_above_pp = 1;
  std::vector<Config> configs = {with_model(one_policy_config(4, "pcie"), m),
                                 with_model(one_policy_config(8, "pcie"), m),
                                 with_model(one_policy_config(4, "nvlink"), m)};
  REQUIRE(configs[0].network_from_model);
  REQUIRE(!configs[2].network_from_model);  // another topology than the model's calibrated one
  const auto run = [&](const Config& c, std::span<const int> data) { return simulate(c, data).summaries.at(0); };
  const auto [datasets, first] = simulate_columns(configs);
  const std::vector<double> at_seed = run_gains(first);
  const std::vector<std::vector<double>> gains = {{0}, {at_seed[1]}, {at_seed[2]}};
  const std::vector<GainPrediction> p =
      config_gain_predictions(configs, config_variant_runs(configs, datasets), first, nullptr, gains);
  // The model form: both sides under the roofline, not one side alone.
  const double roofline_gain = summary_gain(run(with_model(configs[1], between(m, 1)), datasets[1]),
                                            run(with_model(configs[0], between(m, 1)), datasets[0]));
  CHECK(term_of(p[1], "model form") == doctest::Approx(std::abs(roofline_gain - at_seed[1])));
  CHECK(term_of(p[1], "session") == doctest::Approx(kRunsApartFactor * 1));
  CHECK(term_of(p[1], "network") == -1);  // both sides on the model's calibrated network
  // NVLink is a preset's network: its side at half the bandwidth, the base's as it is.
  Config slow = configs[2];
  slow.platform.link_GBps *= 0.5;
  slow.platform.nic_GBps *= 0.5;
  const double slow_gain = summary_gain(run(slow, datasets[2]), first.summaries[0]);
  CHECK(term_of(p[2], "network") == doctest::Approx(std::abs(slow_gain - at_seed[2])));
}

TEST_CASE("a variant one config has and the other has not is set on its side alone") {
  PerfModel m = two_form_model();
  m.supported_forms.clear();
  m.first_use_ms = 40;
  std::vector<Config> configs = {with_model(one_policy_config(4, "pcie"), m),
                                 with_model(one_policy_config(4, "pcie"), m)};
  configs[1].simulation.first_use = "off";  // no first-use variant on this side
  const auto [datasets, first] = simulate_columns(configs);
  const double gain = run_gains(first)[1];
  const std::vector<GainPrediction> p =
      config_gain_predictions(configs, config_variant_runs(configs, datasets), first, nullptr, {{0}, {gain}});
  double want = 0;
  for (double k : {0.8, 1.2}) {
    PerfModel scaled = m;
    scaled.first_use_ms *= k;
    const TokenSummary base = simulate(with_model(configs[0], scaled), datasets[0]).summaries.at(0);
    want = std::max(want, std::abs(summary_gain(first.summaries[1], base) - gain));
  }
  REQUIRE(want > 0.01);  // the first use costs the base something
  const auto it = std::find_if(p[1].terms.begin(), p[1].terms.end(),
                               [](const UncertaintyTerm& t) { return t.name == "first use"; });
  REQUIRE(it != p[1].terms.end());
  CHECK(it->half_width_pp == doctest::Approx(want));
}

TEST_CASE("a batch size the training runs never held adds a term on its side alone, a doubling at a time") {
  PerfModel m = two_form_model();
  m.supported_forms.clear();
  m.steps_samples = {16, 16};  // world 4, B = 64: the runs' 16 samples a rank-step
  CHECK(m.untrained_doublings(16) == 0);
  CHECK(m.untrained_doublings(4) == doctest::Approx(-2));
  CHECK(m.untrained_doublings(64) == doctest::Approx(2));
  // One size: this project's CPU figures, ×1.51 a halving below, ×1.15 a doubling above; tables
  // of several: their largest change a doubling where it passes those (a flat stretch says
  // nothing of the sizes beyond it).
  const auto steps = [&] {
    const PerfModel::SizeSteps s = m.untrained_size_steps();
    return std::pair(std::exp(s.below), std::exp(s.above));
  };
  CHECK(steps().first == doctest::Approx(1.51).epsilon(0.01));
  CHECK(steps().second == doctest::Approx(1.15).epsilon(0.01));
  // Below, the smallest two tables speak; above, the largest two.
  m.samples_levels = {{4, {{10, 1.5}, {40, 1.5}}}, {16, {{10, 1.0}, {40, 1.0}}}, {32, {{10, 1.3}, {40, 1.3}}}};
  CHECK(steps().first == doctest::Approx(1.51).epsilon(0.01));  // ×1.5 over two doublings: the floor
  CHECK(steps().second == doctest::Approx(1.3));
  m.samples_levels[0].levels = {{10, 4.0}, {40, 4.0}};
  CHECK(steps().first == doctest::Approx(2.0));  // ×4 over two doublings
  m.samples_levels[2].levels = {{10, 0.9}, {40, 1.1}};
  CHECK(steps().second == doctest::Approx(1.15).epsilon(0.01));  // flat at the top: the floor
  m.samples_levels.clear();
  // The model as fitted charges no untrained level; its variant does, by the side it strays.
  CHECK(m.untrained_level(4) == 1);
  PerfModel varied = m;
  varied.untrained_size_slowdown = m.untrained_size_steps();
  CHECK(varied.untrained_level(16) == 1);
  CHECK(varied.untrained_level(4) == doctest::Approx(1.51 * 1.51).epsilon(0.02));
  CHECK(varied.untrained_level(32) == doctest::Approx(1.15).epsilon(0.01));

  // Base at the runs' 16 samples, a column at 8 (a halving below), another at 64 (two doublings
  // above): each direction a variant of its own, simulated wherever the model records sizes.
  std::vector<Config> configs;
  for (int B : {64, 32, 256}) {
    configs.push_back(with_model(one_policy_config(4, "pcie"), m));
    configs.back().training.global_batch = B;
  }
  const auto variants = model_variants(configs[0]);
  REQUIRE(variants.size() == 2);
  CHECK(variants[0].term == std::string(kUntrainedBelow));
  CHECK(variants[1].term == std::string(kUntrainedAbove));
  const auto [datasets, first] = simulate_columns(configs);
  const std::vector<double> gains = run_gains(first);
  const std::vector<GainPrediction> p = config_gain_predictions(configs, config_variant_runs(configs, datasets), first,
                                                                nullptr, {{0}, {gains[1]}, {gains[2]}});
  // The stray side's compute slowed (×1.51 a halving below, ×1.15² two doublings above), the
  // base's as it was; the direction no rank-step strayed into gives no term.
  for (int c : {1, 2}) {
    const ConfigVariant v = model_variants(configs[c])[c == 1 ? 0 : 1];
    const TokenSummary slowed = simulate(v.config, datasets[c]).summaries.at(0);
    CHECK(slowed.mean_max_compute_ms ==
          doctest::Approx(first.summaries[c].mean_max_compute_ms * (c == 1 ? 1.51 : 1.15 * 1.15)).epsilon(0.01));
    const double want = std::abs(summary_gain(slowed, first.summaries[0]) - gains[c]);
    REQUIRE(want > 3);
    CHECK(term_of(p[c], c == 1 ? kUntrainedBelow : kUntrainedAbove) == doctest::Approx(want));
    CHECK(term_of(p[c], c == 1 ? kUntrainedAbove : kUntrainedBelow) == -1);
  }
  // Two sides astray in opposite directions are two unknowns: each term its own side's alone
  // (set together, the base's slowing would cancel part of the column's).
  const std::vector<Config> apart = {configs[1], configs[2]};
  const auto [apart_data, both] = simulate_columns(apart);
  const double gain = run_gains(both)[1];
  const auto q = config_gain_predictions(apart, config_variant_runs(apart, apart_data), both, nullptr, {{0}, {gain}});
  const TokenSummary base_below = simulate(model_variants(apart[0])[0].config, apart_data[0]).summaries.at(0),
                     column_above = simulate(model_variants(apart[1])[1].config, apart_data[1]).summaries.at(0);
  CHECK(term_of(q[1], kUntrainedBelow) ==
        doctest::Approx(std::abs(summary_gain(both.summaries[1], base_below) - gain)));
  CHECK(term_of(q[1], kUntrainedAbove) ==
        doctest::Approx(std::abs(summary_gain(column_above, both.summaries[0]) - gain)));
  CHECK(term_of(q[1], kUntrainedAbove) > 1);

  // The config's size for the note: its rank's largest micro-batch, where a policy fixes it.
  configs[0].training.micro_batches = 3;
  CHECK(configs[0].fixed_batch_samples() == 6);  // 16 samples in 6, 5, 5
  configs[0].policies = {PolicySpec{"static", {}, {}}, PolicySpec{"token_budget", {{"max_tokens", "1024"}}, {}}};
  CHECK(configs[0].fixed_batch_samples() == 6);
  configs[0].policies = {PolicySpec{"token_budget", {{"max_tokens", "1024"}}, {}}};
  CHECK(configs[0].fixed_batch_samples() == 0);
}
