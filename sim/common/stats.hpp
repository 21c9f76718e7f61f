// Summary statistics as docs/method.md ("Metrics") defines them.
#pragma once

#include <span>

namespace ddpsim {

double mean(std::span<const double> values);
// Population standard deviation (divides by n), as the study reports cross-rank spread.
double population_std(std::span<const double> values);
// Percentile q in [0, 100] with linear interpolation between order statistics (NumPy's default).
double percentile(std::span<const double> values, double q);
// The same, reordering `values` instead of copying them (a bootstrap's scratch).
double percentile_in_place(std::span<double> values, double q);
// The two-sided 95% quantile of Student's t over `df` > 0 degrees of freedom (1.96 as df grows):
// a spread estimated from a few processes is itself a draw, and 1.96 of it over three degrees of
// freedom covers 86% of the next one, not 95%.
double t95(double df);

}  // namespace ddpsim
