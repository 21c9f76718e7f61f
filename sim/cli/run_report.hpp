// What `ddpsim run` and `compare` say besides their tables: the header naming the setting and
// where its model came from, and the memory warnings kept with the figures they qualify.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "data/lengths.hpp"
#include "eval/config.hpp"
#include "eval/simulate.hpp"

namespace ddpsim::cli {

// How the ranks meet: DDP's buckets, or FSDP's units (inside groups, under HSDP).
std::string data_parallel_line(const Config& config, std::size_t buckets);

// The lines before the tables: data, world, model and its source, platform, how ranks meet.
void print_header(std::ostream& out, const Config& config, const LengthSource& source, const char* verb);

// The memory model predicts an out-of-memory the simulator itself would not notice: what to
// warn of, printed and kept in summary.json's provenance beside the figures it qualifies.
std::vector<std::string> capacity_warnings(const Config& config, const SimulationRun& sim);

// Publishes `files` with the files already streamed into `written` (all of them or none), then
// says "wrote" and each path, the streamed ones (`streamed`) first; says nothing for no file.
void publish_and_say(const std::vector<std::pair<std::filesystem::path, std::string>>& files,
                     std::vector<std::unique_ptr<AtomicFile>> written = {},
                     const std::vector<std::filesystem::path>& streamed = {});

// The config's provenance, with the warnings where there are any.
nlohmann::json provenance(const Config& config, const std::vector<std::string>& warnings);

}  // namespace ddpsim::cli
