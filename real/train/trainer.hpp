// ddptrain's training loop: every rank runs the same seeded sampler and batch policy as the
// simulator (so all ranks reach the same decision without a broadcast, which a per-step
// all-gather of the decision's hash verifies), trains on its own samples with the loss
// scaled by G·b_g/B_t, synchronises gradients through GradBuckets, and writes the trace and
// summary of docs/method.md (rank 0). --emulate-ranks N plays N ranks one after another in one
// process: the same update as N-rank DDP, with a modelled allreduce time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "data/text_data.hpp"
#include "dist/comm.hpp"
#include "dist/grad_buckets.hpp"
#include "model/distilbert.hpp"
#include "report/policy_run.hpp"
#include "sched/scheduler.hpp"
#include "train/adamw.hpp"
#include "train/precision.hpp"
#include "train/zero1.hpp"

namespace ddptrain {

class StepTimer;

struct TrainOptions {
  // Data: a GLUE TSV + vocab, or synthetic lengths ("sst2" or a histogram file).
  std::string data, vocab, dev, synthetic_lengths;
  std::int64_t synthetic_samples = 20000;
  int max_length = 128;
  int pad_to_multiple_of = 1;  // each batch's padded length rounded up to a multiple (see padding.hpp)
  // Model.
  std::string model_size = "base";
  std::string weights;  // a model.safetensors to load by name
  double dropout = -1;  // < 0: the model's (0.1); 0 makes steps deterministic across ranks
  // Schedule.
  std::string policy = "static";
  int global_batch = 48;
  int micro_batches = 1;  // gradient accumulation over this many micro-batches per rank and step
  int steps = 100;
  std::vector<int> b_max;      // one per rank, or empty
  bool probe_bmax = false;     // CUDA: b_max from the largest batch at max_length that fits (see probe_bmax())
  double probe_reserve = 0.1;  // fraction of device memory the probed batch must leave free
  std::string perf_model;      // a ddpsim performance model (name or JSON) for minmax:cost=model
  bool profiling = false;      // --profile: b_max bounds the grid, not the (unused) policy's batches
  std::uint64_t seed = 0;
  // Optimisation: AdamW with linear warm-up then linear decay to zero.
  double lr = 5e-5, weight_decay = 0.01, warmup = 0.1, clip_norm = 0;
  Precision precision = Precision::fp32;  // bf16: autocast forward passes
  std::string optimizer_impl = "auto";    // --optimizer-impl: the same update, computed by another route
  // Distribution.
  int emulate_ranks = 0;
  double bucket_mb = 25, first_bucket_mb = 1;
  // --data-parallel: "ddp", or "zero1": DDP's allreduce, then each rank steps AdamW on a G-th
  // of the parameters and all-gathers them (see zero1.hpp).
  std::string data_parallel = "ddp";
  double emulate_link_GBps = 10, emulate_latency_us = 10;  // the modelled ring allreduce of --emulate-ranks
  std::string device = "auto";
  int local_rank = 0;  // picks the GPU on CUDA
  // Outputs.
  std::string out;  // folder for steps.csv, summary.json, checkpoints
  int eval_every = 0, ckpt_every = 0, log_every = 10;
  std::string resume;  // a checkpoint file
  // The policies whose steps alternate with this one's in one process (`--policy A,B,...`),
  // this one included; empty when it runs alone. Recorded in the trace metadata.
  std::vector<std::string> interleaved;
  // A step of a profile grid follows each turn (--profile-alongside): the metadata says so.
  bool profiled_alongside = false;
};

// What ddptrain --profile measures (see profile.cpp).
struct ProfileOptions {
  std::vector<int> batches, lengths;  // empty: derived from the data and the global batch
  std::vector<int> bytes;             // allreduce sizes, with several ranks
  int warmup = -1;                    // untimed runs per point; < 0: until the timing settles
  int max_warmup = 30;                // the cap of a settling warm-up
  int reps = 5;                       // timed runs per point, each a trace row
};

// The largest b in [1, hi] with fits(b), for a fits() that holds up to some b* and fails above
// it: doubling, then bisection, so about 2·log2(hi) trials. 0 if fits(1) fails.
int largest_fitting(int hi, const std::function<bool(int)>& fits);

// The state of the generator dropout draws from (the device's): checkpoints save it, and
// interleaved runs each keep their own.
torch::Tensor rng_state(const torch::Device& device);
void set_rng_state(const torch::Device& device, const torch::Tensor& state);

class Trainer {
 public:
  // `comm` null: a single process (world size 1, or --emulate-ranks). Interleaved runs share it.
  Trainer(TrainOptions options, std::shared_ptr<Communicator> comm, std::ostream& log);
  ~Trainer();

