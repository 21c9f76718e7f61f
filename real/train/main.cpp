// ddptrain: real data-parallel DistilBERT fine-tuning with ddpsim's batch policies, writing
// traces the simulator reads. One process per rank (torchrun, srun, or --nproc-per-node), or
// one process playing N ranks (--emulate-ranks).
#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <iostream>

#include <malloc.h>

#include <c10/macros/Macros.h>
#include <boost/program_options.hpp>
#ifdef C10_USE_GLOG
#include <glog/logging.h>
#endif

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/interrupt.hpp"
#include "common/split.hpp"
#include "ddpsim_version.hpp"
#include "model/layout.hpp"
#include "model/perf_model.hpp"
#include "train/launcher.hpp"
#include "train/trainer.hpp"

namespace po = boost::program_options;

namespace {

// CPU tensors come from glibc's malloc, which by default gives large freed blocks back to the
// kernel and faults fresh pages in on the next use. Batch shapes change every step, so that
// cost landed on training steps and not on the fixed-shape profile: a 4-rank emulated step of
// the small model on one core took 383 ms instead of 172 ms, its optimizer 165 ms instead of
// 29 ms. Freed memory is kept for reuse instead, as CUDA's caching allocator does on GPUs.
void keep_freed_memory() {
#ifdef __GLIBC__
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's ceiling on 64-bit; larger blocks are still mapped
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_TOP_PAD, 256 << 20);
#endif
}

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
// ("probe" is left to the trainer, which needs the model on its GPU).
std::vector<int> parse_bmax(const std::string& text, int ranks, int max_length) {
  if (text.empty() || text == "probe") return {};
  int cap = 0;
  if (text.find_first_not_of("+-.0123456789eE") == std::string::npos) {
    if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
      throw ddpsim::UsageError("--bmax \"" + text + "\": expected a cap from 1 to 999999999, a model JSON or probe");
    cap = std::stoi(text);
  } else {
    const auto model = ddpsim::load_perf_model(text);
    cap = model.max_batch(max_length);
    if (cap < 1)
      throw ddpsim::InputError("--bmax " + text + ": not one sample of length " + std::to_string(max_length) +
                               " fits the model's memory capacity");
    std::cerr << "b_max " << cap << " per rank from the memory model of " << text << "\n";
  }
  if (cap < 1) throw ddpsim::UsageError("--bmax " + text + ": the cap must be ≥ 1");
  return std::vector<int>(static_cast<std::size_t>(ranks), cap);
}

std::vector<int> parse_list(const std::string& text, const char* option) {
  std::vector<int> values;
  for (const std::string& item : ddpsim::split_commas(text)) {
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 9 ||
        std::stoi(item) < 1)
      throw ddpsim::UsageError(std::string(option) + " \"" + text +
                               "\": expected auto, or integers from 1 to 999999999 separated by commas");
    if (std::find(values.begin(), values.end(), std::stoi(item)) != values.end())
      throw ddpsim::UsageError(std::string(option) + " \"" + text + "\": " + item + " is listed twice");
    values.push_back(std::stoi(item));
  }
  return values;
}

