// Invariants every policy must keep, and each policy's own contract.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/error.hpp"
#include "data/lengths.hpp"
#include "report/policy_run.hpp"
#include "sched/scheduler.hpp"

using namespace ddpsim;

namespace {

const std::vector<int>& sst2_dataset() {
  static const std::vector<int> lengths = histogram_source(sst2_train_histogram(), 256)->dataset(3);
  return lengths;
}

StepShape shape(int G, int B, std::uint64_t seed = 1) {
  StepShape s;
  s.G = G;
  s.B = B;
  s.seed = seed;
  return s;
}

const char* const ALL_POLICIES[] = {"static",
                                    "minmax",
                                    "minmax:cost=tokens_sq",
                                    "minmax:solver=enumerate:buffer=24",
                                    "kk",
                                    "kk:cost=tokens_sq",
                                    "sorted:mega=5",
                                    "token_budget:max_tokens=400"};

// Runs `steps` steps by hand so the test sees the buffers and the sampler.
struct Harness {
  Harness(const std::string& spec, const StepShape& s, std::span<const int> data)
      : policy(make_scheduler(parse_policy_spec(spec), s)), sampler(data, s.G, s.seed), buffers(sampler), G(s.G) {}
  std::unique_ptr<Scheduler> policy;
  DistributedSampler sampler;
  RankBuffers buffers;
  int G;
  StepPlan step() {
    buffers.fill_all(policy->buffer_size());
    StepPlan plan;
    policy->plan(buffers, plan);
    return plan;
  }
};

}  // namespace

TEST_CASE("every policy: sizes add up, bounds hold, weights average to 1, nothing lost or repeated") {
  const std::vector<int> small(sst2_dataset().begin(), sst2_dataset().begin() + 2000);  // a few epochs in 100 steps
  for (const char* spec : ALL_POLICIES) {
    CAPTURE(spec);
    StepShape s = shape(4, 48);
    s.b_max = {40, 20, 40, 40};
    Harness h(spec, s, small);
    std::set<std::pair<int, std::int64_t>> used;  // (epoch, index)
    std::map<std::int64_t, int> trained;          // sample draws that reached a rank
    for (int step = 0; step < 100; ++step) {
      const StepPlan plan = h.step();
      REQUIRE(plan.batches.size() == 4);
      int total = 0;
      double weights = 0;
      for (int g = 0; g < 4; ++g) {
        const auto& batch = plan.batches[static_cast<std::size_t>(g)];
        CHECK(batch.size() >= 1);
        CHECK(static_cast<int>(batch.size()) <= s.b_max[static_cast<std::size_t>(g)]);
        total += static_cast<int>(batch.size());
        weights += plan.loss_weights[static_cast<std::size_t>(g)];
        CHECK(plan.loss_weights[static_cast<std::size_t>(g)] ==
              doctest::Approx(4.0 * batch.size() / plan.global_batch));
        for (const Sample& x : batch) CHECK(used.emplace(x.epoch, x.index).second);
      }
      CHECK(total == plan.global_batch);
      if (std::string(spec).rfind("token_budget", 0) != 0) CHECK(total == 48);
      CHECK(weights / 4 == doctest::Approx(1.0));
    }
    // No sample lost: what was drawn is what was trained plus what still waits in a buffer
    // (sorted's mega-batch of 5 steps is fully dealt out after 100 steps).
    std::size_t drawn = 0, waiting = 0;
    for (int g = 0; g < 4; ++g) {
      drawn += static_cast<std::size_t>(h.sampler.drawn(g));
      waiting += h.buffers.buffer(g).size();
    }
    CHECK(drawn == used.size() + waiting);
  }
}

namespace {
// The policy's first step trains every rank on a prefix of its own shard, in arrival order.
void check_first_step_takes_shard_prefixes(const std::string& spec) {
  CAPTURE(spec);
  Harness h(spec, shape(4, 48), sst2_dataset());
  DistributedSampler reference(sst2_dataset(), 4, 1);
  const StepPlan plan = h.step();
  for (int g = 0; g < 4; ++g)
    for (const Sample& x : plan.batches[static_cast<std::size_t>(g)]) CHECK(x.index == reference.next(g).index);
}
}  // namespace

TEST_CASE("static gives every rank B/G samples in shard order and rejects B not divisible by G") {
  check_first_step_takes_shard_prefixes("static");
  CHECK_THROWS_WITH_AS(make_scheduler(parse_policy_spec("static"), shape(4, 50)),
                       doctest::Contains("B=50 is not divisible by G=4"), InputError);
}

TEST_CASE("minmax cuts the mean maximum padded tokens by over 10% against static on the same stream") {
  const PolicyRun stat = run_policy(parse_policy_spec("static"), shape(4, 48), 200, sst2_dataset());
  const PolicyRun mm = run_policy(parse_policy_spec("minmax"), shape(4, 48), 200, sst2_dataset());
  CHECK(summarize(mm).mean_max_padded_tokens < 0.9 * summarize(stat).mean_max_padded_tokens);
}

