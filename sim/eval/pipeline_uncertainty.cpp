#include "eval/pipeline_uncertainty.hpp"

#include <cmath>

#include "common/stats.hpp"

namespace ddpsim {

std::vector<double> pipeline_gains(const std::vector<PipelineFigures>& columns) {
  std::vector<double> gains;
  for (const PipelineFigures& f : columns) gains.push_back(100 * (1 - f.step_mean / columns.front().step_mean));
  return gains;
}

PipelinePredictions pipeline_predictions(const Config& config, const std::vector<PipelineFigures>& first,
                                         const std::vector<PipelineFigures>* quiet,
                                         const std::vector<std::vector<double>>& gains,
                                         const std::vector<std::vector<double>>& means) {
  const std::size_t P = first.size();
  const std::vector<double> at_seed = pipeline_gains(first);
  const std::vector<double> off = quiet ? pipeline_gains(*quiet) : std::vector<double>(P, NAN);
  std::vector<std::vector<VariantGain>> variants(P);
  std::vector<std::vector<VariantStep>> steps(P);
  for (const ConfigVariant& v : model_variants(config)) {
    const std::vector<PipelineFigures> columns = simulate_parallel(v.config);
    const std::vector<double> g = pipeline_gains(columns);
    for (std::size_t p = 0; p < P; ++p) {
      if (p > 0) variants[p].push_back({v.term, g[p]});
      steps[p].push_back({v.term, columns[p].step_mean});
    }
  }
  const PerfModel& m = *config.model;
  PipelinePredictions out;
  out.gains.resize(P);
  for (std::size_t p = 0; p < P; ++p) {
    out.steps.push_back(mean_step_prediction(m, first[p].step_mean, steps[p], quiet ? (*quiet)[p].step_mean : NAN,
                                             mean(means[p]), percentile(means[p], 2.5), percentile(means[p], 97.5)));
    if (p == 0) continue;
    std::vector<UncertaintyTerm> terms = variant_terms(at_seed[p], variants[p]);
    for (UncertaintyTerm& t : noise_term(at_seed[p], off[p])) terms.push_back(std::move(t));
    const double center = mean(gains[p]);
    for (UncertaintyTerm& t : fixed_terms(m, center, TokenSummary{}, TokenSummary{})) terms.push_back(std::move(t));
    out.gains[p] = predict_gain(center, percentile(gains[p], 2.5), percentile(gains[p], 97.5), std::move(terms));
    out.gains[p].regime =
        gain_regime(m, TokenSummary{}, TokenSummary{}) == "one regime" ? "one regime" : "not classified";
  }
  return out;
}

}  // namespace ddpsim
