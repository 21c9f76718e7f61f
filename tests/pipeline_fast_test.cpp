// The pipeline's fast mode against a step worked by hand and against full mode, where every flow
// is on SimGrid; and the jobs it refuses, each naming why.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "eval/config.hpp"
#include "pipeline/fast_pipeline.hpp"
#include "pipeline/parallel_config.hpp"

using namespace ddpsim;
using namespace ddpsim::pipeline;

namespace {

PipelineSetup setup(int stages, int groups, int micro_batches, const std::string& schedule) {
  PipelineSetup s;
  s.stages = stages, s.groups = groups, s.micro_batches = micro_batches, s.schedule = schedule;
  s.channels.bytes_per_s = 100e9, s.channels.latency_s = 2e-6;
  return s;
}

void on_nodes(PipelineSetup& s, int gpus_per_node, int nodes_per_leaf = 0) {
  for (int g = 0; g < s.gpus(); ++g) s.channels.fabric.node.push_back(g / gpus_per_node);
  s.channels.fabric.nic_bytes_per_s = 25e9;
  s.channels.fabric.nic_latency_s = 5e-6;
  s.channels.fabric.nodes_per_leaf = nodes_per_leaf;
  s.channels.fabric.leaf_bytes_per_s = 400e9;
}

// Uneven work: each GPU's passes and micro-batches differ, so pipelines drift apart, and
// activations of `act_bytes` (a transfer of act_bytes / 100e9 s inside a node).
std::vector<StepWork> uneven_steps(const PipelineSetup& s, double act_bytes, int steps = 3) {
  std::vector<StepWork> out;
  for (int t = 0; t < steps; ++t) {
    StepWork& step = out.emplace_back();
    for (int g = 0; g < s.gpus(); ++g) {
      GpuWork& w = step.emplace_back();
      for (int m = 0; m < s.micro_batches; ++m) {
        const double f = 1e-3 * (1 + 0.13 * ((g * 7 + m * 3 + t) % 5));
        w.fwd_s.push_back(f);
        w.bwd_s.push_back(2 * f);
        w.act_bytes.push_back(act_bytes * (1 + 0.2 * (m % 3)));
      }
      w.sync_bytes = 2e9, w.gather_bytes = 1e9, w.opt_s = 5e-4 * (1 + g % 2);
    }
  }
  return out;
}

void check_same(const PipelineSetup& s, const std::vector<StepWork>& steps) {
  PipelineSetup full = s, fast = s;
  full.mode = "full";
  fast.mode = "fast";
  REQUIRE(fast_mode_obstacle(fast).empty());
  const PipelineResult a = simulate_pipeline(full, steps), b = simulate_pipeline(fast, steps);
  REQUIRE(a.steps.size() == b.steps.size());
  for (std::size_t t = 0; t < a.steps.size(); ++t) {
    CHECK(b.steps[t].step_s == doctest::Approx(a.steps[t].step_s).epsilon(1e-9));
    for (std::size_t g = 0; g < a.steps[t].gpus.size(); ++g) {
      CHECK(b.steps[t].gpus[g].end_s == doctest::Approx(a.steps[t].gpus[g].end_s).epsilon(1e-9));
      CHECK(b.steps[t].gpus[g].busy_s == doctest::Approx(a.steps[t].gpus[g].busy_s).epsilon(1e-9));
    }
  }
  for (std::size_t c = 0; c < a.flows.size(); ++c) {
    CHECK(b.flows[c].transfers == a.flows[c].transfers);
    CHECK(b.flows[c].bytes == doctest::Approx(a.flows[c].bytes).epsilon(1e-12));
    CHECK(b.flows[c].transfer_s == doctest::Approx(a.flows[c].transfer_s).epsilon(1e-9));
  }
  CHECK(b.max_in_flight == a.max_in_flight);
  CHECK(b.total_s == doctest::Approx(a.total_s).epsilon(1e-9));
}

}  // namespace

TEST_CASE("fast mode: sends that overlap on a link share it equally, as SimGrid's model does") {
  // 2 stages, 1 group, GPipe, 2 micro-batches; forward 1 s, backward 2 s, 3 bytes a transfer
  // on a link of 1 B/s. Activations 0 go at 1 and 1 at 2: alone until 2 (2 bytes left), then
  // both at half the rate, so 0 arrives at 6 and 1 at 7. Stage 1 runs F0 6–7, F1 7–8, B0 8–10,
  // B1 10–12; gradients 0 (alone until 12, then shared) arrive at 14 and 1 at 16, so stage 0
  // runs B0 14–16, B1 16–18. Served one after another, they would have taken 3 + 5 s.
  PipelineSetup s = setup(2, 1, 2, "gpipe");
  s.channels.bytes_per_s = 1, s.channels.latency_s = 0;
  GpuWork w;
  w.fwd_s = {1, 1}, w.bwd_s = {2, 2}, w.act_bytes = {3, 3};
  const std::vector<StepWork> steps = {StepWork(2, w)};
  s.mode = "fast";
  const PipelineResult r = simulate_pipeline(s, steps);
  CHECK(r.steps[0].step_s == doctest::Approx(18));
  CHECK(r.steps[0].gpus[0].busy_s == doctest::Approx(6));
  CHECK(r.steps[0].gpus[1].end_s == doctest::Approx(12));
  CHECK(r.flows[0].transfer_s == doctest::Approx(5 + 5));  // activations: 1 → 6 and 2 → 7
  CHECK(r.flows[1].transfer_s == doctest::Approx(4 + 4));  // gradients: 10 → 14 and 12 → 16
  check_same(s, steps);
}

