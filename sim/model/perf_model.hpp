// A GPU performance model (models/*.json): per-phase compute time and peak memory of one
// rank's micro-batch of b samples padded to length L, the per-step noise, and the parameter
// layout that sets the gradient buckets. The simulator charges these times; the `model`
// cost lets a policy balance on them. Every coefficient is ≥ 0, so times and memory never
// decrease in b or L (the min-max solver relies on it).
#pragma once

#include <cmath>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/phase_time.hpp"
#include "sched/cost.hpp"

namespace ddpsim {

// One parameter tensor group, in registration (forward) order.
struct LayerSpec {
  std::string name;
  long long params = 0;     // elements
  double bwd_fraction = 0;  // share of backward time spent producing this layer's gradients
};

// A level table's factor at `tokens` (PerfModel::step_levels): interpolated in log tokens and
// log factor, held at the ends; 1 for an empty table.
double level_at(const std::vector<std::pair<double, double>>& levels, long long tokens);

// A level table for the rank-steps of one batch size (PerfModel::samples_levels): training at
// 4 samples a rank-step sat 18-23% over a CPU's profile where 8 sat 13-19% under it, at like
// tokens, so runs of several batch sizes keep a table each.
struct SampleLevels {
  int samples = 0;  // samples the (largest micro-)batch held
  std::vector<std::pair<double, double>> levels;
};
// The level at (samples, tokens): each neighbouring size's table at `tokens`, interpolated in
// log samples and log factor, held beyond the sizes measured; 1 for no table.
double level_at(const std::vector<SampleLevels>& by_samples, int samples, long long tokens);
// The measured steps' level of a rank-step: by batch size where there are tables by it, else by
// tokens (PerfModel::step_level, and calibrate's fit as it builds them).
inline double level_at(const std::vector<std::pair<double, double>>& by_tokens,
                       const std::vector<SampleLevels>& by_samples, int samples, long long tokens) {
  return by_samples.empty() ? level_at(by_tokens, tokens) : level_at(by_samples, samples, tokens);
}

struct PerfModel {
  std::string name;    // "rtx3090-distilbert"
  std::string origin;  // file it came from, or "built-in NAME"
  std::string gpu;
  std::string source;  // how the figures were obtained, honestly
  PhaseModel forward, backward;
  double optimizer_ms = 0;
  // The share of optimizer_ms the parameter update takes, the part ZeRO divides over the ranks
  // (the copy out of DDP's buckets and clearing the gradients stay whole); 1: all of it.
  double optimizer_update_share = 1;
  // How well a calibrated model's forms predicted shapes they were not fitted to (the worse
  // phase's held-out MAPE, a fraction; 0: not known), and calibrate's warning where that or
  // the rows' R² was poor ("" when sound): every prediction with the model repeats it.
  double fit_heldout_mape = 0;
  std::string fit_warning;
  // The forms whose held-out error came near the one in use (calibrate writes them): a
  // prediction's form term is its spread over them. Empty: not known, and no form term.
  std::vector<PhaseForm> supported_forms;
  // How far a gain moves between sessions of one machine, a 95% half-width in percentage points
  // for launch-bound and compute-bound rank-steps (model.noise_above's knee); < 0: not in the
  // model, and a prediction takes this project's campaign figures (eval/uncertainty.hpp).
  double session_below_pp = -1, session_above_pp = -1;
  std::string session_source;
  // How far the levels of runs of one setting, trained in turn in one session, differed for
  // what no policy explains (ddpsim calibrate --training with several runs: on a CPU, each
  // model at a level of its own): the 95% half-width of the ratio of two runs' levels, less 1.
  // A gain compares two such runs, so it carries that much of a term; 0: not measured.
  double run_level_spread = 0;
  std::string run_level_source;
  // How far one process's level lands from the model's, which a step time carries whole and a
  // gain between runs of one process does not: a 95% half-width, a fraction (calibrate --training
  // over runs of two processes or more); 0: not measured (eval/step_interval.hpp).
  double process_level_spread = 0;
  std::string process_level_source;
  double noise_sigma = 0;  // log-normal σ of the per-step, per-rank multiplicative compute noise
  // Log-normal σ of a factor drawn once per step for all ranks: slow spells of a machine the
  // ranks share (emulated ranks in one process, cores of one host), which independent per-rank
  // noise spreads over the steps' maxima instead of their tail.
  double noise_shared_sigma = 0;
  // Slow spells of the machine as a calibration measured them (how far a shape's repetitions
  // sat from the surface together), a factor beside the log-normal ones: mean-one factors at
  // evenly spaced probabilities from 0 to 1, drawn by linear interpolation between them. Their
  // spread is heavier-tailed than any log-normal, and it sets both the mean and the tail of a
  // step's maximum. Factors of median one, so the phases give a quiet machine's time and the
  // spells lift it by their mean. Empty: none.
  std::vector<double> spell_quantiles;
  // The noise of compute-bound rank-steps: from this many padded tokens per rank-step (Σ s when
  // packed) a device's kernels leave the launch floor and their times spread far less (an
  // H100's repetitions: σ ≈ 0.08 below ≈ 2,048 tokens, ≈ 0.002 above), so one σ for every
  // rank-step inflates the slowest of balanced compute-bound ranks. The fields above describe
  // the rank-steps below `tokens`; tokens == 0: one regime for all.
  struct NoiseAbove {
    long long tokens = 0;
    double sigma = 0, shared_sigma = 0;
    std::vector<double> spells;  // as spell_quantiles; empty: none
    // Measured training steps (step_factors) keep their regime: a factor measured on the other
    // side of the knee has its log scaled by this (the profile's σ from the knee over σ below;
    // 1: none), so a launch-bound run's spread is not laid on compute-bound rank-steps.
    double steps_scale = 1;
  } noise_above;
  bool steps_above = false;  // step_factors were measured mostly from the knee on
  // Training steps as measured (ddpsim calibrate --training): each step's per-rank factors of
  // compute over the profile's surface, drawn a whole step at a time, so that a step's ranks
  // meet spikes together as they did (spikes of ranks taking turns on one device come in
  // steps); they carry the training run's level (about step_levels where it has some) and tail.
  // Empty: none.
  std::vector<std::vector<double>> step_factors;
  std::string step_factors_source;
  // The training runs' level by a rank-step's padded tokens (its largest micro-batch's; Σ s when
  // packed), as calibrate --training measured it: (tokens, factor over the surface), tokens
  // ascending. Training runs sit off a profile's surface by their shapes (small rank-steps of a
  // launch-bound CPU run 10-25% away from large ones), so a policy or batch size of other shapes
  // takes the level of its own; step_factors are then the spread about it. Empty: one level.
  std::vector<std::pair<double, double>> step_levels;
  // In place of step_levels where the training runs held several batch sizes: a table each.
  std::vector<SampleLevels> samples_levels;
  // The fewest and most tokens of the rank-steps those levels were measured at ({0, 0}: not
  // recorded). Beyond them a level is held from its end: the twenty-fifth registered CPU
  // prediction's pre-runs ran ×1.23 the surface at 119 tokens, its padded rank-steps of ~280 tokens
  // near the surface itself.
  std::pair<long long, long long> steps_tokens{0, 0};
  bool untrained_tokens(long long tokens) const {
    return steps_tokens.first > 0 && (tokens < steps_tokens.first || tokens > steps_tokens.second);
  }
  // The interval's "untrained tokens" variant: rank-steps outside steps_tokens on the profile's
  // surface (level 1), the one measurement of their tokens, in place of the level held from an end.
  bool untrained_tokens_on_surface = false;
  double step_level(long long tokens, int samples) const {
    const bool surface = untrained_tokens_on_surface && untrained_tokens(tokens);
    return (surface ? 1.0 : level_at(step_levels, samples_levels, samples, tokens)) * untrained_level(samples);
  }
  // The fewest and most samples a (micro-)batch of the training runs held ({0, 0}: not recorded).
  // Their level at another batch size is not measured: from pre-runs all of 8 samples a
  // rank-step, the twenty-second registered CPU prediction missed B = 8's step by 22-26%.
  std::pair<int, int> steps_samples{0, 0};
  // "" when `samples` a rank-step lies within steps_samples, else one sentence saying so.
  std::string training_samples_note(int samples) const;
  // How many doublings `samples` lies outside steps_samples: < 0 below, > 0 above, 0 inside or
  // where not recorded.
  double untrained_doublings(int samples) const;
  // How far a level moved a doubling of batch size, below the sizes trained and above them
  // (logs), and where the figures come from (untrained_size_steps in perf_model.cpp).
  struct SizeSteps {
    double below = 0, above = 0;
    std::string source;
  };
  SizeSteps untrained_size_steps() const;
  // The interval's "untrained batch size" variants set a side of this from untrained_size_steps(): a
  // rank-step's level ×e^(step·k) for its k doublings outside steps_samples. Zero (the model as
  // fitted): none.
  SizeSteps untrained_size_slowdown;
  double untrained_level(int samples) const {
    if (untrained_size_slowdown.below == 0 && untrained_size_slowdown.above == 0) return 1;
    const double k = untrained_doublings(samples);
    return k == 0 ? 1.0 : std::exp(k < 0 ? -k * untrained_size_slowdown.below : k * untrained_size_slowdown.above);
  }
  // Extra ms the first time a process meets a (b, L) shape (kernel selection, allocator
  // growth: ~140 ms a shape in bf16 on an H100), charged once per process; 0 = none.
  double first_use_ms = 0;
  // The training precision where the model states it ("fp32", "tf32", "bf16", "fp16", "fp8"; a spec
  // always does): what a spec cannot know, such as a first-use cost, depends on it. "": unstated.
  std::string precision;
  // Compute runs this many times slower while a collective is in flight on its rank (NCCL
  // kernels take SMs on a GPU, Gloo's threads take cores on a CPU); 1 = no interference.
  double comm_slowdown = 1;
  // A collective runs this many times slower while backward runs on its ranks (on a CPU,
  // Gloo's threads share the cores backward keeps busy); 1 = no interference.
  double allreduce_slowdown = 1;
  // Each rank's wait after a step's last collective, before its optimizer, that no profile times:
  // PyTorch DDP's finalisation of the gradients (on a 2-core Intel VM replays of its runs waited
  // 16-31 ms a step too little); calibrate --training fits it from the runs' comm wait. DDP and
  // ZeRO-1/2 steps; 0: none.
  double sync_ms = 0;
  std::string sync_source;
  // ZeRO's parameter all-gather takes this many times the simulated ring's time: the collective
  // library's own (ddptrain's over Gloo took 1.7 times it on a CPU; ddpsim calibrate fits it); 1 = the ring's.
  double allgather_factor = 1;
  // m(b, L) = m0 + μ·b·L + ν·b·L², in MiB; capacity bounds b_g^max.
  double mem_m0_mib = 0, mem_mu_mib = 0, mem_nu_mib = 0, mem_capacity_mib = 0;
  int bytes_per_param = 4;       // gradient element size
  long long position_table = 0;  // TransformerSpec::position_table of a spec-derived model; 0 = no limit known
  std::vector<LayerSpec> layers;
  // The network this model's allreduce was measured on ({"topology", "link_GBps", "latency_us",
  // "host_GBps"}), written by ddpsim calibrate; a config's own platform keys override it. Empty
  // for a model that measured no allreduce: the config's platform (or its default) is in force.
  nlohmann::json platform = nlohmann::json::object();
  std::string platform_source;  // how those figures were obtained
  // The trained models (a trace's "# model=") of the traces ddpsim calibrate fitted this model
  // to, from its calibration section; empty for a model not calibrated on traces that say.
  std::set<std::string> calibrated_on;
  // Likewise the processors (a trace's "# cpu=") and BLAS kernels ("# blas=") they ran on: a CPU
  // run's speed rests on both (OpenBLAS's kernels for an older CPU ran a third as fast).
  std::set<std::string> calibrated_cpus, calibrated_blas;

