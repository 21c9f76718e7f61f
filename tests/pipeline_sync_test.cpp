// A pipeline's data-parallel syncs as collectives: their plans over each stage's peers, times by
// hand, and the reduction to one group of alike flows against every flow simulated.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "eval/config.hpp"
#include "pipeline/parallel_config.hpp"
#include "pipeline/sync_plans.hpp"

using namespace ddpsim;
using namespace ddpsim::pipeline;

namespace {

PipelineSetup setup(int stages, int groups, const std::string& data_parallel) {
  PipelineSetup s;
  s.stages = stages, s.groups = groups, s.micro_batches = stages, s.data_parallel = data_parallel;
  return s;
}

void on_nodes(PipelineSetup& s, int gpus_per_node) {
  for (int g = 0; g < s.gpus(); ++g) s.channels.fabric.node.push_back(g / gpus_per_node);
  s.channels.fabric.nic_bytes_per_s = 25e9;
  s.channels.fabric.nic_latency_s = 5e-6;
}

void check_on_stage(const CollectivePlan& plan, int stages, int stage) {
  for (const auto& phase : plan.phases)
    for (const auto& f : phase.flows) {
      CHECK(f.src % stages == stage);
      CHECK(f.dst % stages == stage);
    }
}

}  // namespace

TEST_CASE("a stage's syncs run over its D peers: one ring, or rings inside nodes and across them") {
  const auto zero2 = stage_plans(setup(4, 8, "zero2"));
  REQUIRE(zero2.size() == 4);
  for (int st = 0; st < 4; ++st) {
    const auto& p = zero2[static_cast<std::size_t>(st)];
    REQUIRE(p.sync.phases.size() == 1);
    CHECK(p.sync.phases[0].flows.size() == 8);
    CHECK(p.sync.phases[0].hops == 7);
    CHECK(sent_per_byte(p.sync) == doctest::Approx(7.0 / 8));  // a reduce-scatter
    CHECK(sent_per_byte(p.gather) == doctest::Approx(7.0 / 8));
    check_on_stage(p.sync, 4, st);
    check_on_stage(p.gather, 4, st);
  }
  const auto ddp = stage_plans(setup(4, 8, "ddp"));
  CHECK(sent_per_byte(ddp[1].sync) == doctest::Approx(14.0 / 8));  // an allreduce
  CHECK(ddp[1].sync.phases[0].hops == 14);
  CHECK(ddp[1].gather.phases.empty());
  CHECK(stage_plans(setup(4, 1, "zero2")).empty());  // one group: nothing to sync

  // 32 GPUs on 4 nodes of 8: each stage has 2 peers a node, so 4 nodes' rings of 2 and 2 rails of 4.
  PipelineSetup h = setup(4, 8, "ddp");
  on_nodes(h, 8);
  h.algorithm = "hierarchical";
  const auto hier = stage_plans(h);
  REQUIRE(hier[2].sync.phases.size() == 3);
  CHECK(hier[2].sync.phases[0].flows.size() == 8);
  CHECK(hier[2].sync.phases[1].flows.size() == 8);
  CHECK(hier[2].sync.phases[1].hops == 6);
  CHECK(sent_per_byte(hier[2].sync) == doctest::Approx(0.5 + 2.0 * 3 / 4 / 2 + 0.5));
  check_on_stage(hier[2].sync, 4, 2);
  h.data_parallel = "zero2";  // half each: inside the node then across it, and back
  const auto halves = stage_plans(h);
  CHECK(sent_per_byte(halves[0].sync) == doctest::Approx(0.5 + 3.0 / 4 / 2));
  CHECK(halves[0].gather.phases[1].flows.front().fraction == doctest::Approx(0.5));  // inside the node last
}

TEST_CASE("a sync and a gather on idle links take what each GPU sends over the link's rate") {
  // One stage, 4 groups, 1 micro-batch: forward 1, backward 2, sync 3 (each GPU sends 3 units),
  // optimizer 0.5, gather 4; no latency, so 10.5 units.
  ParallelConfig p = parse_parallel(nlohmann::json::parse(R"({"stages": 1, "micro_batches": 1, "schedule": "gpipe",
      "abstract": {"forward": 1, "backward": 2, "transfer": 0, "sync": 3, "optimizer": 0.5, "gather": 4}})"),
                                    "parallel", 4);
  const auto r = simulate_pipeline(p.setup, {abstract_step(p.setup, p.abstract)});
  CHECK(r.steps[0].step_s == doctest::Approx(10.5).epsilon(1e-9));
  p.setup.data_parallel = "ddp";  // an allreduce sends 2·3/4 of its size, still 3 units from each GPU
  const auto ddp = simulate_pipeline(p.setup, {abstract_step(p.setup, p.abstract)});
  CHECK(ddp.steps[0].step_s == doctest::Approx(6.5).epsilon(1e-9));
  // Weights set shares through each class's tag latency, which a ring's later steps must not pay.
  p.setup.channels.model = "shared";
  p.setup.channels.weights = {1, 1, 0.1};
  const auto weighted = simulate_pipeline(p.setup, {abstract_step(p.setup, p.abstract)});
  CHECK(weighted.steps[0].step_s == doctest::Approx(6.5).epsilon(1e-9));
}