  // All remaining steps, evaluations, checkpoints and the outputs.
  void run();
  // run() a step at a time, so that several policies' runs can take turns in one process: one
  // step with its progress line, evaluation and checkpoint, drawing dropout from this run's own
  // generator state (false once every step is done); then the final evaluation and outputs.
  bool advance();
  void finish();
  // The policy with every option at its value in force (minmax -> minmax:buffer=64:...), so
  // that an interleaved list can refuse one policy spelled twice.
  std::string resolved_policy() const;
  // One step; returns this rank's mean loss (unscaled).
  double step();
  // Dev-set accuracy (rank 0 evaluates, every rank returns it).
  double evaluate();
  void save_checkpoint(const std::string& path);
  // A calibration sweep (ddptrain --profile): training steps on b samples of exactly L tokens
  // over the (b, L) grid (policy "profile"), by every rank at once when there are several; then,
  // with several ranks, allreduces of each size (policy "allreduce", columns allreduce_bytes and
  // allreduce_ms) and backward alone or beside allreduces (column concurrent_allreduce_bytes),
  // and ZeRO-1's all-gather of each size (metadata allgather). Rank 0 writes OUT/steps.csv.
  void profile(ProfileOptions options);
  // ddptrain --profile-alongside: the same grid timed between the turns of training runs, so
  // that the profile measures the minutes the runs ran in (a machine's speed drifts over tens of
  // minutes; a profile taken before the runs cannot know it). One profiled step per turn, the
  // points pass after pass, each pass in a fresh seeded order; at the end, with several ranks,
  // the allreduce and interference profile; OUT/steps.csv as profile() writes it. `turns` is
  // how many profile_turn() calls will come; `trained` names the policies, for the metadata.
  void start_profile_alongside(ProfileOptions options, int turns, const std::string& trained);
  void profile_turn();
  void finish_profile_alongside();

  // One step's forward and backward passes on this process's ranks, micro-batch by
  // micro-batch, and the gradient allreduce, without the optimizer: the averaged gradient is
  // left in each parameter's .grad (tests compare it with the single-process one).
  void compute_gradients(const ddpsim::StepPlan& plan);
  int steps_done() const { return step_; }
  int ranks() const { return G_; }
  DistilBertForSequenceClassification& model() { return model_; }
  const AdamW& optimizer() const { return *optimizer_; }
  const std::vector<ddpsim::RankStep>& rows() const { return rows_; }

