// Data parallelism on CPU with Gloo, ranks as threads of this process (an in-memory store):
// the DDP gradient equals the single-process gradient of the whole global batch, bucketed
// overlapped allreduce equals one flat allreduce, and --emulate-ranks makes the same update.
#include <functional>
#include <thread>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "train/trainer.hpp"

// Last: LibTorch brings glog, whose CHECK macros doctest must override.
#include <doctest/doctest.h>

using namespace ddptrain;

namespace {

// A LibTorch taken from a PyTorch wheel (the GPU build) has no Gloo: these tests skip there.
doctest::skip needs_gloo() {
  return doctest::skip(!gloo_available());
}

// Runs body(rank, comm) on G threads with a Gloo group over one in-memory store; the body may
// take the communicator over.
void on_ranks(int G, const std::function<void(int, std::unique_ptr<Communicator>&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> threads;
  std::vector<std::string> errors(static_cast<std::size_t>(G));
  for (int r = 0; r < G; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = connect_gloo(store, r, G);
        body(r, comm);
      } catch (const std::exception& e) {
        errors[static_cast<std::size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t r = 0; r < errors.size(); ++r) CHECK_MESSAGE(errors[r].empty(), "rank ", r, ": ", errors[r]);
}

DistilBertConfig no_dropout() {
  auto c = DistilBertConfig::tiny();
  c.dropout = c.attention_dropout = c.classifier_dropout = 0;
  return c;
}

const TextData& data() {
  static const TextData d = synthetic_data("sst2", 600, 30522, 64, 5);
  return d;
}

ddpsim::StepPlan plan_step(const std::string& policy, int G, int B, int skip) {
  ddpsim::StepShape shape;
  shape.G = G;
  shape.B = B;
  shape.max_length = 64;
  shape.seed = 3;
  auto scheduler = ddpsim::make_scheduler(ddpsim::parse_policy_spec(policy), shape);
  ddpsim::DistributedSampler sampler(data().lengths, G, 3);
  ddpsim::RankBuffers buffers(sampler);
  ddpsim::StepPlan plan;
  for (int s = 0; s <= skip; ++s) {
    buffers.fill_all(scheduler->buffer_size());
    scheduler->plan(buffers, plan);
  }
  return plan;
}

double relative_difference(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, (a[i] - b[i]).abs().max().item<double>());
    scale = std::max(scale, b[i].abs().max().item<double>());
  }
  return diff / scale;
}

// Synthetic SST-2-length samples for the tiny model, balanced by minmax.
TrainOptions tiny_options(std::int64_t samples, int global_batch, int steps) {
  TrainOptions o;
  o.synthetic_lengths = "sst2";
  o.synthetic_samples = samples;
  o.max_length = 64;
  o.model_size = "tiny";
  o.policy = "minmax:buffer=8";
  o.global_batch = global_batch;
  o.steps = steps;
  return o;
}

std::vector<torch::Tensor> gradients(DistilBertForSequenceClassification& m) {
  std::vector<torch::Tensor> g;
  for (const auto& p : m->parameters()) g.push_back(p.grad().clone());
  return g;
}

// The gradient one process computes on all of the plan's samples, from the model of `seed`.
std::vector<torch::Tensor> single_process_gradient(const ddpsim::StepPlan& plan, std::uint64_t seed) {
  std::vector<ddpsim::Sample> all;
  for (const auto& b : plan.batches) all.insert(all.end(), b.begin(), b.end());
  DistilBertForSequenceClassification reference(no_dropout(), seed);
  const Batch whole = collate(data(), all, torch::kCPU);
  torch::nn::functional::cross_entropy(reference(whole.ids, whole.mask), whole.labels).backward();
  return gradients(reference);
}

}  // namespace

