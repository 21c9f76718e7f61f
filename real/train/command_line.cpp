// Reads ddptrain's options (boost::program_options) and runs every check that needs no rank.
#include "train/command_line.hpp"

#include <cstdint>
#include <sstream>

#include <boost/program_options.hpp>

#include "common/error.hpp"
#include "train/option_checks.hpp"

namespace ddptrain {

namespace po = boost::program_options;

namespace {

constexpr const char* USAGE = R"(usage: ddptrain [options]

Fine-tunes DistilBERT (distilbert-base-uncased layout, sequence classification) with
synchronous data parallelism: torch c10d, NCCL on GPUs, Gloo on CPUs. Each step, every rank
runs the chosen batch policy of ddpsim on its prefetch buffer (all ranks reach the same
allocation from the same seeded sample stream; a per-step all-gather checks it), trains on its
b_g samples with the loss scaled by G*b_g/B, and synchronises gradients in DDP buckets whose
allreduce overlaps backward. Writes OUT/steps.csv (one row per step and rank, compute timed
before the gradient wait) and OUT/summary.json in the formats ddpsim writes.

Ranks come from RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (torchrun); without
them from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (srun), meeting at SLURM_JOB_NODELIST's
first host on MASTER_PORT or 29500 + SLURM_JOB_ID mod 1000; or from --nproc-per-node N on this
machine. --emulate-ranks N runs N ranks' micro-batches one after another in one process: the
same update as N-rank DDP, with step time = slowest rank's compute + optimizer + a modelled
allreduce; the trace says so.

examples:
  ddptrain --data sst2/train.tsv --dev sst2/dev.tsv --vocab vocab.txt --policy minmax \
      --steps 800 --out run
  ddptrain --synthetic-lengths sst2 --model tiny --nproc-per-node 2 --steps 50 --out cpu2
  ddptrain --synthetic-lengths sst2 --emulate-ranks 4 --policy minmax --steps 100 --out emu4
  ddptrain --synthetic-lengths sst2 --nproc-per-node 2 --policy static,kk,sorted --steps 300 \
      --out cmp
  ddptrain --synthetic-lengths sst2 --model small --threads 1 --nproc-per-node 2 \
      --policy static,kk --steps 300 --profile-alongside --out cmp
                                          # and cmp/profile/steps.csv for ddpsim calibrate
  ddptrain --model small --write-layout small-layout.json
)";

// --bmax: a number for every rank, or a performance model JSON whose memory model decides

}  // namespace

