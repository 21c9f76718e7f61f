// The trainer's files: the trace and summary of docs/method.md (rank 0), and checkpoints that
// resume the same sample stream (model, optimizer, step, every rank's dropout generator; the
// sampler, its buffers and the policy's state are rebuilt by replaying the seeded decisions,
// which are deterministic and cost microseconds a step).
#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/hash.hpp"
#include "common/interrupt.hpp"
#include "report/outputs.hpp"
#include "train/launcher.hpp"
#include "train/machine.hpp"
#include "train/step_timer.hpp"
#include "train/trainer.hpp"

#ifdef DDPTRAIN_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

namespace ddptrain {

void Trainer::write_outputs() {
  ddpsim::PolicyRun run{policy_label(), policy_->solver(), G_, rows_, decision_us_};
  const std::vector<ddpsim::TokenSummary> summaries = {ddpsim::summarize(run)};
  nlohmann::json config = {{"tool", "ddptrain"},
                           {"data", data_.description},
                           {"world_size", comm_ ? comm_->size() : 1},
                           {"emulated_ranks", opt_.emulate_ranks},
                           {"ranks", G_},
                           {"global_batch", opt_.global_batch},
                           {"micro_batches", opt_.micro_batches},
                           {"steps", opt_.steps},
                           {"max_length", opt_.max_length},
                           {"seed", opt_.seed},
                           {"policy", policy_label()},
                           {"model", opt_.model_size},
                           {"precision", precision_name(opt_.precision)},
                           {"grad_dtype", grad_dtype_name()},
                           {"optimizer_impl", optimizer_impl_name(optimizer_->impl())},
                           {"lr", opt_.lr},
                           {"bucket_mb", opt_.bucket_mb},
                           {"first_bucket_mb", opt_.first_bucket_mb}};
  nlohmann::json accuracy = nlohmann::json::array();
  for (const auto& [step, acc] : accuracy_) accuracy.push_back({{"step", step}, {"accuracy", acc}});
  config["dev_accuracy"] = accuracy;
  if (opt_.pad_to_multiple_of > 1) config["pad_to_multiple_of"] = opt_.pad_to_multiple_of;
  if (!opt_.interleaved.empty()) config["interleaved"] = opt_.interleaved;  // trained a step each in turn
  ddpsim::write_outputs(opt_.out, {{"steps.csv", ddpsim::trace_csv({run}, metadata())},
                                   {"summary.json", ddpsim::summary_json(config, {run}, summaries)}});
  log_ << "wrote " << (std::filesystem::path(opt_.out) / "steps.csv").string() << " and summary.json\n";
}

namespace {

// The generator dropout draws from: the device's (on CUDA, not the CPU's).
at::Generator dropout_generator([[maybe_unused]] const torch::Device& device) {
#ifdef DDPTRAIN_CUDA
  if (device.is_cuda()) return at::cuda::detail::getDefaultCUDAGenerator(device.index());
#endif
  return at::detail::getDefaultCPUGenerator();
}

}  // namespace

torch::Tensor rng_state(const torch::Device& device) {
  auto gen = dropout_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const torch::Device& device, const torch::Tensor& state) {
  auto gen = dropout_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

namespace {

std::string caps_text(const std::vector<std::int64_t>& caps) {
  if (caps.empty()) return "none";
  std::string text;
  for (auto c : caps) {
    if (!text.empty()) text += ',';
    text += std::to_string(c);
  }
  return text;
}

}  // namespace

void Trainer::save_checkpoint(const std::string& path) {
  // Every rank's dropout stream, so that a resumed run draws what the straight run drew.
  torch::Tensor rng = rng_state(device_).unsqueeze(0);
  if (real_ranks()) rng = comm_->allgather(rng[0].to(device_)).cpu();
  if (rank_ != 0) return;
  torch::serialize::OutputArchive archive, model, optimizer;
  model_->save(model);
  optimizer_->save(optimizer);
  archive.write("model", model);
  archive.write("optimizer", optimizer);
  archive.write("step", torch::tensor({static_cast<std::int64_t>(step_)}));
  archive.write("ranks", torch::tensor({static_cast<std::int64_t>(G_)}));
  archive.write("rng", rng);
  archive.write("policy", c10::IValue(policy_label()));
  archive.write("data", c10::IValue(data_identity()));
  archive.write("training", c10::IValue(training_identity()));
  archive.write("global_batch", torch::tensor({static_cast<std::int64_t>(opt_.global_batch)}));
  archive.write("seed", torch::tensor({static_cast<std::int64_t>(opt_.seed)}));
  archive.write("b_max", torch::tensor(std::vector<std::int64_t>(opt_.b_max.begin(), opt_.b_max.end()), torch::kInt64));
  // The archive travels as bytes beside their hash: LibTorch's zip reader does not verify CRCs,
  // so a flipped byte inside a tensor would otherwise resume silently.
  std::string bytes;
  archive.save_to([&](const void* data, std::size_t size) {
    bytes.append(static_cast<const char*>(data), size);
    return size;
  });
  torch::serialize::OutputArchive sealed;
  sealed.write("payload", torch::from_blob(bytes.data(), {static_cast<std::int64_t>(bytes.size())}, torch::kUInt8));
  sealed.write("fnv1a64", c10::IValue(ddpsim::fnv1a64_hex(bytes)));
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  const std::string temp = path + ".tmp";
  const int slot = ddpsim::remember_temporary(temp);
  sealed.save_to(temp);
  std::filesystem::rename(temp, path);
  ddpsim::forget_temporary(slot);
  log_ << "checkpoint: step " << step_ << " → " << path << "\n";
}

std::string Trainer::training_identity() const {
  const auto number = [](double v) { return nlohmann::json(v).dump(); };  // shortest exact text
  const std::string dropout = opt_.dropout < 0 ? "the model's" : number(opt_.dropout);
  return "--lr " + number(opt_.lr) + ", --weight-decay " + number(opt_.weight_decay) + ", --warmup " +
         number(opt_.warmup) + ", --clip-norm " + number(opt_.clip_norm) + ", --dropout " + dropout + ", --precision " +
         precision_name(opt_.precision) + ", --micro-batches " + std::to_string(opt_.micro_batches) +
         // Said only where it pads, so that checkpoints from before the option still resume.
         (opt_.pad_to_multiple_of > 1 ? ", --pad-to-multiple-of " + std::to_string(opt_.pad_to_multiple_of) : "");
}

void Trainer::load_checkpoint(const std::string& path) {
  if (!std::filesystem::exists(path)) throw ddpsim::InputError(path + ": no such checkpoint");
  if (!std::filesystem::is_regular_file(path))
    throw ddpsim::InputError(path + ": not a regular file (a folder, a device or a pipe); expected a checkpoint");
  torch::serialize::InputArchive sealed, archive, model, optimizer;
  torch::Tensor payload;
  c10::IValue hash;
  try {
    sealed.load_from(path);
    sealed.read("payload", payload);
    sealed.read("fnv1a64", hash);
  } catch (const c10::Error& e) {
    throw ddpsim::InputError(path + ": not a ddptrain checkpoint (" + e.what_without_backtrace() + ")");
  }
  if (payload.scalar_type() != torch::kUInt8 || payload.dim() != 1 || !hash.isString())
    throw ddpsim::InputError(path + ": not a ddptrain checkpoint (no payload and checksum)");
  const std::string_view bytes(static_cast<const char*>(payload.data_ptr()), static_cast<std::size_t>(payload.numel()));
  if (ddpsim::fnv1a64_hex(bytes) != hash.toStringRef())
    throw ddpsim::InputError(path +
                             ": checksum mismatch, the checkpoint is corrupted (its FNV-1a 64 differs from the "
                             "one saved with it)");
  archive.load_from(bytes.data(), bytes.size());
  auto scalar = [&](const char* key) {
    torch::Tensor t;
    archive.read(key, t);
    return t.item<std::int64_t>();
  };
  c10::IValue policy;
  archive.read("policy", policy);
  const auto ranks = scalar("ranks"), batch = scalar("global_batch"), seed = scalar("seed");
  if (ranks != G_)
    throw ddpsim::InputError(path + ": saved with " + std::to_string(ranks) + " ranks, this run has " +
                             std::to_string(G_) + " (world size mismatch)");
  if (policy.toStringRef() != policy_label() || batch != opt_.global_batch ||
      seed != static_cast<std::int64_t>(opt_.seed))
    throw ddpsim::InputError(path + ": saved with policy " + policy.toStringRef() + ", B=" + std::to_string(batch) +
                             ", seed " + std::to_string(seed) + "; resume with the same ones");
  // Another dataset, size or truncation would resume a different sample stream under the same
  // step count. (Checkpoints of earlier versions do not say: they are taken as they are.)
  if (c10::IValue data; archive.try_read("data", data) && data.isString() && data.toStringRef() != data_identity())
    throw ddpsim::InputError(path + ": saved with data " + data.toStringRef() + ", this run has " + data_identity() +
                             "; resume with the same --data or --synthetic-lengths, --synthetic-samples and "
                             "--max-length");
  if (c10::IValue training;
      archive.try_read("training", training) && training.isString() && training.toStringRef() != training_identity())
    throw ddpsim::InputError(path + ": saved with " + training.toStringRef() + ", this run has " + training_identity() +
                             "; resume with the same options");
  // The caps steer the policy: a resume under other caps (a probe can find another) would replay
  // a different sample stream.
  torch::Tensor saved_caps;
  archive.read("b_max", saved_caps);
  const std::vector<std::int64_t> caps(saved_caps.data_ptr<std::int64_t>(),
                                       saved_caps.data_ptr<std::int64_t>() + saved_caps.numel());
  if (caps != std::vector<std::int64_t>(opt_.b_max.begin(), opt_.b_max.end()))
    throw ddpsim::InputError(path + ": saved with b_max " + caps_text(caps) + ", this run has " +
                             caps_text({opt_.b_max.begin(), opt_.b_max.end()}) +
                             "; resume with the same --bmax (for a probed cap, give the saved one as --bmax N)");
  archive.read("model", model);
  archive.read("optimizer", optimizer);
  try {
    model_->load(model);
  } catch (const c10::Error& e) {  // another --model's layers
    throw ddpsim::InputError(path + ": its parameters do not fit --model " + opt_.model_size +
                             "; resume with the model it was saved with (" + e.what_without_backtrace() + ")");
  }
  model_->to(device_);  // loading may leave parameters where the archive had them
  optimizer_->load(optimizer);
  torch::Tensor rng;
  archive.read("rng", rng);
  try {
    set_rng_state(device_, rng[rank_]);
  } catch (const c10::Error& e) {  // a CPU generator's state offered to CUDA's, or the reverse
    throw ddpsim::InputError(path +
                             ": its dropout generator state does not fit this device's generator (saved "
                             "on another kind of device?): " +
                             e.what_without_backtrace());
  }
  const int target = static_cast<int>(scalar("step"));
  if (target >= opt_.steps)
    throw ddpsim::UsageError(path + ": saved at step " + std::to_string(target) + ", and --steps " +
                             std::to_string(opt_.steps) + " leaves nothing to train (--steps counts from step 0)");
  ddpsim::StepPlan plan;
  for (int s = 0; s < target; ++s) plan_next(plan);  // same seed, same decisions: the same buffers
  decision_us_.clear();
  step_ = target;
  log_ << "resumed from " << path << " at step " << step_ << "\n";
}

// The dtype DDP's buckets hold, its parameters' (fp32 under autocast), as ddpsim names it.
std::string Trainer::grad_dtype_name() const {
  const auto type = model_->parameters().front().scalar_type();
  return type == torch::kFloat ? "fp32" : type == torch::kBFloat16 ? "bf16" : type == torch::kHalf ? "fp16" : "other";
}

// The trace's metadata lines: what a reader needs to know how the steps were run.
std::vector<std::pair<std::string, std::string>> Trainer::metadata() const {
  std::string device = device_.is_cuda() ? "cuda" : "cpu";
#ifdef DDPTRAIN_CUDA
  if (device_.is_cuda()) device = at::cuda::getDeviceProperties(device_.index())->name;
#endif
  std::vector<std::pair<std::string, std::string>> m = {{"tool", "ddptrain"},
                                                        {"device", device},
                                                        {"world_size", std::to_string(comm_ ? comm_->size() : 1)},
                                                        {"emulated_ranks", std::to_string(opt_.emulate_ranks)},
                                                        {"backend", comm_ ? comm_->backend() : "none"},
                                                        {"libtorch", TORCH_VERSION},
                                                        {"attention", "padded"},
                                                        {"attention_kernel", attention_kind()},
                                                        {"precision", precision_name(opt_.precision)},
                                                        {"grad_dtype", grad_dtype_name()},
                                                        {"optimizer_impl", optimizer_impl_name(optimizer_->impl())},
                                                        {"data_parallel", zero1_ ? "zero1" : "ddp"},
                                                        {"seed", std::to_string(opt_.seed)},
                                                        {"policy", opt_.profiling ? "profile" : policy_label()},
                                                        {"global_batch", std::to_string(opt_.global_batch)},
                                                        {"model", opt_.model_size},
                                                        {"data", data_.description}};
#ifdef DDPTRAIN_CUDA
  if (device_.is_cuda()) {  // versions as CUDA encodes them: 1000·major + 10·minor
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    m.emplace_back("cuda_runtime", std::to_string(runtime));
    m.emplace_back("cuda_driver", std::to_string(driver));
  }
#endif
  if (!device_.is_cuda()) {
    m.emplace_back("threads", std::to_string(at::get_num_threads()));
    m.emplace_back("cpus", cpu_placement());
    m.emplace_back("cpu_subnormals", subnormals_flushed() ? "flushed" : "kept");
    m.emplace_back("cpu", cpu_model());
    m.emplace_back("blas", blas_kernels());
    m.emplace_back("malloc", malloc_setting());
  }
  if (opt_.emulate_ranks > 0)
    m.emplace_back("allreduce", "modelled: ring alpha-beta over " + std::to_string(opt_.emulate_link_GBps) + " GB/s, " +
                                    std::to_string(opt_.emulate_latency_us) +
                                    " us per step, buckets back to back "
                                    "after the slowest rank (no overlap); NOT a real " +
                                    std::to_string(G_) + "-GPU run");
  else
    m.emplace_back("allreduce", real_ranks() ? "measured: bucketed, overlapped with backward" : "none (one rank)");
  if (!opt_.interleaved.empty()) {
    std::string turns;
    for (const auto& p : opt_.interleaved) turns += (turns.empty() ? "" : ",") + p;
    m.emplace_back("interleaved", "one step of each policy in turn: " + turns);
  }
  // Only where it pads: a run without it writes the trace it wrote before the option existed.
  if (opt_.pad_to_multiple_of > 1 && !opt_.profiling)
    m.emplace_back("pad_to_multiple_of", std::to_string(opt_.pad_to_multiple_of));
  if (opt_.profiled_alongside)
    m.emplace_back("profile_alongside", "one step of a profile grid after each turn (OUT/profile/steps.csv)");
  return m;
}

}  // namespace ddptrain