TEST_CASE("the DDP gradient equals the single-process gradient of the global batch" * needs_gloo()) {
  for (const char* policy : {"static", "minmax:buffer=8"}) {
    for (int G : {2, 3}) {
      CAPTURE(std::string(policy));
      CAPTURE(G);
      const auto plan = plan_step(policy, G, 12, /*skip=*/2);
      if (std::string(policy) != "static") CHECK(plan.batches[0].size() != plan.batches[1].size());  // unequal b_g
      const auto expected = single_process_gradient(plan, 7);

      on_ranks(G, [&](int r, std::unique_ptr<Communicator>& comm) {
        DistilBertForSequenceClassification model(no_dropout(), 7);
        GradBuckets buckets(model->parameters(), *comm, /*cap_bytes=*/64e3, /*first_cap_bytes=*/16e3);
        CHECK(buckets.bucket_count() >= 3);  // the word embeddings alone fill one
        buckets.prepare();
        const Batch mine = collate(data(), plan.batches[static_cast<std::size_t>(r)], torch::kCPU);
        (torch::nn::functional::cross_entropy(model(mine.ids, mine.mask), mine.labels) *
         plan.loss_weights[static_cast<std::size_t>(r)])
            .backward();
        buckets.finish();
        CHECK(relative_difference(gradients(model), expected) <= 1e-5);
      });
    }
  }
}

TEST_CASE("with gradient accumulation too: unequal micro-batch counts and sizes give the same gradient" *
          needs_gloo()) {
  // minmax gives the ranks unequal batches; the micro-batch sizes below are unequal within and
  // across ranks, and rank 1 runs more of them. Real ranks (buckets reduced only after the last
  // micro-batch) and emulated ones must both give the single-process gradient of all samples.
  auto plan = plan_step("minmax:buffer=8", 3, 12, /*skip=*/2);
  plan.micro_sizes.clear();
  for (std::size_t g = 0; g < plan.batches.size(); ++g) {
    const int b = static_cast<int>(plan.batches[g].size());
    REQUIRE(b >= 3);
    const std::vector<int> many = b > 3 ? std::vector<int>{1, b - 3, 1, 1} : std::vector<int>{1, 1, 1};
    plan.micro_sizes.push_back(g == 1 ? many : std::vector<int>{b - 1, 1});
  }
  // The trainer's synthetic data and initial model are those of its seed, the test's 5.
  const auto expected = single_process_gradient(plan, 5);

  TrainOptions o = tiny_options(600, 12, 1);
  o.seed = 5;
  o.dropout = 0;
  o.bucket_mb = 0.06;  // several buckets, so that some would launch early without no_sync
  o.first_bucket_mb = 0.015;
  std::ostream quiet(nullptr);
  on_ranks(3, [&](int, std::unique_ptr<Communicator>& comm) {
    Trainer trainer(o, std::move(comm), quiet);
    trainer.compute_gradients(plan);
    CHECK(relative_difference(gradients(trainer.model()), expected) <= 1e-5);
  });
  TrainOptions emulated = o;
  emulated.emulate_ranks = 3;
  Trainer single(emulated, nullptr, quiet);
  single.compute_gradients(plan);
  CHECK(relative_difference(gradients(single.model()), expected) <= 1e-5);
}

TEST_CASE("bucketed, overlapped allreduce gives the gradients of one flat allreduce" * needs_gloo()) {
  const auto plan = plan_step("minmax:buffer=8", 3, 12, 0);
  on_ranks(3, [&](int r, std::unique_ptr<Communicator>& comm) {
    const Batch mine = collate(data(), plan.batches[static_cast<std::size_t>(r)], torch::kCPU);
    auto loss_of = [&](DistilBertForSequenceClassification& m) {
      return torch::nn::functional::cross_entropy(m(mine.ids, mine.mask), mine.labels) *
             plan.loss_weights[static_cast<std::size_t>(r)];
    };
    DistilBertForSequenceClassification flat_model(no_dropout(), 9), bucket_model(no_dropout(), 9);
    loss_of(flat_model).backward();
    std::vector<torch::Tensor> grads = gradients(flat_model);
    std::vector<torch::Tensor> views;
    for (auto& g : grads) views.push_back(g.reshape({-1}));
    auto flat = torch::cat(views);
    comm->allreduce_sum(flat)->wait();
    flat.div_(3);
    std::vector<torch::Tensor> expected;
    std::int64_t offset = 0;
    for (auto& g : grads) expected.push_back(flat.narrow(0, offset, g.numel()).view(g.sizes())), offset += g.numel();

    GradBuckets buckets(bucket_model->parameters(), *comm, 32e3, 4e3);
    buckets.prepare();
    loss_of(bucket_model).backward();
    buckets.finish();
    CHECK(relative_difference(gradients(bucket_model), expected) <= 1e-6);
  });
}

