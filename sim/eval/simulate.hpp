// A timed run: every policy of a config planned on the same sample stream (token level),
// each rank-step's compute charged from the performance model (noise and speed factors
// included), then the SimGrid engine deciding when each rank's step ends.
#pragma once

#include <cmath>
#include <functional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/rng.hpp"
#include "engine/step_sim.hpp"
#include "eval/config.hpp"
#include "report/outputs.hpp"
#include "report/policy_run.hpp"

namespace ddpsim {

struct SimulationRun {
  std::vector<PolicyRun> runs;          // rows with every timing column filled (none when streamed)
  std::vector<TokenSummary> summaries;  // one per run
  EngineSetup setup;
  EngineResult engine;
};

// `timeline` = [from, to) steps to keep spans for (empty range: none).
SimulationRun simulate(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline = {0, 0},
                       const std::function<void(long, long)>& progress = {});
// The same for runs already planned at token level (a trace's recorded batches: replay).
SimulationRun simulate_runs(const Config& config, std::vector<PolicyRun> runs, std::pair<int, int> timeline = {0, 0},
                            const std::function<void(long, long)>& progress = {});

// A streamed run's rows, a block of steps of one policy at a time, timings filled.
using RowSink = std::function<void(const std::string& policy, std::span<const RankStep> rows)>;

// simulate() without holding the rows: in fast mode each policy goes `block_steps` steps at a
// time (0: about 2^18 rows a block), each block's rows handed to `sink` and dropped, so memory
// grows with steps only by the few numbers per step that the summary's percentiles need. Full
// mode simulates whole, then hands the rows over. Same outputs as simulate(), rows aside.
SimulationRun simulate_streamed(const Config& config, std::span<const int> dataset, std::pair<int, int> timeline,
                                const std::function<void(long, long)>& progress, const RowSink& sink,
                                int block_steps = 0);

// The optional trace columns a run of this config writes, known before its first row.
TraceColumns trace_columns_for(const Config& config);

// The tokens that set a micro-batch's noise regime (PerfModel::noise_above): b·L, or Σ s when
// packed; a rank-step's are its largest micro-batch's.
inline long long micro_tokens(const MicroBatchShape& mb, bool packed) {
  return packed ? static_cast<long long>(mb.real_tokens) : static_cast<long long>(mb.batch_size) * mb.max_len;
}
long long regime_tokens(const RankStep& r, bool packed);
// The samples of the micro-batch regime_tokens names (the rank-step's, without micro-batches):
// with its tokens, it picks the measured steps' level (PerfModel::samples_levels).
int level_samples(const RankStep& r, bool packed);

// Compute factors: mean-one log-normal ones, so that they leave mean compute as modelled — one
// per step for all ranks (shared: E[exp(σz − σ²/2)] = 1), one per rank-step (each rank's own) —
// and the model's slow spells (median one: they lift the mean) per rank-step or per step as
// simulation.spells says; and the model's measured training steps (calibrate --training),
// one drawn whole per step and world; each from its own seeded stream. A rank-step of the
// model's compute-bound regime (PerfModel::noise_above) takes that regime's σ's and spells with
// the same draws, so a step's ranks still share their shared draw across regimes. `model` gives
// the σ's the simulation section leaves unset (null: no noise); a σ the section sets holds in
// both regimes.
class ComputeNoise {
 public:
  ComputeNoise(const Config& config, const PerfModel* model);
  void next_step() {
    const double z = shared_noise_.normal();
    const double u = spells_shared_ && has_spells_ ? spell_noise_.uniform() : 0;
    for (Regime& r : regime_) {
      r.shared = std::exp(r.shared_sigma * z - 0.5 * r.shared_sigma * r.shared_sigma);
      if (spells_shared_) r.shared *= r.spell_at(u);
    }
    rank_ = 0;
  }
  // The step's shared factor times this rank's own, for a rank-step of `tokens` padded tokens
  // (its largest micro-batch's; Σ s when packed), which picks the regime, and `samples` (its
  // largest micro-batch's), which with the tokens picks the measured steps' level.
  double next_rank(long long tokens, int samples) {
    measured_ = model_ ? model_->step_level(tokens, samples) : 1;
    if (steps_ && !steps_->empty()) {  // ranks beyond the measured world draw another step
      const std::size_t width = steps_->front().size();
      if (rank_ % width == 0) drawn_ = step_noise_.below(steps_->size());
      double drawn = (*steps_)[drawn_][rank_ % width];
      if (knee_ > 0 && steps_scale_ != 1 && (tokens >= knee_) != steps_above_)
        drawn = std::exp(std::log(drawn) * (steps_above_ ? 1 / steps_scale_ : steps_scale_));
      measured_ *= drawn;
    }
    ++rank_;
    const Regime& r = regime_[knee_ > 0 && tokens >= knee_ ? 1 : 0];
    const double own = std::exp(r.sigma * noise_.normal() - 0.5 * r.sigma * r.sigma);
    const double spell = spells_shared_ || !has_spells_ ? 1.0 : r.spell_at(spell_noise_.uniform());
    return r.shared * own * spell;
  }
  // This rank's factor from the model's measured training steps (1 without them): the level at
  // its tokens times a drawn step's factor about it. It describes forward and backward, not the
  // optimizer; the level stays when the noise is off (without_compute_noise), a draw does not.
  double measured() const { return measured_; }
  // Whether any drawn factor can differ from 1 (the measured steps' levels are no draw).
  bool draws() const;