 private:
  // Per rank (G entries; only this process's ranks filled): compute times summed over the
  // micro-batches, mean loss, peak memory; and the timer marks used.
  struct Passes {
    std::vector<double> fwd_ms, bwd_ms, loss, peak_mem_mib;
    std::size_t backward_end = 0;  // the mark that ends this process's last backward
    std::size_t next_mark = 0;     // the first mark left free
  };
  Passes forward_backward(const ddpsim::StepPlan& plan, StepTimer& timer);
  void load_checkpoint(const std::string& path);
  std::vector<int> probe_bmax();
  // The constructor's parts (trainer_setup.cpp), in its order.
  void build_model();
  void build_policy();
  void build_distribution();
  // The step's optimizer, DDP's whole AdamW or under zero1 this rank's slice: the learning rate,
  // then the update and clearing the gradients for the next step.
  void set_lr(double lr);
  void update_parameters();
  // A batch's mean cross-entropy: the forward in the run's precision, the loss in fp32.
  torch::Tensor mean_loss(const Batch& batch);
  // The size of each of DDP's gradient buckets for this model, --bucket-mb and --first-bucket-mb.
  std::vector<double> ddp_bucket_bytes() const;
  // A rank's largest batch: the global batch, or the per-rank cap when smaller.
  int rank_batch_cap() const;
  std::vector<int> auto_profile_batches() const;
  std::vector<int> auto_profile_lengths(const std::vector<int>& batches) const;
  // The profile rows every rank timed together, step by step: how they differ within a step is
  // each rank's own noise, how steps differ their shared noise (ddpsim calibrate splits the two).
  std::vector<ddpsim::RankStep> every_rank(const std::vector<ddpsim::RankStep>& mine);
  std::vector<ddpsim::RankStep> profile_communication(const ProfileOptions& options);
  std::string profile_allgather(const ProfileOptions& options);
  // `collective` timed from a barrier of every rank, warmed up until every rank's timing settles:
  // the function that times one more run.
  std::function<double()> settled_collective(const ProfileOptions& options, std::function<void()> collective);
  // The options checked and their auto lists filled; DDP's reduction off; the (b, L) grid in a
  // seeded random order.
  std::vector<std::pair<int, int>> begin_profile(ProfileOptions& options);
  // One step of b samples of L tokens, timed in the phases a training step is timed in (every
  // rank at once when there are several): a profile row of this rank.
  ddpsim::RankStep profiled_step(const Batch& batch, int b, int L);
  // Every rank's rows, then the communication profile, written as OUT/steps.csv (rank 0).
  void end_profile(const ProfileOptions& options, std::vector<ddpsim::RankStep> rows, std::string what);
  void profile_interference(const ProfileOptions& options, std::vector<ddpsim::RankStep>& rows);
  int agree_max(int value);
  void plan_next(ddpsim::StepPlan& plan);
  double lr_at(int step) const;
  std::vector<std::pair<std::string, std::string>> metadata() const;
  std::string grad_dtype_name() const;
  std::string policy_label() const { return ddpsim::parse_policy_spec(opt_.policy).label(); }
  // "POLICY: " before each log line of an interleaved run, which logs every policy's lines.
  std::string log_prefix() const { return opt_.interleaved.empty() ? "" : policy_label() + ": "; }
  // What decides the sample stream besides the policy, B and the seed: a checkpoint records it.
  std::string data_identity() const {
    return (opt_.data.empty() ? "synthetic " + opt_.synthetic_lengths + " x" + std::to_string(opt_.synthetic_samples)
                              : "TSV " + opt_.data) +
           ", max_length " + std::to_string(opt_.max_length);
  }
  // What shapes the updates besides the stream: a resume under other values would not continue
  // the saved run (lr, schedule, regularisation, precision, accumulation).
  std::string training_identity() const;
  void write_outputs();

  TrainOptions opt_;
  std::shared_ptr<Communicator> comm_;
  std::ostream& log_;
  torch::Device device_;
  int G_ = 1, rank_ = 0;
  // Several real ranks in this process's group (not emulated ones): they sync, reduce, profile together.
  bool real_ranks() const { return comm_ && G_ > 1; }
  TextData data_, dev_;
  std::vector<int> lengths_;
  std::unique_ptr<ddpsim::DistributedSampler> sampler_;
  std::unique_ptr<ddpsim::RankBuffers> buffers_;
  std::unique_ptr<ddpsim::Scheduler> policy_;
  ddpsim::StepShape shape_;
  ddpsim::StepShape policy_shape() const;  // what the policy is made for
  DistilBertForSequenceClassification model_{nullptr};
  std::unique_ptr<AdamW> optimizer_;  // the whole model's (under zero1 the metadata's, and never stepped)
  std::unique_ptr<Zero1Optimizer> zero1_;
  std::unique_ptr<GradBuckets> buckets_;
  int step_ = 0;
  double emulated_allreduce_ms_ = 0;
  std::vector<ddpsim::RankStep> rows_;
  std::vector<double> decision_us_;
  std::vector<double> update_shares_;              // --profile: each step's AdamW update over its whole optimizer time
  std::vector<std::pair<int, double>> accuracy_;   // (step, dev accuracy)
  torch::Tensor rng_;                              // this run's dropout generator state between steps
  std::chrono::steady_clock::time_point started_;  // the first advance(), for progress lines
  struct Alongside {                               // --profile-alongside's grid and what it has timed
    ProfileOptions options;
    std::vector<std::pair<int, int>> points;
    int timed = 0;
    std::string trained;
    std::vector<ddpsim::RankStep> rows;
  };
  std::optional<Alongside> alongside_;
};

}  // namespace ddptrain