  double fwd_ms(int b, int L) const { return forward.at(b, L); }
  double bwd_ms(int b, int L) const { return backward.at(b, L); }
  double compute_ms(int b, int L) const { return fwd_ms(b, L) + bwd_ms(b, L); }
  // Sliding-window attention of a spec-derived model: its phases' and memory's L² terms follow it.
  AttentionWindow attention_window;
  double peak_mem_mib(int b, int L) const {
    return mem_m0_mib + mem_mu_mib * b * L + mem_nu_mib * double(b) * attention_window.pairs(L);
  }
  // Packed sequences: Σ s tokens and Σ s² attention pairs, the analytic form's coefficients
  // (a measured grid has no packed form; the config refuses packed attention with one).
  double fwd_packed_ms(double tokens, double pairs) const { return forward.packed(tokens, pairs); }
  double bwd_packed_ms(double tokens, double pairs) const { return backward.packed(tokens, pairs); }
  double packed_mem_mib(double tokens, double pairs) const {
    return mem_m0_mib + mem_mu_mib * tokens + mem_nu_mib * pairs;
  }
  // Largest b whose peak memory at length L fits the capacity; 0 when not even one fits.
  int max_batch(int L) const;
  // Where a calibrated (grid-form) model stops being a measurement: the largest batch and
  // length its tables hold, over both phases; {0, 0} for a model without a measured range.
  std::pair<int, int> measured_reach() const;
  // "" when (b, L) lies inside the measured range, else one sentence saying that times there
  // are the analytic form's extrapolation: a prediction must say where its model came from.
  // `even_share`: (b, L) is a config's even share of its batch, not the largest shape seen.
  std::string extrapolation_note(int b, int L, bool even_share = false) const;
  long long total_params() const;
  // A model derived from a transformer's config and a GPU's peak figures, profiled nowhere.
  bool spec_derived() const { return source.rfind("derived from specs", 0) == 0; }
  // A spec in reduced precision: a shape's first use likely costs what the spec cannot know
  // (136-179 ms in bf16 on an H100 and an H200), which its prediction intervals then hold.
  bool first_use_unknown() const {
    return spec_derived() && first_use_ms <= 0 && (precision == "bf16" || precision == "fp16" || precision == "fp8");
  }
};

// Parses and validates a model document; `origin` names it in errors.
// A table of quantiles at evenly spaced probabilities from 0 to 1 (PerfModel::spell_quantiles),
// read as the distribution that is linear between them: its mean, and its value at u in [0, 1].
double quantile_table_mean(std::span<const double> q);
double quantile_table_at(std::span<const double> q, double u);

PerfModel parse_perf_model(const nlohmann::json& doc, const std::string& origin);
// A built-in name (rtx3090-distilbert, h100-distilbert) or a path to a model JSON file: a
// model, or a spec ({"hf_config": PATH, "gpu": PRESET, "dtype", "efficiency", "fused_attention",
// "activation_checkpointing", "name"}) that derive_perf_model turns into one (model/hf_model.hpp).
PerfModel load_perf_model(const std::string& name_or_path);
PerfModel derive_perf_model(const nlohmann::json& spec, const std::string& origin);
const std::vector<std::string>& builtin_model_names();
// True for a name load_perf_model() resolves without a file, which is never taken as a path.
bool is_builtin_model(const std::string& name);
// A built-in model's JSON as compiled in ("" for another name): a registration hashes it.
std::string_view builtin_model_text(const std::string& name);

// The `model` cost of the scheduler library: predicted forward + backward time (ms) on the
// surface, without the training runs' levels (step_levels), which may fall with tokens where the
// min-max solver needs costs that never do; the trainers plan on the same figures.
class ModelTimeCost final : public CostModel {
 public:
  explicit ModelTimeCost(std::shared_ptr<const PerfModel> model) : model_(std::move(model)) {}
  std::string name() const override { return "model"; }
  double cost(int, int batch, int max_len) const override { return model_->compute_ms(batch, max_len); }
  double packed_cost(int, double tokens, double pairs) const override {
    return model_->fwd_packed_ms(tokens, pairs) + model_->bwd_packed_ms(tokens, pairs);
  }

 private:
  std::shared_ptr<const PerfModel> model_;
};

}  // namespace ddpsim
