// A predicted gain's terms, as the interval tests read them.
#pragma once

#include <algorithm>
#include <string>

#include "eval/uncertainty.hpp"

// A gain's half-width of the term `name`; −1 where it has none.
inline double term_of(const ddpsim::GainPrediction& g, const std::string& name) {
  const auto it = std::find_if(g.terms.begin(), g.terms.end(),
                               [&](const ddpsim::UncertaintyTerm& t) { return t.name == name; });
  return it == g.terms.end() ? -1.0 : it->half_width_pp;
}
