// The pieces parse_config (config.cpp) is made of: one reader per config section, and what a
// pipeline job takes from the others. Internal to the config parser.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/json_util.hpp"
#include "eval/config.hpp"

namespace ddpsim::config_detail {

// A path as written in a config, taken from the config's folder.
std::string resolve(const std::string& path, const std::string& base_dir);
DataConfig parse_data(const nlohmann::json& doc, const std::string& where, const std::string& base_dir);
TrainingConfig parse_training(const nlohmann::json& doc, const std::string& where, bool pipeline = false);
PolicySpec parse_policy(const nlohmann::json& item, const std::string& where);
SimulationConfig parse_simulation(const nlohmann::json& doc, const std::string& where, int G);
// verl cuts a rank's batch itself, into as many micro-batches as its max_token_len needs (as
// ddptrain does): training.micro_batches is for the other policies, and with verl alone it is
// refused, since nothing would read it; beside others, a note says which policies take it.
void check_micro_batch_count(Config& c, const std::string& origin);
// Where a platform's figures came from when no model's network is beneath it: those the config
// gives, and those a topology's preset fills in (nominal figures: an assumption, said so).
std::string preset_source(const nlohmann::json& given, const PlatformConfig& platform);

nlohmann::json platform_with_model(nlohmann::json platform, const PerfModel& model, Config& c,
                                   const std::string& origin);

// Keys a pipeline job has no use for, with what it uses instead: refused when given, left out
// of the resolved config (so that --print-config is valid input again).
struct UnusedKeys {
  std::string section;  // "" for whole sections
  std::vector<std::string> keys;
  std::string instead;
};
std::vector<UnusedKeys> unused_by_pipeline(bool abstract);
void refuse_unused_by_pipeline(const JsonFields& top, const pipeline::ParallelConfig& p, const std::string& origin);
pipeline::Fabric pipeline_fabric(const PlatformConfig& platform, int G, const std::string& origin);
// The `parallel` section into c.parallel, with what it takes from the rest: its links from the
// platform, its syncs' algorithm and its simulation.mode (a pipeline's default is full, where
// DDP's is fast), refusing a job that mode cannot simulate. Errors name `origin` and the key.
void parse_pipeline_job(const JsonFields& top, Config& c, const std::string& origin,
                        const std::string& policies_origin);
// The config with every default named (config_resolved.cpp): `model` as the config gave it.
nlohmann::json resolved_config(const Config& c, const std::string& model);

}  // namespace ddpsim::config_detail
