// The config as parse_config resolved it, every default named: what --print-config prints,
// which reads back as the same config (a pipeline job's without the keys it has no use for).
#include <nlohmann/json.hpp>

#include "eval/config_sections.hpp"

namespace ddpsim::config_detail {

namespace {

nlohmann::json resolved_data(const DataConfig& d) {
  nlohmann::json data = {{"source", d.source}};
  if (!d.path.empty()) data["path"] = d.path;
  if (!d.vocab.empty()) data["vocab"] = d.vocab;
  if (d.source == "lognormal")
    data.update({{"mean", d.mean}, {"std", d.std}, {"min", d.min}, {"max", d.max}, {"samples", d.samples}});
  return data;
}

// The training section; sharding's keys only where the kind takes them.
nlohmann::json resolved_training(const TrainingConfig& t) {
  nlohmann::json out = {{"world_size", t.world_size},
                        {"global_batch", t.global_batch},
                        {"steps", t.steps},
                        {"max_length", t.max_length},
                        {"seed", t.seed},
                        // "model" stays a request: resolved per rank, it would not read back at another world size
                        {"b_max", t.b_max_from_model ? nlohmann::json("model") : nlohmann::json(t.b_max)},
                        {"bucket_mb", t.bucket_mb},
                        {"first_bucket_mb", t.first_bucket_mb},
                        {"overlap", t.overlap},
                        {"micro_batches", t.micro_batches},
                        {"attention", t.attention},
                        {"grad_dtype", t.grad_dtype},
                        {"data_parallel", t.data_parallel}};
  if (t.pad_to_multiple_of > 1) out["pad_to_multiple_of"] = t.pad_to_multiple_of;
  if (t.data_parallel == "hybrid") out["shard_group"] = t.shard_group;
  if (t.zero_partition != "even") out["zero_partition"] = t.zero_partition;
  if (t.fully_sharded()) {
    out["reshard_after_forward"] = t.reshard_after_forward;
    out["no_sync"] = t.no_sync;
    out["backward_prefetch"] = t.backward_prefetch;
    out["forward_prefetch"] = t.forward_prefetch;
    if (t.backward_prefetch == "backward_pre") out["backward_prefetch_depth"] = t.backward_prefetch_depth;
    out["wrap"] = t.wrap;
    if (t.wrap == "size") out["min_num_params"] = t.min_num_params;
  }
  return out;
}

// The simulation section, the model's noise where the config left it to the model.
nlohmann::json resolved_simulation(const Config& c) {
  nlohmann::json stragglers = nlohmann::json::array();
  for (const Straggler& s : c.simulation.stragglers)
    stragglers.push_back({{"rank", s.rank}, {"factor", s.factor}, {"from_step", s.from_step}, {"to_step", s.to_step}});
  nlohmann::json out = {
      {"mode", c.simulation.mode},
      {"algorithm", c.simulation.algorithm},
      {"sched_ms", c.simulation.sched_measured ? nlohmann::json("measured") : nlohmann::json(c.simulation.sched_ms)},
      {"noise_sigma", c.simulation.noise_sigma < 0 ? c.model->noise_sigma : c.simulation.noise_sigma},
      {"noise_shared_sigma",
       c.simulation.noise_shared_sigma < 0 ? c.model->noise_shared_sigma : c.simulation.noise_shared_sigma},
      {"spells", c.simulation.spells},
      {"rank_speed", c.simulation.rank_speed},
      {"stragglers", stragglers}};
  if (c.model->first_use_ms > 0) out["first_use"] = c.simulation.first_use;
  if (c.training.fully_sharded()) out["unit_jitter"] = c.simulation.unit_jitter;
  return out;
}

}  // namespace

nlohmann::json resolved_config(const Config& c, const std::string& model) {
  nlohmann::json policies = nlohmann::json::array();
  for (const auto& p : c.policies) policies.push_back(p.label());
  nlohmann::json out = {{"data", resolved_data(c.data)},
                        {"training", resolved_training(c.training)},
                        {"policies", policies},
                        {"model", model},  // a name or a path: what parse_config reads back
                        {"platform", c.platform.to_json()},
                        {"simulation", resolved_simulation(c)}};
  if (c.parallel) {  // only what the pipeline uses, so that --print-config is valid input again
    const bool abstract = c.parallel->abstract_mode;
    out["parallel"] = c.parallel->to_json();
    for (const UnusedKeys& unused : unused_by_pipeline(abstract))
      for (const std::string& key : unused.keys) (unused.section.empty() ? out : out[unused.section]).erase(key);
    out["simulation"]["mode"] = c.parallel->setup.mode;
    for (auto [key, sigma] :
         {std::pair{"noise_sigma", c.simulation.noise_sigma}, {"noise_shared_sigma", c.simulation.noise_shared_sigma}})
      if (abstract && sigma < 0) out["simulation"].erase(key);
  }
  return out;
}

}  // namespace ddpsim::config_detail