// Every numeric option in its range, before anything starts: an option out of range is a usage
// error naming it and the range, never a value quietly read as another (0 steps, a negative cap).
void check_options(const ddptrain::TrainOptions& o, const po::variables_map& vm) {
  auto in = [](double v, double lo, double hi) { return std::isfinite(v) && v >= lo && v <= hi; };
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw ddpsim::UsageError(what);
  };
  require(in(o.steps, 1, 1e8), "--steps must be from 1 to 100000000");
  require(in(o.global_batch, 1, 1e6), "--global-batch must be from 1 to 1000000");
  require(in(o.micro_batches, 1, 1e4), "--micro-batches must be from 1 to 10000");
  require(in(double(o.synthetic_samples), 1, 1e7),
          "--synthetic-samples must be from 1 to 10000000 (the samples are held in memory)");
  require(in(o.max_length, 2, 1e6), "--max-length must be from 2 (a [CLS] and a [SEP] token) to 1000000");
  require(in(o.pad_to_multiple_of, 1, o.max_length),
          "--pad-to-multiple-of must be from 1 to --max-length (" + std::to_string(o.max_length) + ")");
  require(in(o.probe_reserve, 0, 0.999), "--probe-reserve is a fraction of device memory, from 0 to below 1");
  require(in(o.bucket_mb, 1e-3, 1e5), "--bucket-mb must be from 0.001 to 100000 (MiB)");
  require(in(o.first_bucket_mb, 1e-3, 1e5), "--first-bucket-mb must be from 0.001 to 100000 (MiB)");
  require(in(o.lr, 0, 1e3) && o.lr > 0, "--lr must be a positive number up to 1000");
  require(in(o.weight_decay, 0, 1e3), "--weight-decay must be from 0 to 1000");
  require(in(o.warmup, 0, 1), "--warmup is a fraction of the steps, from 0 to 1");
  require(in(o.clip_norm, 0, 1e30), "--clip-norm must be from 0 (off) to 1e30");
  require(!vm.count("dropout") || in(o.dropout, 0, 0.999), "--dropout is a probability in [0, 1)");
  require(!vm.count("emulate-ranks") || in(o.emulate_ranks, 1, 4096), "--emulate-ranks must be from 1 to 4096");
  require(in(o.emulate_link_GBps, 1e-6, 1e6), "--emulate-link-GBps must be from 1e-06 to 1000000 (GB/s)");
  require(in(o.emulate_latency_us, 0, 1e9), "--emulate-latency-us must be from 0 to 1e9 (µs)");
  require(in(o.eval_every, 0, 1e9) && in(o.ckpt_every, 0, 1e9), "--eval-every and --ckpt-every must be from 0 (off) to 1e9");
  require(in(o.log_every, 1, 1e9), "--log-every must be from 1 to 1e9");
}

// --policy A,B,...: the policies to train in turn, one step each, in one process (each with its
// own model, optimizer, sampler and dropout stream, writing OUT/<policy>/), so that a machine
// that drifts in speed over minutes gives every policy the same minutes. Each item as given.
std::vector<std::string> split_policies(const std::string& text) {
  const auto items = ddpsim::split_commas(text);
  std::vector<std::string> labels;
  for (const std::string& item : items) {
    if (item.empty())
      throw ddpsim::UsageError("--policy \"" + text +
                               "\": an empty policy in the list (policies are separated by commas)");
    std::string label = item;
    try {
      label = ddpsim::parse_policy_spec(item).label();
    } catch (const ddpsim::InputError& e) {
      throw ddpsim::UsageError("--policy: " + std::string(e.what()));
    }
    if (std::find(labels.begin(), labels.end(), label) != labels.end())
      throw ddpsim::UsageError("--policy \"" + text + "\": " + label + " is listed twice");
    labels.push_back(label);
  }
  return items;
}

// The folder of one policy of an interleaved run: minmax:cost=model -> OUT/minmax-cost-model.
std::string policy_folder(const std::string& out, const std::string& policy) {
  std::string name = ddpsim::parse_policy_spec(policy).label();
  std::replace(name.begin(), name.end(), ':', '-');
  std::replace(name.begin(), name.end(), '=', '-');
  return (std::filesystem::path(out) / name).string();
}

// The folders a run writes and the files it writes in them, checked here, before any rank starts
// (one message, not one per rank): a file where a folder goes, or a folder where a file goes, is
// refused before the training instead of after it.
void check_output_paths(const std::string& out, const std::vector<std::string>& policies, bool profile,
                        bool alongside) {
  if (out.empty()) return;
  struct Folder {
    std::string path, what;  // what: empty for --out itself
    std::vector<const char*> files;
  };
  std::vector<Folder> folders;
  if (policies.size() > 1) {
    folders.push_back({out, "", {}});
    for (const auto& policy : policies)
      folders.push_back({policy_folder(out, policy), "policy " + policy, {"steps.csv", "summary.json"}});
  } else if (profile) {
    folders.push_back({out, "", {"steps.csv"}});
  } else {
    folders.push_back({out, "", {"steps.csv", "summary.json"}});
  }
  if (alongside)
    folders.push_back({(std::filesystem::path(out) / "profile").string(), "--profile-alongside", {"steps.csv"}});
  std::error_code ec;
  for (const auto& [path, what, files] : folders) {
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_directory(path, ec))
      throw ddpsim::UsageError("--out " + out + ": " + (what.empty() ? "" : path + " ") +
                               "is a file; expected a folder" + (what.empty() ? "" : " for " + what) +
                               " (made if missing)");
    for (const char* file : files)
      if (const auto target = std::filesystem::path(path) / file; std::filesystem::is_directory(target, ec))
        throw ddpsim::UsageError("--out " + out + ": " + target.string() + " is a folder; the run writes its " + file +
                                 " there");
  }
}

