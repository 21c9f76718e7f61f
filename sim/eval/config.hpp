// An experiment config (docs/config.md), parsed and validated once. Sections: data (where
// lengths come from), training (the run's shape), policies (what to compare). Unknown keys
// are errors that name the key and the one probably meant. Relative paths resolve against
// the config file's folder.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/lengths.hpp"
#include "engine/platform.hpp"
#include "model/perf_model.hpp"
#include "pipeline/parallel_config.hpp"
#include "sched/scheduler.hpp"

namespace ddpsim {

struct DataConfig {
  std::string source = "sst2";  // sst2 (embedded) | histogram | trace | tsv | lognormal
  std::string path;             // histogram JSON, length trace or GLUE TSV
  std::string vocab;            // WordPiece vocab for tsv
  double mean = 13.3;           // lognormal: mean and std of the length
  double std = 7.0;
  int min = 3;  // lognormal: clip range
  int max = 66;
  std::int64_t samples = 67349;  // lognormal: dataset size
};

struct TrainingConfig {
  int world_size = 4;     // G
  int global_batch = 48;  // B
  int steps = 800;
  int max_length = 256;  // truncation, tokens
  std::uint64_t seed = 0;
  std::vector<int> b_max;            // per-rank cap; empty = none
  bool b_max_from_model = false;     // "b_max": "model": the largest b that fits at max_length
  double bucket_mb = 25;             // DDP bucket_cap_mb (MiB)
  double first_bucket_mb = 1;        // DDP's smaller first bucket (MiB)
  bool overlap = true;               // start each bucket's allreduce during backward
  int micro_batches = 1;             // gradient accumulation: micro-batches per rank and step
  int pad_to_multiple_of = 1;        // each batch padded up to a multiple of this (ddptrain's option)
  std::string attention = "padded";  // padded (b × L_max) | packed (remove-padding: Σ s, Σ s²)
  // The gradients' dtype in the buckets and the allreduce: "model" (its gradient_bytes_per_param:
  // fp32 for a spec-derived model, as autocast DDP keeps them), or fp32 | bf16 | fp16.
  std::string grad_dtype = "model";
  // ddp: DDP's bucketed allreduce; zero1: that allreduce, the optimizer state sharded evenly and
  // the parameters all-gathered after the step (ZeRO stage 1, DeepSpeed's partition);
  // zero2: the buckets reduce-scattered instead, the gradients sharded too; fsdp: full sharding (ZeRO-3), one unit
  // per transformer block of the model's layout; hybrid: full sharding inside groups of
  // shard_group ranks, replicated across the groups (HSDP) (docs/sharding.md).
  std::string data_parallel = "ddp";
  // zero1: how the optimizer state is sharded: "even" (a G-th each, DeepSpeed's flat
  // partition and ddptrain's) or "parameters" (whole parameters, largest first, each to the rank
  // holding fewest so far: PyTorch's ZeroRedundancyOptimizer).
  std::string zero_partition = "even";
  int shard_group = 0;                // hybrid: ranks a group shards over (0: a node's GPUs); fsdp: G
  bool reshard_after_forward = true;  // fsdp, hybrid: free a unit after its forward, gather it again for backward
  // fsdp, hybrid with gradient accumulation: FSDP's no_sync on every micro-batch but the last
  // (one reduce-scatter a step, the gradients kept unsharded until then); false: each
  // micro-batch reduce-scatters. DDP's accumulation is always no_sync.
  bool no_sync = false;
  // fsdp, hybrid: FSDP's BackwardPrefetch, when backward re-gathers a unit: "backward_pre" (as
  // the unit after it begins backward), "backward_post" (as it ends) or "none" (once it is reduced).
  std::string backward_prefetch = "backward_pre";
  // fsdp, hybrid: units whose gathers forward issues ahead of the one computing (FSDP2's
  // set_modules_to_forward_prefetch with the next N; 1: FSDP's implicit prefetch).
  int forward_prefetch = 1;
  // fsdp, hybrid under backward_pre: units whose re-gathers backward issues ahead of the one
  // computing (FSDP2's set_modules_to_backward_prefetch with the next N; 1: FSDP's own).
  int backward_prefetch_depth = 1;
  // fsdp, hybrid: "layer", a unit per transformer block (PyTorch's transformer_auto_wrap_policy),
  // "root", the whole model one unit (FSDP without an auto-wrap policy), or "size", PyTorch's
  // size_based_auto_wrap_policy over the layout's module tree.
  std::string wrap = "layer";
  double min_num_params = 1e8;                             // wrap "size": PyTorch's size_based_auto_wrap_policy default
  bool sharded() const { return data_parallel != "ddp"; }  // any state sharded
  bool fully_sharded() const { return data_parallel == "fsdp" || data_parallel == "hybrid"; }  // FSDP's units
  // Gradients reduce-scattered: every rank of a step then runs as many micro-batches.
  bool shards_gradients() const { return sharded() && data_parallel != "zero1"; }
};

// Rank `rank` computes `factor` times slower in steps [from_step, to_step) (to_step < 0: to the end).
struct Straggler {
  int rank = 0;
  double factor = 1;
  int from_step = 0;
  int to_step = -1;
};

struct SimulationConfig {
  std::string mode = "fast";       // fast (memoised collectives) | full (every collective in SimGrid)
  std::string algorithm = "ring";  // allreduce: ring | tree | hierarchical
  double sched_ms = 0;             // scheduling decision + cost all-gather, per step
  bool sched_measured = false;     // "sched_ms": "measured": the decision's measured time (not reproducible)
  double noise_sigma = -1;         // < 0: the model's
  double noise_shared_sigma = -1;  // < 0: the model's
  // fsdp, hybrid: log-normal σ of how a rank-step's compute falls over the units, around their
  // shares (EngineSetup::unit_jitter); a rank-step's total is unchanged.
  double unit_jitter = 0;
  // The model's slow spells: drawn for each rank-step (own: ranks on cores or GPUs of their
  // own), once per step for all ranks (shared: ranks that take turns on one device, as ddptrain
  // --emulate-ranks runs them, meet the same spell), or off.
  std::string spells = "own";
  // The model's first-use cost of a shape: met once per rank (own: each rank its own process),
  // once for all ranks (shared: ranks taking turns in one process, as --emulate-ranks), or off.
  std::string first_use = "own";
  std::vector<double> rank_speed;  // per-rank compute time factor (1.2 = 20% slower); empty = all 1
  std::vector<Straggler> stragglers;