TEST_CASE("minmax and token_budget take a prefix of each buffer, in arrival order") {
  check_first_step_takes_shard_prefixes("minmax");
  check_first_step_takes_shard_prefixes("token_budget");
}

TEST_CASE("impossible shapes are clear errors before the first step") {
  auto fails = [](const std::string& spec, StepShape s, const std::string& expected) {
    CAPTURE(spec);
    CHECK_THROWS_WITH_AS(make_scheduler(parse_policy_spec(spec), s), doctest::Contains(expected.c_str()), InputError);
  };
  fails("minmax", shape(4, 3), "B=3 is smaller than G=4");
  fails("minmax:buffer=8", shape(4, 48), "B=48 exceeds");
  StepShape capped = shape(4, 48);
  capped.b_max = {10, 10, 10, 10};
  fails("minmax", capped, "B=48 exceeds");
  fails("static", capped, "exceed b_max=10");
  fails("kk", shape(4, 30), "not divisible");
  fails("token_budget:max_tokens=100", shape(4, 48), "below max_length=256");
  fails("minmax:solver=magic", shape(4, 48), "unknown solver");
  fails("minmax:cost=time", shape(4, 48), "unknown cost");
  fails("minmax:bufer=8", shape(4, 48), "did you mean \"buffer\"");
  fails("static:buffer=8", shape(4, 48), "takes no options");
  fails("minmx", shape(4, 48), "did you mean \"minmax\"");
  // Options with bounds on memory and time: refused before any allocation or search.
  fails("minmax:buffer=100000000", shape(4, 48), "option buffer must be an integer from 1 to 65536");
  fails("sorted:mega=100000000", shape(4, 48), "option mega must be an integer from 1 to 100000");
  fails("minmax:solver=enumerate", shape(16, 256), "solver=enumerate would visit up to");
  CHECK_NOTHROW(make_scheduler(parse_policy_spec("minmax:solver=enumerate"), shape(4, 48)));
  CHECK_THROWS_AS(parse_policy_spec("minmax:cost"), UsageError);
}

TEST_CASE("kk keeps equal counts and evens out token sums better than static") {
  double static_spread = 0, kk_spread = 0;
  for (const char* spec : {"static", "kk"}) {
    Harness h(spec, shape(8, 256), sst2_dataset());
    double spread = 0;
    for (int step = 0; step < 50; ++step) {
      const StepPlan plan = h.step();
      std::vector<double> sums;
      for (const auto& batch : plan.batches) {
        CHECK(batch.size() == 32);
        double sum = 0;
        for (const Sample& x : batch) sum += x.len;
        sums.push_back(sum);
      }
      spread += *std::max_element(sums.begin(), sums.end()) - *std::min_element(sums.begin(), sums.end());
    }
    (std::string(spec) == "kk" ? kk_spread : static_spread) = spread;
  }
  CHECK(kk_spread < 0.1 * static_spread);
}

TEST_CASE("sorted deals out slices of a length-sorted mega-batch, longest first") {
  Harness h("sorted:mega=4", shape(4, 48), sst2_dataset());
  int previous_longest = INT32_MAX;
  for (int step = 0; step < 4; ++step) {
    const StepPlan plan = h.step();
    int step_longest = 0, previous_rank_shortest = INT32_MAX;
    for (const auto& batch : plan.batches) {
      CHECK(std::is_sorted(batch.begin(), batch.end(), [](auto& a, auto& b) { return a.len > b.len; }));
      CHECK(batch.front().len <= previous_rank_shortest);
      previous_rank_shortest = batch.back().len;
      step_longest = std::max(step_longest, batch.front().len);
    }
    CHECK(step_longest <= previous_longest);
    previous_longest = step_longest;
  }
}

TEST_CASE("token_budget keeps every rank within its budget and lets the global batch vary") {
  const PolicyRun run = run_policy(parse_policy_spec("token_budget:max_tokens=300"), shape(4, 48), 200, sst2_dataset());
  std::set<int> global_batches;
  for (const RankStep& row : run.rows) {
    CHECK(row.padded_tokens <= 300);
    global_batches.insert(row.global_batch);
  }
  CHECK(global_batches.size() > 5);
}

TEST_CASE("the same shape and seed give the same decisions") {
  for (const char* spec : ALL_POLICIES) {
    CAPTURE(spec);
    const PolicyRun a = run_policy(parse_policy_spec(spec), shape(4, 48, 5), 50, sst2_dataset());
    const PolicyRun b = run_policy(parse_policy_spec(spec), shape(4, 48, 5), 50, sst2_dataset());
    REQUIRE(a.rows.size() == b.rows.size());
    for (std::size_t i = 0; i < a.rows.size(); ++i) {
      CHECK(a.rows[i].batch_size == b.rows[i].batch_size);
      CHECK(a.rows[i].real_tokens == b.rows[i].real_tokens);
    }
  }
}
