#include "eval/pipeline_uncertainty.hpp"

#include <cmath>

#include "common/stats.hpp"

namespace ddpsim {

std::vector<double> pipeline_gains(const std::vector<PipelineFigures>& columns) {
  std::vector<double> gains;
  for (const PipelineFigures& f : columns) gains.push_back(100 * (1 - f.step_mean / columns.front().step_mean));
  return gains;
}

std::vector<GainPrediction> pipeline_gain_predictions(const Config& config, const std::vector<PipelineFigures>& first,
                                                      const std::vector<PipelineFigures>* quiet,
                                                      const std::vector<std::vector<double>>& gains) {
  const std::vector<double> at_seed = pipeline_gains(first);
  const std::vector<double> off = quiet ? pipeline_gains(*quiet) : std::vector<double>(at_seed.size(), NAN);
  std::vector<std::vector<VariantGain>> variants(at_seed.size());
  for (const ConfigVariant& v : model_variants(config)) {
    const std::vector<double> g = pipeline_gains(simulate_parallel(v.config));
    for (std::size_t p = 1; p < at_seed.size(); ++p) variants[p].push_back({v.term, g[p]});
  }
  const PerfModel& m = *config.model;
  std::vector<GainPrediction> out(at_seed.size());
  for (std::size_t p = 1; p < at_seed.size(); ++p) {
    std::vector<UncertaintyTerm> terms = variant_terms(at_seed[p], variants[p]);
    for (UncertaintyTerm& t : noise_term(at_seed[p], off[p])) terms.push_back(std::move(t));
    const double center = mean(gains[p]);
    for (UncertaintyTerm& t : fixed_terms(m, center, TokenSummary{}, TokenSummary{})) terms.push_back(std::move(t));
    out[p] = predict_gain(center, percentile(gains[p], 2.5), percentile(gains[p], 97.5), std::move(terms));
    out[p].regime = gain_regime(m, TokenSummary{}, TokenSummary{}) == "one regime" ? "one regime" : "not classified";
  }
  return out;
}

}  // namespace ddpsim
