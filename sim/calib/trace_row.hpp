// One data row of a trace (calib/trace_reader.hpp), every field checked: numbers, integers,
// times within what a model can hold, micro-batch lists that add up to their row, packed
// sequences' Σ s² possible for their tokens. Errors name "FILE:LINE: column C: reason".
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "report/policy_run.hpp"

namespace ddpsim {

// `col`: the header's column indices by name; `at`: "FILE:LINE"; `required`: the columns the
// command needs on every row.
RankStep read_trace_row(const std::map<std::string, std::size_t>& col, const std::vector<std::string>& fields,
                        const std::string& at, const std::vector<std::string>& required);

}  // namespace ddpsim