TEST_CASE("one group of alike flows gives the same steps as every flow, where the stages' syncs share no link") {
  // 4 stages × 16 groups on nodes of 8 GPUs; groups compute at different speeds, so their
  // pipelines end apart and each stage's collective starts when its last peer joins.
  PipelineSetup s = setup(4, 16, "zero2");
  s.micro_batches = 6;
  on_nodes(s, 8);
  s.channels.bytes_per_s = 100e9, s.channels.latency_s = 1e-6;
  AbstractWork a;
  StepWork step = abstract_step(s, a);
  for (int g = 0; g < s.gpus(); ++g)
    for (auto& f : step[static_cast<std::size_t>(g)].fwd_s) f *= 1 + 0.1 * ((g / 4) % 5);
  for (auto& w : step) w.sync_bytes = w.gather_bytes = 4e9, w.act_bytes.assign(6, 0.5e9);
  const std::vector<StepWork> steps(3, step);
  auto run = [&](bool reduce, const std::string& channels) {
    PipelineSetup t = s;
    t.reduce_flows = reduce;
    t.channels.model = channels;
    return simulate_pipeline(t, steps);
  };
  const auto reduced = run(true, "separate"), every = run(false, "separate");
  CHECK(every.sync_flows_simulated == every.sync_flows_planned);
  CHECK(every.sync_flows_planned == 4 * 2 * 16);  // each stage: a reduce-scatter and a gather, 16 flows
  CHECK(reduced.sync_flows_simulated < every.sync_flows_planned / 4);
  for (std::size_t t = 0; t < 3; ++t)
    CHECK(reduced.steps[t].step_s == doctest::Approx(every.steps[t].step_s).epsilon(1e-9));
  const auto c = static_cast<std::size_t>(FlowClass::grad_sync);
  CHECK(reduced.flows[c].bytes == doctest::Approx(every.flows[c].bytes).epsilon(1e-12));
  CHECK(reduced.flows[c].transfers == every.flows[c].transfers);
  CHECK(reduced.flows[c].transfer_s == doctest::Approx(every.flows[c].transfer_s).epsilon(1e-9));
  // Shared links carry the pipeline's sends beside the syncs: every flow is simulated.
  const auto shared = run(true, "shared");
  CHECK(shared.sync_flows_simulated == shared.sync_flows_planned);
}

TEST_CASE("the stages' syncs may share a leaf uplink they cannot fill, and still run one group of each kind") {
  // 4 stages × 16 groups on 8 nodes, a leaf each: every stage's ring crosses every uplink once.
  PipelineSetup s = setup(4, 16, "zero2");
  s.micro_batches = 4;
  on_nodes(s, 8);
  s.channels.fabric.nodes_per_leaf = 1;
  s.channels.bytes_per_s = 100e9, s.channels.latency_s = 1e-6;
  StepWork step = abstract_step(s, AbstractWork{});
  for (int g = 0; g < s.gpus(); ++g)
    for (auto& f : step[static_cast<std::size_t>(g)].bwd_s) f *= 1 + 0.2 * ((g / 4) % 3) + 0.05 * (g % 4);
  for (auto& w : step) w.sync_bytes = w.gather_bytes = 4e9, w.act_bytes.assign(4, 1e8);
  auto run = [&](bool reduce, double uplink_bytes_per_s) {
    PipelineSetup t = s;
    t.reduce_flows = reduce;
    t.channels.fabric.leaf_bytes_per_s = uplink_bytes_per_s;
    return simulate_pipeline(t, {step, step});
  };
  // Four stages' flows of at most 25 GB/s each (their NICs) cannot fill 100 GB/s: reduced, same steps.
  const auto reduced = run(true, 100e9), every = run(false, 100e9);
  CHECK(reduced.sync_flows_simulated < every.sync_flows_simulated / 4);
  for (std::size_t t = 0; t < 2; ++t)
    CHECK(reduced.steps[t].step_s == doctest::Approx(every.steps[t].step_s).epsilon(1e-9));
  // 90 GB/s can be filled when all four stages cross at once: every flow is simulated.
  const auto tight = run(true, 90e9);
  CHECK(tight.sync_flows_simulated == tight.sync_flows_planned);
}

TEST_CASE("a pipeline's sync algorithm: ring or hierarchical, with as many peers on every node") {
  auto config = [](const std::string& simulation, int world_size, int stages = 3) {
    return parse_config(nlohmann::json::parse(R"({"training": {"world_size": )" + std::to_string(world_size) +
                                              R"(, "global_batch": 96, "steps": 1},
        "platform": {"topology": "cluster", "gpus_per_node": 8},
        "parallel": {"stages": )" + std::to_string(stages) +
                                              R"(, "micro_batches": 4}, "simulation": )" + simulation + "}"),
                        "c.json", "");
  };
  CHECK(config(R"({"algorithm": "hierarchical"})", 32, 4).parallel->setup.algorithm == "hierarchical");
  // 24 GPUs in 3 stages on 3 nodes: stage 0's peers are GPUs 0, 3, 6 | 9, 12, 15 | 18, 21.
  CHECK_THROWS_WITH_AS(config(R"({"algorithm": "hierarchical"})", 24),
                       doctest::Contains("c.json: simulation.algorithm \"hierarchical\": stage 0 has 3 data-parallel "
                                         "peers on its first node and 2 on another"),
                       InputError);
  CHECK_THROWS_WITH_AS(config(R"({"algorithm": "tree"})", 24),
                       doctest::Contains("c.json: simulation.algorithm \"tree\": a pipeline's syncs over a stage's "
                                         "peers are ring or hierarchical"),
                       InputError);
}