TEST_CASE("fast mode gives full mode's steps: schedules, syncs, gathers, routes across nodes") {
  SUBCASE("1f1b and gpipe, zero2, 4 stages × 8 groups in nodes of 8 under leaves") {
    for (const char* schedule : {"1f1b", "gpipe"}) {
      PipelineSetup s = setup(4, 8, 6, schedule);
      on_nodes(s, 8, 1);
      check_same(s, uneven_steps(s, 1e6));
    }
  }
  SUBCASE("transfers longer than passes: a GPU's sends overlap on its link") {
    PipelineSetup s = setup(4, 4, 8, "1f1b");
    on_nodes(s, 8);
    check_same(s, uneven_steps(s, 3e8));
  }
  SUBCASE("stages across nodes: 3 stages in nodes of 8, transfers on the NICs") {
    PipelineSetup s = setup(3, 8, 4, "1f1b");
    on_nodes(s, 8);
    check_same(s, uneven_steps(s, 2e7));
  }
  SUBCASE("a group's stages under two leaves: its sends cross the uplinks, no other group's") {
    PipelineSetup s = setup(4, 8, 4, "1f1b");
    on_nodes(s, 2, 1);
    s.channels.fabric.leaf_bytes_per_s = 10e9;  // narrower than the NIC: the route's narrowest link
    check_same(s, uneven_steps(s, 2e7));
  }
  SUBCASE("several syncs a step, ddp allreduces, hierarchical") {
    PipelineSetup s = setup(4, 8, 8, "1f1b");
    on_nodes(s, 8);
    s.sync_every = 3, s.data_parallel = "ddp", s.algorithm = "hierarchical";
    check_same(s, uneven_steps(s, 1e6));
  }
  SUBCASE("one group: no syncs") {
    PipelineSetup s = setup(4, 1, 5, "1f1b");
    check_same(s, uneven_steps(s, 5e7));
  }
  SUBCASE("compute slowed beside a sync that only ever runs after the last pass") {
    PipelineSetup s = setup(2, 4, 4, "gpipe");
    s.fwd_impact = s.bwd_impact = 0.5;
    check_same(s, uneven_steps(s, 1e6));
  }
}

TEST_CASE("fast mode records the timeline's steps in full mode, and refuses jobs it would not time alike") {
  PipelineSetup s = setup(2, 2, 2, "1f1b");
  const std::vector<StepWork> steps = uneven_steps(s, 1e6, 4);
  PipelineSetup full = s;
  s.mode = "fast";
  const PipelineResult a = simulate_pipeline(full, steps, {1, 3}), b = simulate_pipeline(s, steps, {1, 3});
  CHECK(b.recording.from == 1);
  CHECK(b.recording.to == 3);
  REQUIRE(b.recording.spans.size() == a.recording.spans.size());
  for (std::size_t i = 0; i < a.recording.spans.size(); ++i) {
    CHECK(b.recording.spans[i].step == a.recording.spans[i].step);
    CHECK(b.recording.spans[i].start_s == doctest::Approx(a.recording.spans[i].start_s).epsilon(1e-12));
  }
  CHECK(b.recording.samples.size() == a.recording.samples.size());

  PipelineSetup shared = s;
  shared.channels.model = "shared";
  CHECK(fast_mode_obstacle(shared).find("parallel.channels.model") != std::string::npos);
  CHECK_THROWS_WITH_AS(simulate_pipeline(shared, steps),
                       doctest::Contains("simulation.mode \"fast\" would not give this job full mode's steps"),
                       InputError);
  shared.stages = 1, shared.groups = 4;  // no sends: its syncs alone, as full mode runs them
  CHECK(fast_mode_obstacle(shared).empty());
  PipelineSetup pcie = s;
  pcie.channels.fabric.host_bytes_per_s = 32e9;
  CHECK(fast_mode_obstacle(pcie).find("root complex") != std::string::npos);
  PipelineSetup mid_step = s;
  mid_step.sync_every = 1, mid_step.fwd_impact = 0.1;
  CHECK(fast_mode_obstacle(mid_step).find("sync_every") != std::string::npos);
}

TEST_CASE("a pipeline job's simulation.mode: full by default, fast up to 65,536 GPUs") {
  auto config = [](int world_size, const std::string& simulation, int nodes_per_leaf = 4) {
    return parse_config(
        nlohmann::json::parse(R"({"training": {"world_size": )" + std::to_string(world_size) + R"(, "global_batch": )" +
                              std::to_string(world_size * 4) +
                              R"(, "steps": 1}, "platform": {"topology": "cluster", "nodes_per_leaf": )" +
                              std::to_string(nodes_per_leaf) + R"(},
        "parallel": {"stages": 4, "micro_batches": 4}, "simulation": )" +
                              simulation + "}"),
        "c.json", "");
  };
  CHECK(config(32, "{}").parallel->setup.mode == "full");
  CHECK(config(32, R"({"mode": "fast"})").parallel->setup.mode == "fast");
  CHECK(config(8192, R"({"mode": "fast"})").parallel->setup.groups == 2048);
  CHECK_THROWS_WITH_AS(config(8192, "{}"),
                       doctest::Contains("c.json: training.world_size is 8192, and a pipeline job in "
                                         "simulation.mode \"full\" simulates at most 4096 GPUs"),
                       InputError);
  CHECK(config(65536, R"({"mode": "fast"})").parallel->setup.groups == 16384);
  CHECK_THROWS_WITH_AS(
      config(8192, R"({"mode": "fast"})", 1024),
      doctest::Contains("fast mode keeps its syncs' routes per leaf switch, and this platform has one"), InputError);
}