  double speed_factor(int rank, int step) const;
};

struct Config {
  std::string origin;  // file name, or "embedded default"
  DataConfig data;
  TrainingConfig training;
  std::vector<PolicySpec> policies;
  std::shared_ptr<const PerfModel> model;
  PlatformConfig platform;
  // Where the platform's figures came from when the model supplied some: "" when the config's
  // (or the default) alone are in force.
  std::string platform_source;
  // Whether the platform's figures are the model's calibrated network's, none of them set by the
  // config (else some are a preset's or the user's: a guess that a gain between configs is
  // widened by).
  bool network_from_model = false;
  // Settings the config gives that this model makes no-ops, and where the prediction leaves the
  // model's measured range (add_data_notes): said to the user by the CLI, kept in summary.json.
  std::vector<std::string> notes;
  SimulationConfig simulation;
  std::optional<pipeline::ParallelConfig> parallel;  // a pipeline-parallel job instead of DDP
  nlohmann::json resolved;                           // every value in force, defaults included, for summary.json

  StepShape shape() const;
  // The samples of a rank's largest (micro-)batch where the config fixes them for some policy,
  // else 0: a pipeline job, or policies that all form their own batches. The untrained-size note
  // says where it lies outside the sizes a model's training runs held.
  int fixed_batch_samples() const;
  // Adds the notes of a run's data and size: a rank's even share of the batch at the data's
  // longest length beyond the model's measured shapes (the prediction is then its
  // extrapolation), and untrained_size_note. Returns the notes added. Not in parse_config: a
  // replay's config holds a placeholder batch.
  std::vector<std::string> add_data_notes(const std::vector<int>& dataset);
  // "" unless the rank's (micro-)batch holds a number of samples the model's training runs never
  // held (fixed_batch_samples against its noise.steps_samples): the runs' level there is a guess.
  std::string untrained_size_note() const;
  // Where the prediction's figures came from — the model's origin and source (measured,
  // calibrated from which traces, or derived, and from what), its training steps' source, the
  // platform in force and its source — for summary.json: every prediction says so.
  nlohmann::json provenance() const;
  // The gradients in the buckets and the allreduce, and who said so: "fp32 (4 B a parameter;
  // the model's)" or "bf16 (2 B a parameter; training.grad_dtype)".
  std::string gradients() const;
  // `resolved` with every file path absolute: what --print-config writes, valid input from any
  // folder (summary.json keeps the paths as given, so that outputs do not depend on the machine).
  nlohmann::json printable() const;
};

// The embedded default (configs/default.json): the study's setting.
nlohmann::json default_config_json();
// Reads a config file; "" gives the embedded default.
nlohmann::json read_config_json(const std::string& path);
// Applies "--set training.global_batch=64": the value is JSON if it parses, else a string.
void apply_override(nlohmann::json& doc, std::string_view assignment);
// Sets the value at a dotted key path ("training.world_size"), creating missing sections;
// returns why it cannot ("" on success), for the caller to blame its own source.
std::string set_by_path(nlohmann::json& doc, std::string_view key, nlohmann::json value);
// Validates and fills defaults; `base_dir` anchors relative paths. `policies_origin` names the
// policies in errors when they came from elsewhere than the config ("--policies").
Config parse_config(const nlohmann::json& doc, const std::string& origin, const std::string& base_dir,
                    const std::string& policies_origin = "");

// The data section as a length source.
std::unique_ptr<LengthSource> make_length_source(const DataConfig& data, int max_length);
// The config's dataset drawn from `source`, refused (naming the source) when it holds fewer
// samples than the ranks it is shared among.
std::vector<int> config_dataset(const Config& config, const LengthSource& source);

}  // namespace ddpsim
