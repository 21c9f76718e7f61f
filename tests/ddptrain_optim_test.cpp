// ddptrain's AdamW: every implementation makes torch::optim::AdamW's update, and checkpoints move
// between them.
#include <cmath>

#include "common/error.hpp"
#include "test_data.hpp"
#include "train/adamw.hpp"
#include "train/trainer.hpp"

// Last: LibTorch brings glog, whose CHECK macros doctest must override.
#include <doctest/doctest.h>

using namespace ddptrain;
using ddpsim::test::TempDir;

namespace {

// A model without dropout, so that two copies stepped alike stay alike.
DistilBertForSequenceClassification small_model() {
  auto config = DistilBertConfig::named("small");
  config.dropout = config.attention_dropout = config.classifier_dropout = 0;
  return DistilBertForSequenceClassification(config, 7);
}

// The largest difference between the two models' parameters relative to the parameter's
// largest magnitude, over all parameters; and whether they are bitwise equal.
std::pair<double, bool> parameter_gap(DistilBertForSequenceClassification& a, DistilBertForSequenceClassification& b) {
  double worst = 0;
  bool equal = true;
  const auto pb = b->named_parameters();
  for (const auto& p : a->named_parameters()) {
    const auto& q = pb[p.key()];
    equal = equal && torch::equal(p.value(), q);
    const double scale = std::max(p.value().abs().max().item<double>(), 1e-30);
    worst = std::max(worst, (p.value() - q).abs().max().item<double>() / scale);
  }
  return {worst, equal};
}

}  // namespace

TEST_CASE("the foreach update equals torch::optim::AdamW's on DistilBERT-small for 50 steps, with and without "
          "weight decay") {
  for (const double weight_decay : {0.0, 0.01}) {
    CAPTURE(weight_decay);
    torch::manual_seed(3);
    auto reference = small_model(), multi = small_model();
    torch::optim::AdamW torch_adamw(reference->parameters(), torch::optim::AdamWOptions(1e-3).weight_decay(weight_decay));
    AdamW foreach_adamw(multi->parameters(), 1e-3, weight_decay, OptimizerImpl::foreach);
    const auto classifier_bias = [](DistilBertForSequenceClassification& m) {
      return m->named_parameters()["classifier.bias"];
    };
    for (int step = 0; step < 50; ++step) {
      const double lr = 1e-3 * (step + 1) / 50;  // a schedule, as the trainer sets one before each step
      for (auto& group : torch_adamw.param_groups())
        static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
      foreach_adamw.set_lr(lr);
      const auto mask = torch::ones({4, 16}, torch::kBool);
      const auto ids = torch::randint(4, 30522, {4, 16}, torch::kInt64);
      const auto labels = torch::randint(0, 2, {4}, torch::kInt64);
      for (auto* model : {&reference, &multi}) {
        torch::nn::functional::cross_entropy((*model)(ids, mask), labels).backward();
        // A parameter without a gradient now and then: skipped, its step count lagging the others'.
        if (step % 7 == 3) classifier_bias(*model).mutable_grad().reset();
      }
      torch_adamw.step();
      foreach_adamw.step();
      torch_adamw.zero_grad();
      foreach_adamw.zero_grad();
    }
    const auto [gap, equal] = parameter_gap(reference, multi);
    MESSAGE("weight decay ", weight_decay, ": largest relative gap ", gap, std::string(equal ? " (bitwise equal)" : ""));
    CHECK(gap <= 1e-6);
  }
}

TEST_CASE("a checkpoint written under one AdamW implementation resumes under the other") {
  TempDir dir;
  TrainOptions o;
  o.synthetic_lengths = "sst2";
  o.synthetic_samples = 400;
  o.model_size = "tiny";
  o.max_length = 32;
  o.global_batch = 8;
  o.steps = 12;
  o.lr = 2e-3;
  o.emulate_ranks = 2;
  o.log_every = 1000;
  std::ostream quiet(nullptr);
  for (const auto& [first, second] : {std::pair{"per-param", "foreach"}, std::pair{"foreach", "per-param"}}) {
    CAPTURE(first);
    TrainOptions straight_options = o;
    straight_options.optimizer_impl = second;
    Trainer straight(straight_options, nullptr, quiet);
    for (int s = 0; s < 12; ++s) straight.step();

    TrainOptions first_options = o;
    first_options.optimizer_impl = first;
    Trainer first_half(first_options, nullptr, quiet);
    for (int s = 0; s < 6; ++s) first_half.step();
    first_half.save_checkpoint(dir / "ckpt.pt");
    TrainOptions resumed_options = straight_options;
    resumed_options.resume = dir / "ckpt.pt";
    Trainer resumed(resumed_options, nullptr, quiet);
    CHECK(optimizer_impl_name(resumed.optimizer().impl()) == second);
    for (int s = 6; s < 12; ++s) resumed.step();
    // The moments and step counts came across: without them the resumed steps would move the
    // parameters by about lr, far beyond this bound. On a GPU, backward's atomics make even two
    // uninterrupted runs differ (the second GPU campaign measured gaps above 1e-6), so the bound
    // there is 1e-4, still some 20 times below lr. The attention's key bias is left out there:
    // softmax ignores a shift shared by a query's scores, so its gradient is zero but for
    // rounding, and Adam's normalised step follows that rounding (the third campaign: 0.21).
    const auto a = straight.model()->named_parameters(), b = resumed.model()->named_parameters();
    for (const auto& p : a) {
      if (p.value().is_cuda() && p.key().find("attention.k_lin.bias") != std::string::npos) continue;
      const double scale = std::max(p.value().abs().max().item<double>(), 1e-30);
      const double bound = p.value().is_cuda() ? 1e-4 : 1e-6;
      CHECK_MESSAGE((p.value() - b[p.key()]).abs().max().item<double>() / scale <= bound, p.key());
    }
  }
}