// Written on the command line, not a default.
bool given(const po::variables_map& vm, const char* name) { return vm.count(name) && !vm[name].defaulted(); }

// An option the run would not read is a mistake the user should hear of, not a silent no-op.
void refuse_unused(const po::variables_map& vm) {
  const auto refuse_beside = [&](const char* mode, const char* why, std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (given(vm, name))
        throw ddpsim::UsageError(std::string("--") + name + " is not used with --" + mode + ": " + why);
  };
  if (given(vm, "write-layout"))
    for (const auto& [name, value] : vm)
      if (!value.defaulted() && name != "write-layout" && name != "model" && name != "seed")
        throw ddpsim::UsageError("--" + name + " is not used with --write-layout, which reads --model and --seed only");
  if (given(vm, "profile"))
    refuse_beside("profile", "it times fixed shapes instead of training",
                  {"profile-alongside", "policy", "steps", "dev", "eval-every", "ckpt-every", "resume", "perf-model",
                   "micro-batches", "lr", "weight-decay", "warmup", "clip-norm", "pad-to-multiple-of"});
  if (given(vm, "synthetic-lengths") && given(vm, "vocab"))
    throw ddpsim::UsageError("--vocab tokenizes --data; --synthetic-lengths makes its own token ids");
  if (given(vm, "synthetic-samples") && !given(vm, "synthetic-lengths") && !given(vm, "profile"))
    throw ddpsim::UsageError("--synthetic-samples sizes the --synthetic-lengths dataset");
  if (given(vm, "perf-model") && vm["policy"].as<std::string>().find("cost=model") == std::string::npos)
    throw ddpsim::UsageError("--perf-model is read by minmax:cost=model only, and --policy is " +
                             vm["policy"].as<std::string>());
  if (given(vm, "ckpt-every") && vm["ckpt-every"].as<int>() > 0 && !given(vm, "out"))
    throw ddpsim::UsageError("--ckpt-every writes checkpoints into --out: give --out DIR");
}