 private:
  struct Regime {
    double sigma = 0, shared_sigma = 0, shared = 1;
    std::vector<double> spells;
    double spell_at(double u) const { return spells.empty() ? 1.0 : quantile_table_at(spells, u); }
  };
  Regime regime_[2];  // below the knee, and from it
  long long knee_ = 0;
  double steps_scale_ = 1;  // PerfModel::NoiseAbove::steps_scale
  bool steps_above_ = false;
  bool has_spells_ = false, spells_shared_;
  const PerfModel* model_;
  const std::vector<std::vector<double>>* steps_;
  std::size_t rank_ = 0, drawn_ = 0;
  double measured_ = 1;
  Rng noise_, shared_noise_, spell_noise_, step_noise_;
};

// False where a second simulation in this process would load a user XML platform again, which
// SimGrid 3.32's platform parser cannot do (it crashes): the replicates and the noise-off runs
// of such a config are refused or left out, saying why.
inline bool can_simulate_again(const Config& config) {
  return config.platform.topology != "xml";
}
inline constexpr const char* kXmlOncePerProcess =
    "a user XML platform is loaded once per process (SimGrid 3.32's platform parser cannot load a second)";

// Whether the config draws any compute noise (σ's, spells or the model's measured steps).
bool draws_compute_noise(const Config& config);
// The same config with every compute noise off — σ's 0, no spells, no measured steps (their
// levels by tokens stay: the surface as training meets it) — and
// everything else (sample streams, first uses, stragglers) as it was: what the plan alone gives,
// beside what the noise adds to it.
Config without_compute_noise(const Config& config);

// Each rank-step's compute (ms) for one policy's token-level rows, a block at a time: the noise
// stream carries over between blocks. The noise is drawn in the same order for every policy
// (common random numbers), so policies differ only by their plan.
class ComputeCharger {
 public:
  explicit ComputeCharger(const Config& config);
  PolicyWork charge(const PolicyRun& block);

 private:
  // The first use of a shape in a process costs the model's first_use_ms; the shapes each
  // process has met (one process for all ranks under simulation.first_use "shared").
  double first_use_ms(int rank, int b, int L);
  const Config& config_;
  ComputeNoise noise_;
  std::vector<std::set<std::pair<int, int>>> met_;
};
PolicyWork charge_compute(const Config& config, const PolicyRun& run);

// The per-rank gradient buckets the config's model and training section give.
std::vector<Bucket> config_buckets(const Config& config);

// Chrome trace JSON (chrome://tracing, Perfetto): one process per rank, a compute and a
// communication track each, for the spans the run kept.
std::string chrome_trace(const SimulationRun& sim);

}  // namespace ddpsim