TEST_CASE("--emulate-ranks makes the same updates as real ranks" * needs_gloo()) {
  TrainOptions o = tiny_options(600, 12, 3);
  o.dropout = 0;
  o.lr = 1e-3;
  std::ostream quiet(nullptr);
  TrainOptions emulated = o;
  emulated.emulate_ranks = 3;
  Trainer single(emulated, nullptr, quiet);
  for (int s = 0; s < 3; ++s) single.step();
  CHECK(single.rows().size() == 9);
  on_ranks(3, [&](int r, std::unique_ptr<Communicator>& comm) {
    Trainer trainer(o, std::move(comm), quiet);
    for (int s = 0; s < 3; ++s) trainer.step();
    if (r == 0) {
      std::vector<torch::Tensor> real, emu;
      for (const auto& p : trainer.model()->parameters()) real.push_back(p.detach());
      for (const auto& p : single.model()->parameters()) emu.push_back(p.detach());
      CHECK(relative_difference(real, emu) <= 1e-5);
      for (std::size_t i = 0; i < trainer.rows().size(); ++i)
        CHECK(trainer.rows()[i].batch_size == single.rows()[i].batch_size);
    }
  });
}

TEST_CASE("ranks decide alone and a per-step check proves they agree" * needs_gloo()) {
  TrainOptions o = tiny_options(300, 8, 2);
  std::ostream quiet(nullptr);
  on_ranks(2, [&](int r, std::unique_ptr<Communicator>& comm) {
    TrainOptions mine = o;
    mine.seed = static_cast<std::uint64_t>(r);  // a misconfigured launch: rank 1 samples another stream
    Trainer trainer(mine, std::move(comm), quiet);
    CHECK_THROWS_WITH(trainer.step(), doctest::Contains("ranks reached different batch allocations"));
  });
}

TEST_CASE("--data-parallel zero1 makes DDP's updates, and every rank ends with the same parameters" * needs_gloo()) {
  TrainOptions o = tiny_options(600, 12, 3);
  o.dropout = 0;
  o.lr = 1e-3;
  o.weight_decay = 0.1;
  std::ostream quiet(nullptr);
  const auto train = [&](const std::string& data_parallel) {
    std::vector<std::vector<torch::Tensor>> params(3);             // each rank's, after three steps
    on_ranks(3, [&](int r, std::unique_ptr<Communicator>& comm) {  // 3 ranks: the last slice is padded
      TrainOptions mine = o;
      mine.data_parallel = data_parallel;
      Trainer trainer(mine, std::move(comm), quiet);
      for (int s = 0; s < 3; ++s) trainer.step();
      for (const auto& p : trainer.model()->parameters()) params[static_cast<std::size_t>(r)].push_back(p.detach());
    });
    return params;
  };
  const auto ddp = train("ddp"), zero1 = train("zero1");
  for (std::size_t r = 0; r < 3; ++r) {
    CAPTURE(r);
    CHECK(relative_difference(zero1[r], ddp[0]) <= 1e-6);
    CHECK(relative_difference(zero1[r], zero1[0]) == 0);
  }
  // The update moved the parameters (a zero1 step that dropped its slices would leave them).
  DistilBertForSequenceClassification initial(no_dropout(), o.seed);
  std::vector<torch::Tensor> start;
  for (const auto& p : initial->parameters()) start.push_back(p.detach());
  CHECK(relative_difference(zero1[0], start) > 1e-4);
}