int run(int argc, char** argv) {
  ddptrain::TrainOptions o;
  std::string bmax, backend = "auto", precision = "fp32";
  int nproc = 0, timeout_s = 120, threads = 0;
  std::int64_t seed = 0;  // signed, so that -1 is refused instead of wrapping around
  ddptrain::ProfileOptions profile;
  std::string profile_batches = "auto", profile_lengths = "auto", profile_warmup = "auto",
              profile_bytes = "auto";
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
      "(verl forms its own, by its max_token_len, and refuses a count)")("steps", po::value(&o.steps)->default_value(o.steps), "training steps")(
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
      "at once, then allreduce over a range of sizes and backward beside allreduces (interference)")(
      "profile-alongside",
      "while training (--policy, one or a list): after each turn of the policies, time one step of the "
      "--profile grid, point after point, pass after pass in seeded random orders; with several ranks, then the "
      "allreduce and interference profile; into OUT/profile/steps.csv. A profile of the minutes the runs ran in, "
      "for a machine whose speed drifts (--profile-reps and --profile-warmup size the allreduce profile)")(
      "profile-batches", po::value(&profile_batches)->default_value(profile_batches),
      "batch sizes b, or auto: 1, 2, 3, 4, 6, 8, 12, ... up to --global-batch (and --bmax)")(
      "profile-lengths", po::value(&profile_lengths)->default_value(profile_lengths),
      "lengths L (up to --max-length), or auto: quantiles of the longest sample of random batches of the data, so "
      "the grid is dense where real steps fall")(
      "profile-bytes", po::value(&profile_bytes)->default_value(profile_bytes),
      "allreduce sizes in bytes, timed when several ranks run --profile (then backward alone and beside "
      "allreduces, for the interference factor), or auto: 64 KiB, 1, 4, 16 and 64 MiB and the model's DDP bucket "
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
      throw ddpsim::UsageError("unexpected argument \"" + option.value.front() +
                               "\": ddptrain takes options only");
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::cout << USAGE << "\n" << all << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "ddptrain " << DDPSIM_VERSION_STRING << "\n";
    return 0;
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
    const std::string target = vm["write-layout"].as<std::string>();
    ddptrain::DistilBertForSequenceClassification model(ddptrain::DistilBertConfig::named(o.model_size), o.seed);
    ddpsim::AtomicFile file(target);
    file.stream() << ddptrain::layout_model(model, o.model_size).dump(2) << "\n";
    file.commit();
    std::cout << "wrote the layout of the " << o.model_size << " model to " << target << "\n";
    return 0;
  }

  check_options(o, vm);
  const auto policies = split_policies(o.policy);
  if (policies.size() > 1 && given(vm, "resume"))
    throw ddpsim::UsageError("--resume continues one run; an interleaved --policy list cannot be resumed (each "
                             "policy's checkpoint is OUT/POLICY/checkpoint.pt: resume it with its own --policy)");
  // verl cuts each rank's batch itself, into as many micro-batches as its max_token_len needs:
  // a count given for it alone would be read by nothing (in a list, the other policies take it).
  const auto forms_own = [](const std::string& p) { return p.substr(0, p.find(':')) == "verl"; };
  if (!vm.count("profile") && o.micro_batches > 1 && std::all_of(policies.begin(), policies.end(), forms_own))
    throw ddpsim::UsageError("--micro-batches " + std::to_string(o.micro_batches) + ": --policy " + o.policy +
                             " forms its own micro-batches (as many as verl:max_token_len=N tokens per micro-batch "
                             "need), so the count would be ignored: set max_token_len, or leave --micro-batches out");
  const bool alongside = vm.count("profile-alongside") > 0;
  check_output_paths(o.out, policies, vm.count("profile") > 0, alongside);
  // Slurm's task count counts only where torchrun's variables are absent, as in Launch.
  const char* world = std::getenv("WORLD_SIZE");
  if (!world && !std::getenv("RANK") && std::getenv("SLURM_PROCID")) world = std::getenv("SLURM_NTASKS");
  const bool several_ranks = (given(vm, "nproc-per-node") && nproc > 1) || (world && std::atoi(world) > 1);
  if (!vm.count("profile") && !alongside)
    for (const char* option : {"profile-batches", "profile-lengths", "profile-bytes", "profile-warmup",
                               "profile-max-warmup", "profile-reps"})
      if (!vm[option].defaulted())
        throw ddpsim::UsageError(std::string("--") + option + " is for --profile and --profile-alongside runs");
  if (vm.count("profile") || alongside) {
    if (profile_batches != "auto") profile.batches = parse_list(profile_batches, "--profile-batches");
    if (profile_lengths != "auto") profile.lengths = parse_list(profile_lengths, "--profile-lengths");
    if (profile_bytes != "auto") profile.bytes = parse_list(profile_bytes, "--profile-bytes");
    if (profile_warmup != "auto") {
      if (profile_warmup.empty() || profile_warmup.find_first_not_of("0123456789") != std::string::npos ||
          profile_warmup.size() > 6)
        throw ddpsim::UsageError("--profile-warmup is a number of runs from 0 to 999999, or auto, got \"" +
                                 profile_warmup + "\"");
      profile.warmup = std::stoi(profile_warmup);
    }
    for (int bytes : profile.bytes)
      if (bytes % 4)
        throw ddpsim::UsageError("--profile-bytes: " + std::to_string(bytes) +
                                 " is not a whole number of 4-byte (fp32) gradient elements");
    if (profile.max_warmup < 6 || profile.max_warmup > 10000)
      throw ddpsim::UsageError("--profile-max-warmup must be from 6 to 10000");
    if (profile.reps < 1 || profile.reps > 10000)
      throw ddpsim::UsageError("--profile-reps must be from 1 to 10000");
    if (given(vm, "profile-max-warmup") && profile_warmup != "auto")
      throw ddpsim::UsageError("--profile-max-warmup caps --profile-warmup auto, and --profile-warmup is " +
                               profile_warmup);
  }
  if (alongside) {
    if (o.out.empty()) throw ddpsim::UsageError("--profile-alongside writes OUT/profile/steps.csv: give --out DIR");
    if (given(vm, "resume"))
      throw ddpsim::UsageError("--profile-alongside times the grid over a whole run; a resumed run is part of one");
    if (!several_ranks)
      for (const char* option : {"profile-warmup", "profile-max-warmup", "profile-reps"})
        if (given(vm, option))
          throw ddpsim::UsageError(std::string("--") + option + " sizes the allreduce profile --profile-alongside "
                                   "takes with several ranks, and this run has one (the grid's points are timed "
                                   "once a turn)");
  }
  // Options of a mode that is off: checked after the ranges, which name a bad value first.
  if (given(vm, "probe-reserve") && !(vm.count("bmax") && vm["bmax"].as<std::string>() == "probe"))
    throw ddpsim::UsageError("--probe-reserve sizes the batch --bmax probe finds, and --bmax probe is not given");
  for (const char* name : {"emulate-link-GBps", "emulate-latency-us"})
    if (given(vm, name) && !given(vm, "emulate-ranks"))
      throw ddpsim::UsageError(std::string("--") + name +
                               " shapes the allreduce --emulate-ranks models, which is not given");
  if (o.eval_every > 0 && !given(vm, "dev") && !given(vm, "synthetic-lengths"))
    throw ddpsim::UsageError("--eval-every measures accuracy on --dev, which is not given (a --data run's dev set)");
  if (given(vm, "profile-bytes") && !several_ranks)
    throw ddpsim::UsageError("--profile-bytes sizes the allreduces a profile of several ranks times; this one has one "
                             "rank (--nproc-per-node N, or a launcher's WORLD_SIZE)");
  if (vm.count("dev") && vm.count("synthetic-lengths"))
    throw ddpsim::UsageError("--dev is a TSV for --data runs; --synthetic-lengths makes its own dev set");
  if (vm.count("data") && vm.count("synthetic-lengths"))
    throw ddpsim::UsageError("--data trains on a TSV, --synthetic-lengths on made-up sentences: give one of them");
  if (vm.count("emulate-ranks") && vm.count("nproc-per-node"))
    throw ddpsim::UsageError(
        "--emulate-ranks plays N ranks in one process, --nproc-per-node starts N processes: give one of them");
  if (threads < 0 || threads > 1024) throw ddpsim::UsageError("--threads must be from 0 to 1024");
  if (vm.count("nproc-per-node") && (nproc < 1 || nproc > 1024))
    throw ddpsim::UsageError("--nproc-per-node must be from 1 to 1024");
  if (timeout_s < 1) throw ddpsim::UsageError("--timeout-s must be at least 1");
  if (nproc > 0) {
    std::vector<std::string> rest;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--nproc-per-node") {
        ++i;
        continue;
      }
      if (a.rfind("--nproc-per-node=", 0) == 0) continue;
      rest.push_back(a);
    }
    return ddptrain::launch_local_ranks(nproc, rest, threads);
  }
  ddptrain::apply_cpu_placement(threads);
  const auto launch = ddptrain::Launch::from_environment();
  const int ranks = o.emulate_ranks > 0 ? o.emulate_ranks : launch.world_size;
  try {
    o.b_max = parse_bmax(bmax, ranks, o.max_length);
  } catch (const ddpsim::InputError& e) {
    throw ddpsim::InputError(std::string(e.what()).rfind("--bmax", 0) == 0 ? e.what() : "--bmax: " + std::string(e.what()));
  }
  o.probe_bmax = bmax == "probe";
  o.profiling = vm.count("profile") > 0;
  if (!vm.count("profile") && o.global_batch < ranks)
    throw ddpsim::UsageError("--global-batch " + std::to_string(o.global_batch) + " is less than the " +
                             std::to_string(ranks) + " ranks: every rank needs a sample each step");
  if (!vm.count("profile") && o.micro_batches > o.global_batch / std::max(ranks, 1))
    throw ddpsim::UsageError("--micro-batches " + std::to_string(o.micro_batches) + " is more than a rank's share of "
                             "--global-batch (" + std::to_string(o.global_batch) + " over " + std::to_string(ranks) +
                             " ranks: " + std::to_string(o.global_batch / std::max(ranks, 1)) +
                             "): every micro-batch needs a sample");
  o.precision = ddptrain::parse_precision(precision);
  o.local_rank = launch.local_rank;
  std::shared_ptr<ddptrain::Communicator> comm;
  if (launch.world_size > 1 || backend != "auto") {
    if (backend == "auto") backend = torch::cuda::is_available() && o.device != "cpu" ? "nccl" : "gloo";
    if (backend != "gloo" && backend != "nccl") throw ddpsim::UsageError("--backend is auto, nccl or gloo");
    comm = ddptrain::connect(launch, backend, std::chrono::seconds(timeout_s));
  }
  std::ostream null_stream(nullptr);
  if (vm.count("profile") && o.data.empty() && o.synthetic_lengths.empty())
    o.synthetic_lengths = "sst2";  // data unused
  std::ostream& log = launch.rank == 0 ? std::cout : null_stream;
  if (policies.size() > 1 || alongside) {
    std::vector<std::unique_ptr<ddptrain::Trainer>> runs;
    std::vector<std::string> resolved;
    for (const auto& policy : policies) {
      ddptrain::TrainOptions one = o;
      one.profiled_alongside = alongside;
      if (policies.size() > 1) {
        one.policy = policy;
        one.interleaved = policies;
        if (policy.find("cost=model") == std::string::npos) one.perf_model.clear();
        if (!o.out.empty()) one.out = policy_folder(o.out, policy);
      }
      runs.push_back(std::make_unique<ddptrain::Trainer>(one, comm, log));
      resolved.push_back(runs.back()->resolved_policy());
      for (std::size_t j = 0; j + 1 < resolved.size(); ++j)
        if (resolved[j] == resolved.back())
          throw ddpsim::UsageError("--policy: " + policy + " is " + policies[j] + " with its options written out (" +
                                   resolved.back() + "): the same policy twice");
    }
    // The profile's own model and optimizer, on one real rank of this process (emulated ranks
    // take turns on one device) or on every rank at once.
    std::unique_ptr<ddptrain::Trainer> profiler;
    if (alongside) {
      ddptrain::TrainOptions p = o;
      p.policy = "static";
      p.perf_model.clear();
      p.profiling = true;
      p.emulate_ranks = 0;
      p.out = (std::filesystem::path(o.out) / "profile").string();
      profiler = std::make_unique<ddptrain::Trainer>(p, comm, log);
      profiler->start_profile_alongside(profile, o.steps, o.policy);
    }
    for (bool more = true; more;) {
      more = false;
      for (auto& run : runs) more = run->advance() || more;
      if (profiler) profiler->profile_turn();
    }
    for (auto& run : runs) run->finish();
    if (profiler) profiler->finish_profile_alongside();
    return 0;
  }
  ddptrain::Trainer trainer(o, comm, log);
  if (vm.count("profile")) {
    trainer.profile(profile);
    return 0;
  }
  trainer.run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
#ifdef C10_USE_GLOG
  FLAGS_minloglevel = 3;  // c10d also logs the errors ddptrain reports in one line itself
#endif
  keep_freed_memory();
  ddpsim::install_interrupt_handler("ddptrain");
  try {
    return run(argc, argv);
  } catch (const ddpsim::UsageError& e) {
    std::cerr << "ddptrain: " << e.what() << " (see ddptrain --help)\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "ddptrain: " << e.what() << " (see ddptrain --help)\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "ddptrain: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "ddptrain: " << e.what() << "\n";
    return 1;
  }
}
