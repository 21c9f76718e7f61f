// The "untrained tokens" term: rank-steps beyond the tokens a model's levels were measured at
// take the profile's surface in its variant, and a gain whose rank-steps all lie within them
// carries no such term.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "eval/config.hpp"
#include "eval/simulate.hpp"
#include "eval/uncertainty.hpp"
#include "gain_terms.hpp"
#include "model/perf_model.hpp"

using namespace ddpsim;

namespace {

// A model whose training runs sat ×1.3 over the surface at 120 tokens and ×1.2 at 180, measured
// over rank-steps of 100 to 200 tokens; no noise, so a variant's change is the level's alone.
PerfModel levelled_model() {
  PerfModel m = load_perf_model("rtx3090-distilbert");
  for (PhaseModel* p : {&m.forward, &m.backward}) {
    p->analytic = {2, 0.3, 0};
    p->grid = {};
    p->use = PhaseForm::analytic;
  }
  m.supported_forms.clear();
  m.noise_sigma = m.noise_shared_sigma = 0;
  m.spell_quantiles.clear();
  m.noise_above = {};
  m.first_use_ms = 0;
  m.step_factors = {{1.0, 1.0}};
  m.step_levels = {{120, 1.3}, {180, 1.2}};
  m.steps_tokens = {100, 200};
  return m;
}

// Two ranks, B = 8: each rank-step 4 samples of the data's lengths, padded or packed.
Config config_with(const PerfModel& m, int length, const char* attention) {
  nlohmann::json doc = {
      {"data", {{"source", "lognormal"}, {"mean", length}, {"std", length / 4}, {"min", 4}, {"max", 4 * length},
                {"samples", 4000}}},
      {"training", {{"world_size", 2}, {"global_batch", 8}, {"max_length", 4 * length}, {"steps", 40},
                    {"seed", 3}, {"attention", attention}}},
      {"policies", {"static", "sorted"}}};
  Config c = parse_config(doc, "test config", "");
  c.model = std::make_shared<PerfModel>(m);
  return c;
}

GainPrediction predicted(const Config& c) {
  const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(c.training.seed);
  const SimulationRun sim = simulate(c, dataset);
  const std::vector<double> gains = run_gains(sim);
  return gain_predictions(c, simulate_variants(c, dataset), sim, nullptr, {{0}, {gains[1]}}).at(1);
}

}  // namespace

TEST_CASE("the variant puts rank-steps outside the measured tokens on the surface, and only those") {
  PerfModel m = levelled_model();
  CHECK(m.step_level(150, 4) == doctest::Approx(std::exp(0.5 * std::log(1.3) + 0.5 * std::log(1.2))).epsilon(0.02));
  CHECK(m.step_level(400, 4) == doctest::Approx(1.2));  // held from the table's end, as fitted
  CHECK(m.step_level(50, 4) == doctest::Approx(1.3));
  CHECK(!m.untrained_tokens(100));
  CHECK(!m.untrained_tokens(200));
  CHECK(m.untrained_tokens(99));
  CHECK(m.untrained_tokens(201));
  m.untrained_tokens_on_surface = true;
  CHECK(m.step_level(400, 4) == 1);
  CHECK(m.step_level(50, 4) == 1);
  CHECK(m.step_level(200, 4) == doctest::Approx(1.2));
  CHECK(m.step_level(100, 4) == doctest::Approx(1.3));
  // A model that does not record the range has nothing outside it.
  m.steps_tokens = {0, 0};
  CHECK(m.step_level(400, 4) == doctest::Approx(1.2));
}

TEST_CASE("a model that records its levels' tokens gets the variant; one that does not, none") {
  PerfModel m = levelled_model();
  const auto variants = model_variants(config_with(m, 30, "padded"));
  REQUIRE(variants.size() == 1);
  CHECK(variants[0].term == std::string(kUntrainedTokens));
  m.steps_tokens = {0, 0};
  CHECK(model_variants(config_with(m, 30, "padded")).empty());
}

TEST_CASE("a gain whose rank-steps go beyond the measured tokens carries the term; one within, none") {
  const PerfModel m = levelled_model();
  // Packed rank-steps of 4 samples of ~8 tokens: all below 100, where the variant drops ×1.3.
  const Config below = config_with(m, 8, "packed");
  const GainPrediction g = predicted(below);
  const auto dataset = make_length_source(below.data, below.training.max_length)->dataset(below.training.seed);
  const SimulationRun surface = simulate(model_variants(below)[0].config, dataset);
  const double want = std::abs(run_gains(surface)[1] - g.gain_pct);
  REQUIRE(want > 0.1);  // the level scales compute, not the allreduce or optimizer: the gain moves
  CHECK(term_of(g, kUntrainedTokens) == doctest::Approx(want));

  // Rank-steps of 4 samples of ~35 tokens (padded ~140-200): within the range, no term.
  PerfModel wide = m;
  wide.steps_tokens = {1, 100000};
  CHECK(term_of(predicted(config_with(wide, 35, "padded")), kUntrainedTokens) == -1);
}