TEST_CASE("--optimizer-impl: auto takes the fastest available, fused is refused where there is none") {
  CHECK(resolve_optimizer_impl("per-param", torch::kCPU) == OptimizerImpl::per_param);
  CHECK(resolve_optimizer_impl("foreach", torch::kCPU) == OptimizerImpl::foreach);
  CHECK(resolve_optimizer_impl("auto", torch::kCPU) == OptimizerImpl::foreach);  // the kernel is CUDA's
  CHECK_FALSE(fused_adamw_available(torch::kCPU));
  CHECK_THROWS_WITH_AS(resolve_optimizer_impl("fused", torch::kCPU),
                       doctest::Contains("--optimizer-impl fused: no fused AdamW kernel here"), ddpsim::UsageError);
  CHECK_THROWS_WITH_AS(resolve_optimizer_impl("multi", torch::kCPU),
                       doctest::Contains("--optimizer-impl is auto, per-param, foreach or fused, got \"multi\""),
                       ddpsim::UsageError);
}

// On a GPU, where backward's atomics make two models' gradients differ, the implementations are
// compared on one shared stream of gradients instead; fused too where this build has it.
TEST_CASE("on a GPU and the same gradients, every available implementation makes per-param's update" *
          doctest::skip(!torch::cuda::is_available())) {
  const torch::Device device = torch::kCUDA;
  std::vector<OptimizerImpl> impls = {OptimizerImpl::per_param, OptimizerImpl::foreach};
  if (fused_adamw_available(device)) impls.push_back(OptimizerImpl::fused);
  torch::manual_seed(5);
  std::vector<torch::Tensor> start;
  for (const auto& p : small_model()->parameters()) start.push_back(p.detach().to(device));
  std::vector<std::vector<torch::Tensor>> params(impls.size());
  std::vector<std::unique_ptr<AdamW>> optimizers;
  for (std::size_t k = 0; k < impls.size(); ++k) {
    for (const auto& p : start) params[k].push_back(p.clone().requires_grad_(true));
    optimizers.push_back(std::make_unique<AdamW>(params[k], 1e-3, 0.01, impls[k]));
  }
  for (int step = 0; step < 50; ++step) {
    for (std::size_t i = 0; i < start.size(); ++i) {
      const auto grad = torch::randn_like(start[i]) * 1e-2;
      for (std::size_t k = 0; k < impls.size(); ++k) params[k][i].mutable_grad() = grad.clone();
    }
    for (std::size_t k = 0; k < impls.size(); ++k) {
      optimizers[k]->set_lr(1e-3 * (step + 1) / 50);
      optimizers[k]->step();
      optimizers[k]->zero_grad();
    }
  }
  for (std::size_t k = 1; k < impls.size(); ++k) {
    double gap = 0;
    for (std::size_t i = 0; i < start.size(); ++i) {
      const double scale = std::max(params[0][i].abs().max().item<double>(), 1e-30);
      gap = std::max(gap, (params[k][i] - params[0][i]).abs().max().item<double>() / scale);
    }
    MESSAGE(optimizer_impl_name(impls[k]), " against per-param on CUDA: largest relative gap ", gap);
    // The fused kernel orders its float32 arithmetic its own way: on the H100 its gap after 50
    // steps was 1.5e-6 (foreach's 1.6e-7), rounding, where a wrong term would show as ~lr.
    CHECK(gap <= (impls[k] == OptimizerImpl::fused ? 1e-5 : 1e-6));
  }
}
