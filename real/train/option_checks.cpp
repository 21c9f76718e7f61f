// The checks of ddptrain's options: each range, each option a mode would not read, each pair
// of options that exclude each other, and the output folders, before any rank starts.
#include "train/option_checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "common/error.hpp"
#include "common/split.hpp"
#include "model/perf_model.hpp"
#include "sched/scheduler.hpp"

namespace ddptrain {

namespace po = boost::program_options;

// --bmax: a number for every rank, or a performance model JSON whose memory model decides
// ("probe" is left to the trainer, which needs the model on its GPU).
static std::vector<int> parse_bmax(const std::string& text, int ranks, int max_length) {
  if (text.empty() || text == "probe") return {};
  int cap = 0;
  if (text.find_first_not_of("+-.0123456789eE") == std::string::npos) {
    if (text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9)
      throw ddpsim::UsageError("--bmax \"" + text + "\": expected a cap from 1 to 999999999, a model JSON or probe");
    cap = std::stoi(text);
  } else {
    const auto model = ddpsim::load_perf_model(text);
    if (model.mem_capacity_mib <= 0)
      throw ddpsim::InputError("--bmax " + text +
                               ": the model gives no device memory (memory_mib.capacity is 0), so "
                               "no batch cap follows from it: give a number, or a model with a memory model");
    cap = model.max_batch(max_length);
    if (cap < 1)
      throw ddpsim::InputError("--bmax " + text + ": not one sample of length " + std::to_string(max_length) +
                               " fits the model's memory capacity");
    std::cerr << "b_max " << cap << " per rank from the memory model of " << text << "\n";
  }
  if (cap < 1) throw ddpsim::UsageError("--bmax " + text + ": the cap must be ≥ 1");
  return std::vector<int>(static_cast<std::size_t>(ranks), cap);
}

static std::vector<int> parse_list(const std::string& text, const char* option) {
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

void check_ranges(const TrainOptions& o, const po::variables_map& vm) {
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
  require(in(o.eval_every, 0, 1e9) && in(o.ckpt_every, 0, 1e9),
          "--eval-every and --ckpt-every must be from 0 (off) to 1e9");
  require(in(o.log_every, 1, 1e9), "--log-every must be from 1 to 1e9");
}

std::vector<std::string> split_policies(const std::string& text) {
  const auto items = ddpsim::split_commas(text);
  std::vector<std::string> labels;
  for (const std::string& item : items) {
    if (item.empty())
      throw ddpsim::UsageError("--policy \"" + text +
                               "\": an empty policy in the list (policies are separated by commas)");
    ddpsim::PolicySpec spec;
    try {
      spec = ddpsim::parse_policy_spec(item);
    } catch (const ddpsim::InputError& e) {
      throw ddpsim::UsageError("--policy: " + std::string(e.what()));
    }
    try {
      ddpsim::require_known_policy(spec.name);  // before any model is built for it
    } catch (const ddpsim::InputError& e) {
      throw ddpsim::InputError("--policy " + item + ": " + e.what());
    }
    const std::string label = spec.label();
    if (std::find(labels.begin(), labels.end(), label) != labels.end())
      throw ddpsim::UsageError("--policy \"" + text + "\": " + label + " is listed twice");
    labels.push_back(label);
  }
  return items;
}

std::string policy_folder(const std::string& out, const std::string& policy) {
  std::string name = ddpsim::parse_policy_spec(policy).label();
  std::replace(name.begin(), name.end(), ':', '-');
  std::replace(name.begin(), name.end(), '=', '-');
  return (std::filesystem::path(out) / name).string();
}

// The folders a run writes and the files it writes in them, checked here, before any rank starts
// (one message, not one per rank): a file where a folder goes, or a folder where a file goes, is
// refused before the training instead of after it.
static void check_output_paths(const std::string& out, const std::vector<std::string>& policies, bool profile,
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

bool given(const po::variables_map& vm, const char* name) {
  return vm.count(name) && !vm[name].defaulted();
}

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
    refuse_beside(
        "profile", "it times fixed shapes instead of training",
        {"profile-alongside", "policy", "steps", "dev", "eval-every", "ckpt-every", "resume", "perf-model",
         "micro-batches", "lr", "weight-decay", "warmup", "clip-norm", "pad-to-multiple-of", "data-parallel"});
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

// --data-parallel zero1 shards the optimizer over real ranks: what it cannot run beside.
static void check_data_parallel(const TrainOptions& o, const po::variables_map& vm, bool several_ranks) {
  if (o.data_parallel != "ddp" && o.data_parallel != "zero1")
    throw ddpsim::UsageError("--data-parallel is ddp or zero1, got \"" + o.data_parallel + "\"");
  if (o.data_parallel == "ddp") return;
  if (given(vm, "emulate-ranks"))
    throw ddpsim::UsageError(
        "--data-parallel zero1 shards the optimizer over real ranks; --emulate-ranks plays "
        "them in one process (use --nproc-per-node N)");
  if (!several_ranks)
    throw ddpsim::UsageError(
        "--data-parallel zero1 shards the optimizer over the ranks, and this run has one "
        "(--nproc-per-node N, or a launcher's WORLD_SIZE)");
  if (given(vm, "resume") || o.ckpt_every > 0)
    throw ddpsim::UsageError(
        "--data-parallel zero1: each rank holds a G-th of AdamW's state, which checkpoints do "
        "not gather (leave --ckpt-every and --resume out, or train with ddp)");
}

void check_modes(CommandLine& c, const po::variables_map& vm, const ProfileText& grid) {
  const TrainOptions& o = c.train;
  const std::vector<std::string>& policies = c.policies;
  const bool alongside = c.alongside;
  ProfileOptions& profile = c.profile;
  const std::string &profile_batches = grid.batches, &profile_lengths = grid.lengths, &profile_warmup = grid.warmup,
                    &profile_bytes = grid.bytes;
  const int nproc = c.nproc, threads = c.threads, timeout_s = c.timeout_s;
  if (policies.size() > 1 && given(vm, "resume"))
    throw ddpsim::UsageError(
        "--resume continues one run; an interleaved --policy list cannot be resumed (each "
        "policy's checkpoint is OUT/POLICY/checkpoint.pt: resume it with its own --policy)");
  // verl cuts each rank's batch itself, into as many micro-batches as its max_token_len needs:
  // a count given for it alone would be read by nothing (in a list, the other policies take it).
  const auto forms_own = [](const std::string& p) { return ddpsim::forms_own_micro_batches(p.substr(0, p.find(':'))); };
  if (!c.profiling && o.micro_batches > 1 && std::all_of(policies.begin(), policies.end(), forms_own))
    throw ddpsim::UsageError("--micro-batches " + std::to_string(o.micro_batches) + ": --policy " + o.policy +
                             " forms its own micro-batches (as many as its max_token_len tokens per micro-batch "
                             "need), so the count would be ignored: leave --micro-batches out (and size the "
                             "micro-batches with verl:max_token_len=N)");
  check_output_paths(o.out, policies, c.profiling, alongside);
  // Slurm's task count counts only where torchrun's variables are absent, as in Launch.
  const char* world = std::getenv("WORLD_SIZE");
  if (!world && !std::getenv("RANK") && std::getenv("SLURM_PROCID")) world = std::getenv("SLURM_NTASKS");
  const bool several_ranks = (given(vm, "nproc-per-node") && nproc > 1) || (world && std::atoi(world) > 1);
  // Both say how many ranks there are: --nproc-per-node wins (it spawns them here); say so.
  if (given(vm, "nproc-per-node") && std::getenv("SLURM_NTASKS") && std::string(std::getenv("SLURM_NTASKS")) != "1")
    std::cerr << "note: --nproc-per-node " << nproc
              << " starts this node's ranks itself; Slurm's SLURM_NTASKS=" << std::getenv("SLURM_NTASKS")
              << " (srun's tasks) is not used (leave --nproc-per-node out under srun)\n";
  if (!c.profiling && !alongside)
    for (const char* option : {"profile-batches", "profile-lengths", "profile-bytes", "profile-warmup",
                               "profile-max-warmup", "profile-reps"})
      if (!vm[option].defaulted())
        throw ddpsim::UsageError(std::string("--") + option + " is for --profile and --profile-alongside runs");
  if (c.profiling || alongside) {
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
    if (profile.reps < 1 || profile.reps > 10000) throw ddpsim::UsageError("--profile-reps must be from 1 to 10000");
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
          throw ddpsim::UsageError(std::string("--") + option +
                                   " sizes the allreduce profile --profile-alongside "
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
    throw ddpsim::UsageError(
        "--profile-bytes sizes the allreduces and all-gathers a profile of several ranks times; this one has one "
        "rank (--nproc-per-node N, or a launcher's WORLD_SIZE)");
  if (vm.count("dev") && vm.count("synthetic-lengths"))
    throw ddpsim::UsageError("--dev is a TSV for --data runs; --synthetic-lengths makes its own dev set");
  if (vm.count("data") && vm.count("synthetic-lengths"))
    throw ddpsim::UsageError("--data trains on a TSV, --synthetic-lengths on made-up sentences: give one of them");
  if (vm.count("emulate-ranks") && vm.count("nproc-per-node"))
    throw ddpsim::UsageError(
        "--emulate-ranks plays N ranks in one process, --nproc-per-node starts N processes: give one of them");
  check_data_parallel(o, vm, several_ranks);
  if (threads < 0 || threads > 1024) throw ddpsim::UsageError("--threads must be from 0 to 1024");
  if (vm.count("nproc-per-node") && (nproc < 1 || nproc > 1024))
    throw ddpsim::UsageError("--nproc-per-node must be from 1 to 1024");
  if (timeout_s < 1) throw ddpsim::UsageError("--timeout-s must be at least 1");
}

void apply_ranks(CommandLine& c, int ranks) {
  TrainOptions& o = c.train;
  try {
    o.b_max = parse_bmax(c.bmax, ranks, o.max_length);
  } catch (const ddpsim::InputError& e) {
    throw ddpsim::InputError(std::string(e.what()).rfind("--bmax", 0) == 0 ? e.what()
                                                                           : "--bmax: " + std::string(e.what()));
  }
  o.probe_bmax = c.bmax == "probe";
  o.profiling = c.profiling;
  if (!c.profiling && o.global_batch < ranks)
    throw ddpsim::UsageError("--global-batch " + std::to_string(o.global_batch) + " is less than the " +
                             std::to_string(ranks) + " ranks: every rank needs a sample each step");
  if (!c.profiling && o.micro_batches > o.global_batch / std::max(ranks, 1))
    throw ddpsim::UsageError("--micro-batches " + std::to_string(o.micro_batches) +
                             " is more than a rank's share of "
                             "--global-batch (" +
                             std::to_string(o.global_batch) + " over " + std::to_string(ranks) +
                             " ranks: " + std::to_string(o.global_batch / std::max(ranks, 1)) +
                             "): every micro-batch needs a sample");
}

}  // namespace ddptrain
