// A timed run: every policy of a config planned on the same sample stream (token level),
// each rank-step's compute charged from the performance model (noise and speed factors
// included), then the SimGrid engine deciding when each rank's step ends.
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <set>
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

// Compute factors: mean-one log-normal ones, so that they leave mean compute as modelled — one
// per step for all ranks (shared: E[exp(σz − σ²/2)] = 1), one per rank-step (each rank's own) —
// and the model's slow spells (median one: they lift the mean) per rank-step or per step as
// simulation.spells says; and the model's measured training steps (calibrate --training),
// one drawn whole per step and world; each from its own seeded stream. `model` gives the σ's
// the simulation section leaves unset (null: no noise).
class ComputeNoise {
 public:
  ComputeNoise(const Config& config, const PerfModel* model);
  void next_step() {
    shared_ = factor(shared_sigma_, shared_noise_);
    if (spells_shared_) shared_ *= spell();
    rank_ = 0;
  }
  // The step's shared factor times this rank's own.
  double next_rank() {
    measured_ = 1;
    if (steps_ && !steps_->empty()) {  // ranks beyond the measured world draw another step
      const std::size_t width = steps_->front().size();
      if (rank_ % width == 0) drawn_ = step_noise_.below(steps_->size());
      measured_ = (*steps_)[drawn_][rank_ % width];
    }
    ++rank_;
    return shared_ * factor(sigma_, noise_) * (spells_shared_ ? 1.0 : spell());
  }
  // This rank's factor from the model's measured training steps (1 without them): it describes
  // forward and backward, not the optimizer.
  double measured() const { return measured_; }

 private:
  static double factor(double sigma, Rng& rng) { return std::exp(sigma * rng.normal() - 0.5 * sigma * sigma); }
  double spell() { return spells_.empty() ? 1.0 : quantile_table_at(spells_, spell_noise_.uniform()); }
  double sigma_, shared_sigma_, shared_ = 1;
  std::vector<double> spells_;
  bool spells_shared_;
  const std::vector<std::vector<double>>* steps_;
  std::size_t rank_ = 0, drawn_ = 0;
  double measured_ = 1;
  Rng noise_, shared_noise_, spell_noise_, step_noise_;
};

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