CommandLine parse_command_line(int argc, char** argv) {
  CommandLine c;
  TrainOptions& o = c.train;
  ProfileOptions& profile = c.profile;
  std::string &bmax = c.bmax, &backend = c.backend, &precision = c.precision;
  int &nproc = c.nproc, &timeout_s = c.timeout_s, &threads = c.threads;
  std::int64_t seed = 0;  // signed, so that -1 is refused instead of wrapping around
  ProfileText grid;       // the --profile-* lists as written, read once the mode is known
  std::string &profile_batches = grid.batches, &profile_lengths = grid.lengths, &profile_warmup = grid.warmup,
              &profile_bytes = grid.bytes;
  po::options_description data("data"), model("model"), sched("batch policy"), optim("optimisation"),
      dist("distribution"), out("outputs");
  data.add_options()("data", po::value(&o.data), "GLUE TSV to train on (sentence, label)")(
      "vocab", po::value(&o.vocab), "WordPiece vocab.txt (bert-base-uncased)")("dev", po::value(&o.dev),
                                                                               "GLUE TSV for dev-set accuracy")(
      "synthetic-lengths", po::value(&o.synthetic_lengths),
      "instead of --data: random samples whose lengths follow HIST.json (`ddpsim lengths`) or 'sst2'")(
      "synthetic-samples", po::value(&o.synthetic_samples)->default_value(o.synthetic_samples),
      "synthetic dataset size")("max-length", po::value(&o.max_length)->default_value(o.max_length),
                                "truncation length in tokens")(
      "pad-to-multiple-of", po::value(&o.pad_to_multiple_of)->default_value(o.pad_to_multiple_of),
      "pad each batch to a multiple of N tokens (never past --max-length): fewer distinct shapes, more padding");
  model.add_options()("model", po::value(&o.model_size)->default_value(o.model_size),
                      "base (distilbert-base: 6 layers, width 768), small (4 layers, width 256, 4 heads, FFN 1024: "
                      "for CPU studies) or tiny (2 layers, width 32: for tests)")(
      "weights", po::value(&o.weights), "model.safetensors to load by parameter name (else random init)")(
      "dropout", po::value(&o.dropout), "override every dropout probability (0: deterministic)")(
      "write-layout", po::value<std::string>(),
      "write the model's parameter layout as a ddpsim model JSON to FILE and exit (for ddpsim calibrate --base)");
  sched.add_options()("policy", po::value(&o.policy)->default_value(o.policy),
                      "static | minmax[:cost=..][:buffer=K] | kk | sorted | token_budget | verl[:max_token_len=N] "
                      "(as in ddpsim); a comma-separated list trains each policy in turn, one step each, into "
                      "OUT/POLICY/ (minmax:cost=model -> OUT/minmax-cost-model), so that every policy runs through the "
                      "same minutes of a machine whose speed drifts")(
      "global-batch", po::value(&o.global_batch)->default_value(o.global_batch), "B, samples per step over all ranks")(
      "micro-batches", po::value(&o.micro_batches)->default_value(o.micro_batches),
      "gradient accumulation: each rank's batch in this many micro-batches, reduced once after the last "
      "(verl forms its own by its max_token_len: a count for verl alone is refused; in a --policy list the "
      "other policies take it)")("steps", po::value(&o.steps)->default_value(o.steps), "training steps")(
      "bmax", po::value(&bmax),
      "per-rank batch cap: N; a ddpsim model JSON whose memory model gives it; or 'probe' (CUDA): the largest "
      "batch of --max-length samples whose forward and backward fit, with AdamW's state and --probe-reserve aside")(
      "probe-reserve", po::value(&o.probe_reserve)->default_value(o.probe_reserve, "0.1"),
      "--bmax probe: fraction of device memory the probed batch leaves free")(
      "perf-model", po::value(&o.perf_model),
      "ddpsim performance model (built-in name or JSON) that minmax:cost=model balances predicted time with")(
      "seed", po::value(&seed)->default_value(0), "data order, sampling, initialisation, dropout");
  optim.add_options()("lr", po::value(&o.lr)->default_value(o.lr, "5e-5"), "AdamW peak learning rate")(
      "weight-decay", po::value(&o.weight_decay)->default_value(o.weight_decay), "AdamW weight decay")(
      "warmup", po::value(&o.warmup)->default_value(o.warmup, "0.1"), "linear warm-up, fraction of the steps")(
      "clip-norm", po::value(&o.clip_norm)->default_value(o.clip_norm), "gradient-norm clipping (0: off)")(
      "precision", po::value(&precision)->default_value(precision),
      "fp32, or bf16: forward passes under bf16 autocast (weights, gradients, allreduce and AdamW stay fp32)")(
      "optimizer-impl", po::value(&o.optimizer_impl)->default_value(o.optimizer_impl),
      "AdamW's implementation, the same update: auto (fused on CUDA with LibTorch >= 2, else foreach), per-param "
      "(torch::optim::AdamW), foreach (multi-tensor), fused (one kernel)");
  dist.add_options()("backend", po::value(&backend)->default_value(backend),
                     "auto (nccl on CUDA, else gloo), nccl, gloo")(
      "nproc-per-node", po::value(&nproc), "start N local ranks (CPU: Gloo; one GPU each with NCCL)")(
      "emulate-ranks", po::value(&o.emulate_ranks), "play N ranks in this one process (see above)")(
      "emulate-link-GBps", po::value(&o.emulate_link_GBps)->default_value(o.emulate_link_GBps),
      "bandwidth of the modelled allreduce under --emulate-ranks")(
      "emulate-latency-us", po::value(&o.emulate_latency_us)->default_value(o.emulate_latency_us),
      "per-step latency of the modelled ring allreduce")(
      "bucket-mb", po::value(&o.bucket_mb)->default_value(o.bucket_mb), "DDP bucket cap (MiB)")(
      "first-bucket-mb", po::value(&o.first_bucket_mb)->default_value(o.first_bucket_mb), "first bucket cap (MiB)")(
      "data-parallel", po::value(&o.data_parallel)->default_value(o.data_parallel),
      "ddp, or zero1 (ZeRO stage 1, several real ranks): DDP's allreduce, then each rank steps AdamW on a G-th of "
      "the flattened parameters and all-gathers the updated parameters, timed as a collective wait")(
      "timeout-s", po::value(&timeout_s)->default_value(timeout_s), "rendezvous and collective timeout")(
      "device", po::value(&o.device)->default_value(o.device), "auto, cpu or cuda")(
      "threads", po::value(&threads)->default_value(threads),
      "CPU: LibTorch's intra-op threads per rank (0: LibTorch's default); with --nproc-per-node, ranks are "
      "pinned to disjoint cores when the machine has N x threads of them");
  out.add_options()("out", po::value(&o.out), "folder for steps.csv, summary.json, checkpoint.pt")(
      "eval-every", po::value(&o.eval_every)->default_value(0), "dev accuracy every N steps (and at the end)")(
      "ckpt-every", po::value(&o.ckpt_every)->default_value(0), "checkpoint every N steps (atomic)")(
      "resume", po::value(&o.resume), "continue from a checkpoint: the same sample stream")(
      "log-every", po::value(&o.log_every)->default_value(o.log_every), "progress line every N steps")(
      "version", "name this build and exit")("help,h", "this help");
  po::options_description profiling("calibration sweep (for ddpsim calibrate)");
  profiling.add_options()(
      "profile",
      "instead of training: time forward, backward and optimizer over a (b, L) grid; with several ranks, all "
      "at once, then allreduce over a range of sizes, backward beside allreduces (interference) and ZeRO-1's "
      "all-gather at each size")(
      "profile-alongside",
      "while training (--policy, one or a list): after each turn of the policies, time one step of the "
      "--profile grid, point after point, pass after pass in seeded random orders; with several ranks, then the "
      "allreduce, interference and all-gather profile; into OUT/profile/steps.csv. A profile of the minutes the runs "
      "ran in, "
      "for a machine whose speed drifts (--profile-reps and --profile-warmup size the allreduce profile)")(
      "profile-batches", po::value(&profile_batches)->default_value(profile_batches),
      "batch sizes b, or auto: 1, 2, 3, 4, 6, 8, 12, ... up to --global-batch (and --bmax)")(
      "profile-lengths", po::value(&profile_lengths)->default_value(profile_lengths),
      "lengths L (up to --max-length), or auto: quantiles of the longest sample of random batches of the data, so "
      "the grid is dense where real steps fall")(
      "profile-bytes", po::value(&profile_bytes)->default_value(profile_bytes),
      "allreduce and all-gather sizes in bytes, timed when several ranks run --profile (then backward alone and "
      "beside allreduces, for the interference factor), or auto: 64 KiB, 1, 4, 16 and 64 MiB and the model's DDP "
      "bucket "
      "sizes (ddpsim calibrate fits the link at those)")(
      "profile-warmup", po::value(&profile_warmup)->default_value(profile_warmup),
      "untimed runs per point: N, or auto (until the median of 3 runs is within 5% of the 3 before)")(
      "profile-max-warmup", po::value(&profile.max_warmup)->default_value(profile.max_warmup),
      "at most this many runs of an auto warm-up")(
      "profile-reps", po::value(&profile.reps)->default_value(profile.reps), "timed runs per point, each a trace row");
  po::options_description all;
  all.add(data).add(model).add(sched).add(optim).add(dist).add(out).add(profiling);
  po::variables_map vm;
  const auto parsed = po::command_line_parser(argc, argv).options(all).run();
  for (const auto& option : parsed.options)  // Boost keeps stray words aside; they are mistakes here
    if (option.position_key >= 0)
      throw ddpsim::UsageError("unexpected argument \"" + option.value.front() + "\": ddptrain takes options only");
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::ostringstream text;
    text << USAGE << "\n" << all << "\n";
    c.help = true;
    c.help_text = text.str();
    return c;
  }
  if (vm.count("version")) {
    c.version = true;
    return c;
  }
  po::notify(vm);
  for (const auto& [name, value] : vm)  // an empty path would quietly mean "here"
    if (const auto* text = boost::any_cast<std::string>(&value.value());
        text && text->empty() && all.find(name, false).semantic()->max_tokens() > 0)
      throw ddpsim::UsageError("--" + name + ": empty value");
  if (seed < 0) throw ddpsim::UsageError("--seed must be from 0 to 9223372036854775807");
  o.seed = static_cast<std::uint64_t>(seed);
  if (o.model_size != "base" && o.model_size != "small" && o.model_size != "tiny")
    throw ddpsim::UsageError("--model is base, small or tiny, got \"" + o.model_size + "\"");
  refuse_unused(vm);
  if (vm.count("write-layout")) {  // refuse_unused left --model and --seed alone: no input to overwrite
    c.write_layout = vm["write-layout"].as<std::string>();
    return c;
  }
  check_ranges(o, vm);
  c.policies = split_policies(o.policy);
  c.profiling = vm.count("profile") > 0;
  c.alongside = vm.count("profile-alongside") > 0;
  check_modes(c, vm, grid);
  return c;
}

}  // namespace ddptrain
