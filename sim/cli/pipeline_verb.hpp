// `ddpsim run` and `compare` on a config with a `parallel` section: a pipeline-parallel job,
// summed up in one table (and with --replicates, its policies' figures and gains over the seeds).
#pragma once

#include <utility>

#include <boost/program_options.hpp>

#include "eval/config.hpp"

namespace ddpsim::cli {

// `record`: the [from, to) steps a --timeline or --link-series shows.
int parallel_verb(const Config& config, const boost::program_options::variables_map& vm, bool compare,
                  std::pair<int, int> record, int replicates);

}  // namespace ddpsim::cli
