// Trainer's construction, by concern: the data and the model, the policy and its sampler, and
// the ranks' communication and optimizer.
#include <algorithm>

#include "common/error.hpp"
#include "model/perf_model.hpp"
#include "model/safetensors.hpp"
#include "train/trainer.hpp"

namespace ddptrain {

namespace {

torch::Device pick_device(const std::string& wanted, int local_rank) {
  if (wanted == "cpu") return torch::kCPU;
  const bool cuda = torch::cuda::is_available();
  if (wanted == "cuda" && !cuda) throw ddpsim::InputError("--device cuda: no CUDA device is visible to this LibTorch");
  if (wanted != "auto" && wanted != "cuda")
    throw ddpsim::UsageError("--device is auto, cpu or cuda, got \"" + wanted + "\"");
  if (!cuda) return torch::kCPU;
  return torch::Device(torch::kCUDA,
                       static_cast<c10::DeviceIndex>(local_rank % static_cast<int>(torch::cuda::device_count())));
}

// The α–β ring allreduce time of every bucket, back to back (no overlap): what --emulate-ranks
// charges for communication it cannot run.
double modelled_allreduce_ms(const std::vector<double>& bucket_bytes, int G, double GBps, double latency_us) {
  if (G < 2) return 0.0;
  double ms = 0;
  for (double bytes : bucket_bytes)
    ms += (2.0 * (G - 1) * latency_us * 1e-6 + 2.0 * (G - 1) / G * bytes / (GBps * 1e9)) * 1e3;
  return ms;
}

}  // namespace

Trainer::Trainer(TrainOptions options, std::shared_ptr<Communicator> comm, std::ostream& log)
    : opt_(std::move(options)), comm_(std::move(comm)), log_(log), device_(torch::kCPU) {
  rank_ = comm_ ? comm_->rank() : 0;
  G_ = comm_ ? comm_->size() : std::max(1, opt_.emulate_ranks);
  if (comm_ && opt_.emulate_ranks > 0)
    throw ddpsim::UsageError("--emulate-ranks runs in one process: start one rank only");
  device_ = pick_device(opt_.device, opt_.local_rank);
  if (opt_.probe_bmax && !device_.is_cuda())
    throw ddpsim::UsageError(
        "--bmax probe needs a CUDA device (it finds the cap by running out of GPU memory); give --bmax N or a "
        "ddpsim model JSON whose memory model gives it");
  if (opt_.probe_reserve < 0 || opt_.probe_reserve >= 1)
    throw ddpsim::UsageError("--probe-reserve is a fraction of device memory in [0, 1)");

  build_model();
  build_policy();
  build_distribution();
  torch::manual_seed(opt_.seed + 1000 + static_cast<std::uint64_t>(rank_));  // each rank its own dropout stream
  if (!opt_.resume.empty()) load_checkpoint(opt_.resume);
  rng_ = rng_state(device_);
}

// The data (a GLUE TSV or synthetic lengths) and the model, its weights loaded where given.
void Trainer::build_model() {
  auto config = DistilBertConfig::named(opt_.model_size);
  if (!opt_.synthetic_lengths.empty()) {
    data_ = synthetic_data(opt_.synthetic_lengths, opt_.synthetic_samples, 30522, opt_.max_length, opt_.seed);
    dev_ = synthetic_data(opt_.synthetic_lengths, 256, 30522, opt_.max_length, opt_.seed + 1);
  } else {
    if (opt_.data.empty() || opt_.vocab.empty())
      throw ddpsim::UsageError("give --data TSV and --vocab VOCAB, or --synthetic-lengths HIST");
    data_ = load_glue(opt_.data, opt_.vocab, opt_.max_length, config.labels);
    if (!opt_.dev.empty()) dev_ = load_glue(opt_.dev, opt_.vocab, opt_.max_length, config.labels);
  }
  if (opt_.dropout >= 0) config.dropout = config.attention_dropout = config.classifier_dropout = opt_.dropout;
  if (opt_.pad_to_multiple_of < 1 || opt_.pad_to_multiple_of > opt_.max_length)
    throw ddpsim::UsageError("--pad-to-multiple-of must be from 1 to --max-length (" + std::to_string(opt_.max_length) +
                             "), got " + std::to_string(opt_.pad_to_multiple_of));
  if (opt_.max_length > config.max_positions)
    throw ddpsim::InputError("--max-length " + std::to_string(opt_.max_length) + " exceeds the model's " +
                             std::to_string(config.max_positions) + " positions");
  model_ = DistilBertForSequenceClassification(config, opt_.seed);
  if (!opt_.weights.empty()) {
    const auto report = load_parameters(*model_, opt_.weights);
    log_ << log_prefix() << "weights: " << report.loaded << " tensors from " << opt_.weights << ", "
         << report.absent.size() << " model tensors not in the file (random init)";
    if (report.unused) log_ << ", " << report.unused << " file tensors unused";
    log_ << "\n";
  } else {
    log_ << log_prefix() << "weights: none given, random initialisation (N(0, 0.02))\n";
  }
  model_->to(device_);
  if (opt_.probe_bmax) opt_.b_max = probe_bmax();
}

// The policy's shape and the policy, checked against the data, with the sampler it draws from.
void Trainer::build_policy() {
  lengths_ = data_.lengths;
  shape_.G = G_;
  shape_.B = opt_.global_batch;
  shape_.max_length = opt_.max_length;
  shape_.b_max = opt_.b_max;
  shape_.micro_batches = opt_.micro_batches;
  shape_.seed = opt_.seed;
  // The library's messages name the policy or file; the user typed an option.
  const auto naming = [](const std::string& option, const auto& make) {
    try {
      return make();
    } catch (const ddpsim::UsageError& e) {
      throw ddpsim::UsageError(option + ": " + e.what());
    } catch (const ddpsim::InputError& e) {
      throw ddpsim::InputError(option + ": " + e.what());
    }
  };
  if (!opt_.perf_model.empty())
    shape_.time_cost = naming("--perf-model", [&] {
      return std::make_shared<ddpsim::ModelTimeCost>(
          std::make_shared<const ddpsim::PerfModel>(ddpsim::load_perf_model(opt_.perf_model)));
    });
  else if (opt_.policy.find("cost=model") != std::string::npos)
    throw ddpsim::UsageError("--policy " + opt_.policy +
                             " balances predicted time: give --perf-model (a ddpsim model JSON or a built-in name)");
  policy_ = naming("--policy " + opt_.policy,
                   [&] { return ddpsim::make_scheduler(ddpsim::parse_policy_spec(opt_.policy), policy_shape()); });
  if (lengths_.size() < static_cast<std::size_t>(G_)) {
    std::string source = opt_.synthetic_lengths.empty() ? "--data " : "--synthetic-samples";
    source += opt_.synthetic_lengths.empty() ? opt_.data : std::string();
    throw ddpsim::InputError(source + ": " + std::to_string(lengths_.size()) + " samples, fewer than the " +
                             std::to_string(G_) + " ranks sharing them");
  }
  // A step larger than the dataset would train on samples twice (the sampler's next epoch);
  // only a token budget sizes its steps without --global-batch, and a profile runs no policy.
  if (!opt_.profiling && ddpsim::parse_policy_spec(opt_.policy).name != "token_budget" &&
      lengths_.size() < static_cast<std::size_t>(opt_.global_batch)) {
    std::string source = opt_.synthetic_lengths.empty() ? "--data " : "--synthetic-samples";
    source += opt_.synthetic_lengths.empty() ? opt_.data : std::string();
    throw ddpsim::InputError(source + ": " + std::to_string(lengths_.size()) + " samples, fewer than --global-batch " +
                             std::to_string(opt_.global_batch) + ": a step would train on samples twice");
  }
  sampler_ = std::make_unique<ddpsim::DistributedSampler>(lengths_, G_, opt_.seed);
  buffers_ = std::make_unique<ddpsim::RankBuffers>(*sampler_);
}

// Every rank from rank 0's weights, DDP's buckets, the emulated allreduce, and the optimizer:
// AdamW whole, or under --data-parallel zero1 this rank's slice of it.
void Trainer::build_distribution() {
  if (real_ranks()) {
    torch::NoGradGuard no_grad;
    for (auto& p : model_->parameters()) comm_->broadcast(p, /*root=*/0);  // every rank starts from rank 0's weights
    std::vector<torch::Tensor> params = model_->parameters();
    constexpr double MiB = 1024.0 * 1024.0;
    buckets_ = std::make_unique<GradBuckets>(params, *comm_, opt_.bucket_mb * MiB, opt_.first_bucket_mb * MiB);
  }
  if (opt_.emulate_ranks > 0)
    emulated_allreduce_ms_ =
        modelled_allreduce_ms(ddp_bucket_bytes(), G_, opt_.emulate_link_GBps, opt_.emulate_latency_us);
  optimizer_ = std::make_unique<AdamW>(model_->parameters(), opt_.lr, opt_.weight_decay,
                                       resolve_optimizer_impl(opt_.optimizer_impl, device_));
  if (opt_.data_parallel == "zero1" && real_ranks())
    zero1_ =
        std::make_unique<Zero1Optimizer>(model_->parameters(), *comm_, opt_.lr, opt_.weight_decay, optimizer_->impl());
}

}  // namespace ddptrain
