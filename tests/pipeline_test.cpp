// The pipeline engine against hand-computed schedules, and SimGrid link sharing by weight.
#include <doctest/doctest.h>

#include <numeric>

#include <simgrid/s4u.hpp>

#include "common/error.hpp"
#include "engine/simgrid_engine.hpp"
#include "eval/pipeline_eval.hpp"
#include "pipeline/parallel_config.hpp"
#include "pipeline/schedule.hpp"

using namespace ddpsim;
using namespace ddpsim::pipeline;
namespace sg4 = simgrid::s4u;

namespace {

ParallelConfig parallel(const std::string& json, int world_size) {
  return parse_parallel(nlohmann::json::parse(json), "parallel", world_size);
}

PipelineResult run_abstract(const ParallelConfig& p, int steps = 1) {
  return simulate_pipeline(p.setup,
                           std::vector<StepWork>(static_cast<std::size_t>(steps), abstract_step(p.setup, p.abstract)));
}

double compute_share(const PipelineResult& r) {
  double busy = 0;
  for (const auto& gpu : r.steps.front().gpus) busy += gpu.busy_s;
  return busy / (static_cast<double>(r.steps.front().gpus.size()) * r.steps.front().step_s);
}

// Each flow: (src, dst, class, start time, bytes); returns each one's arrival time.
std::vector<double> flows_end(const ChannelConfig& config, int gpus,
                              const std::vector<std::tuple<int, int, FlowClass, double, double>>& flows) {
  auto engine = make_engine();
  std::vector<std::array<int, 3>> pairs;
  for (const auto& [src, dst, c, start, bytes] : flows) pairs.push_back({src, dst, static_cast<int>(c)});
  Network network(config, gpus, pairs);
  std::vector<double> end(flows.size());
  const double origin = sg4::Engine::get_clock();  // SimGrid's clock runs on across engines
  for (std::size_t i = 0; i < flows.size(); ++i)
    sg4::Actor::create("flow", network.host(std::get<0>(flows[i])), [&, i] {
      const auto& [src, dst, c, start, bytes] = flows[i];
      sg4::this_actor::sleep_for(start);
      network.transfer(src, dst, c, bytes);
      end[i] = sg4::Engine::get_clock() - origin;
    });
  engine->run();
  return end;
}

}  // namespace

TEST_CASE("GPipe holds every micro-batch's activations, 1F1B at most S - stage") {
  CHECK(stage_ops("1f1b", 2, 0, 2) == std::vector<Op>{{true, 0}, {true, 1}, {false, 0}, {false, 1}});
  CHECK(stage_ops("1f1b", 2, 1, 2) == std::vector<Op>{{true, 0}, {false, 0}, {true, 1}, {false, 1}});
  for (int stage = 0; stage < 4; ++stage) {
    CHECK(max_in_flight(stage_ops("gpipe", 4, stage, 8)) == 8);
    CHECK(max_in_flight(stage_ops("1f1b", 4, stage, 8)) == 4 - stage);
    CHECK(stage_ops("1f1b", 4, stage, 8).size() == 16);
  }
}

TEST_CASE("without communication a step is (M + S - 1)(f + b) and the bubble (S - 1)/(M + S - 1)") {
  for (const char* schedule : {"gpipe", "1f1b"}) {
    CAPTURE(schedule);
    const auto p = parallel(std::string(R"({"stages": 4, "micro_batches": 8, "schedule": ")") + schedule +
                                R"(", "abstract": {"forward": 1, "backward": 2, "transfer": 0}})",
                            4);
    const PipelineResult r = run_abstract(p, 3);
    for (const auto& step : r.steps) CHECK(step.step_s == doctest::Approx(33).epsilon(1e-9));
    CHECK(1 - compute_share(r) == doctest::Approx(3.0 / 11).epsilon(1e-9));
  }
}

TEST_CASE("S = 2, M = 2 with transfers on separate channels, by hand") {
  // Stage 0: F0 [0,1] F1 [1,2]; activations arrive at 2 and 3. Stage 1 (GPipe): F0 [2,3]
  // F1 [3,4] B0 [4,6] B1 [6,8]; gradients arrive at 7 and 9: stage 0 B0 [7,9] B1 [9,11].
  // 1F1B, stage 1: F0 [2,3] B0 [3,5] F1 [5,6] B1 [6,8]; gradients at 6 and 9: B0 [6,8] B1 [9,11].
  for (const char* schedule : {"gpipe", "1f1b"}) {
    CAPTURE(schedule);
    const auto p = parallel(std::string(R"({"stages": 2, "micro_batches": 2, "schedule": ")") + schedule +
                                R"(", "abstract": {"forward": 1, "backward": 2, "transfer": 1}})",
                            2);
    const PipelineResult r = run_abstract(p);
    CHECK(r.steps[0].step_s == doctest::Approx(11).epsilon(1e-9));
    CHECK(r.steps[0].gpus[1].end_s == doctest::Approx(8).epsilon(1e-9));
    CHECK(r.flows[0].transfers == 2);
    CHECK(r.flows[1].transfers == 2);
  }
}

TEST_CASE("a sync slows the backward beside it by its impact") {
  // One stage, two groups, sync after each backward (2 units alone, D = 2: one round).
  // F0 [0,1] F1 [1,2] B0 [2,4]; sync 0 [4,6] while B1 runs at 1/1.5: 4/3 done by 6, the rest
  // by 6 + 2/3; sync 1 [20/3, 26/3].
  const auto p = parallel(R"({"stages": 1, "schedule": "gpipe", "micro_batches": 2, "sync_every": 1, "bwd_impact": 0.5,
                              "abstract": {"forward": 1, "backward": 2, "sync": 2}})",
                          2);
  const PipelineResult r = run_abstract(p);
  CHECK(r.steps[0].step_s == doctest::Approx(26.0 / 3).epsilon(1e-9));
  CHECK(r.flows[2].transfers == 4);
}

TEST_CASE("two flows on one shared link share it in the ratio of their weights") {
  ChannelConfig c;
  c.model = "shared";
  c.bytes_per_s = 1e9;
  c.latency_s = 1e-6;
  const std::vector<std::tuple<int, int, FlowClass, double, double>> flows = {{0, 1, FlowClass::fwd_prop, 0, 3e9},
                                                                              {0, 1, FlowClass::grad_sync, 0, 1e9}};
  auto end = flows_end(c, 2, flows);  // equal shares: 1e9 done by 2 s, the rest alone
  CHECK(end[1] == doctest::Approx(2 + 1e-6).epsilon(1e-6));
  CHECK(end[0] == doctest::Approx(4 + 1e-6).epsilon(1e-6));
  c.weights = {3, 1, 1};  // fwd_prop 3 : grad_sync 1, so both end together
  end = flows_end(c, 2, flows);
  CHECK(end[0] == doctest::Approx(4 + 1e-6).epsilon(1e-6));
  CHECK(end[1] == doctest::Approx(4 + 1e-6).epsilon(1e-6));
  c.weights = {1, 1, 4};  // grad_sync gets 4/5 of the link until it ends
  end = flows_end(c, 2, flows);
  CHECK(end[1] == doctest::Approx(1.25 + 1e-6).epsilon(1e-6));
  CHECK(end[0] == doctest::Approx(4 + 1e-6).epsilon(1e-6));
  c.weights = {1000, 1, 1};  // the widest ratio allowed: grad_sync keeps 1/1001 of the link
  end = flows_end(c, 2, flows);
  CHECK(end[0] == doctest::Approx(3.003 + 1e-6).epsilon(1e-6));
  CHECK(end[1] == doctest::Approx(4 + 1e-6).epsilon(1e-6));
}

TEST_CASE("the link samples follow the shares: 3:1 while both flows run, then the rest alone") {
  auto engine = make_engine();
  ChannelConfig c;
  c.model = "shared";
  c.receiver_limit = false;
  c.weights = {3, 1, 1};
  c.bytes_per_s = 1e9;
  Network network(c, 2, {{0, 1, 0}, {0, 1, 2}});
  const double origin = sg4::Engine::get_clock();
  network.record(true);
  for (const FlowClass flow : {FlowClass::fwd_prop, FlowClass::grad_sync})
    sg4::Actor::create("flow", network.host(0), [&network, flow] { network.transfer(0, 1, flow, 3e9); });
  engine->run();
  network.record(false);
  // fwd_prop at 0.75 GB/s ends at 4 s with 1 GB of grad_sync moved; grad_sync's 2 GB then take 2 s.
  std::vector<std::array<double, 3>> seen;
  for (const auto& s : network.samples())
    if (seen.empty() || s.time_s - origin > 1e-6) seen.push_back({s.time_s - origin, s.moved[0], s.moved[2]});
  REQUIRE(seen.size() >= 3);
  CHECK(seen[0] == std::array<double, 3>{0, 0, 0});
  CHECK(seen[1][0] == doctest::Approx(4).epsilon(1e-6));
  CHECK(seen[1][1] == doctest::Approx(3e9).epsilon(1e-6));
  CHECK(seen[1][2] == doctest::Approx(1e9).epsilon(1e-6));
  CHECK(seen.back()[0] == doctest::Approx(6).epsilon(1e-6));
  CHECK(seen.back()[2] == doctest::Approx(3e9).epsilon(1e-6));
}

TEST_CASE("an exclusive flow starves the others on its links until it ends") {
  ChannelConfig c;
  c.model = "shared";
  c.bytes_per_s = 1e9;
  c.exclusive = static_cast<int>(FlowClass::grad_sync);
  for (const auto& weights : {std::array<double, 3>{1, 1, 1}, std::array<double, 3>{1, 3, 2}}) {
    CAPTURE(weights[1]);
    c.weights = weights;
    // The others keep a millionth of the link: times within 1e-5.
    // fwd_prop alone for 0.5 s, then grad_sync alone for 1 s, then the rest of fwd_prop.
    auto end = flows_end(c, 2, {{0, 1, FlowClass::fwd_prop, 0, 2e9}, {0, 1, FlowClass::grad_sync, 0.5, 1e9}});
    CHECK(end[1] == doctest::Approx(1.5).epsilon(1e-5));
    CHECK(end[0] == doctest::Approx(3).epsilon(1e-5));
    // A flow that starts while an exclusive one runs waits for its end.
    end = flows_end(c, 2, {{0, 1, FlowClass::grad_sync, 0, 1e9}, {0, 1, FlowClass::bwd_prop, 0.5, 1e9}});
    CHECK(end[0] == doctest::Approx(1).epsilon(1e-5));
    CHECK(end[1] == doctest::Approx(2).epsilon(1e-5));
    // Held back twice: 0.5 s alone, 1 s held, 0.5 s alone, 1 s held, then the last 2 s.
    end = flows_end(c, 2,
                    {{0, 1, FlowClass::fwd_prop, 0, 3e9},
                     {0, 1, FlowClass::grad_sync, 0.5, 1e9},
                     {0, 1, FlowClass::grad_sync, 2, 1e9}});
    CHECK(end[1] == doctest::Approx(1.5).epsilon(1e-5));
    CHECK(end[2] == doctest::Approx(3).epsilon(1e-5));
    CHECK(end[0] == doctest::Approx(5).epsilon(1e-5));
  }
}

TEST_CASE("a receiver's link limits two neighbours sending to it at once") {
  ChannelConfig c;
  c.model = "shared";
  c.bytes_per_s = 1e9;
  const std::vector<std::tuple<int, int, FlowClass, double, double>> flows = {{0, 1, FlowClass::fwd_prop, 0, 1e9},
                                                                              {2, 1, FlowClass::bwd_prop, 0, 1e9}};
  auto end = flows_end(c, 3, flows);
  CHECK(end[0] == doctest::Approx(2).epsilon(1e-9));
  CHECK(end[1] == doctest::Approx(2).epsilon(1e-9));
  c.receiver_limit = false;
  end = flows_end(c, 3, flows);
  CHECK(end[0] == doctest::Approx(1).epsilon(1e-9));
  CHECK(end[1] == doctest::Approx(1).epsilon(1e-9));
}

TEST_CASE("the fabric: GPU links inside a node, NICs between nodes, leaf uplinks and the root complex shared") {
  ChannelConfig c;
  c.model = "shared";
  c.bytes_per_s = 4e9;
  c.fabric.node = {0, 0, 1, 1, 2, 2, 3, 3};
  c.fabric.nic_bytes_per_s = 1e9;
  // Inside a node at the GPU link's 4 GB/s, across at the NIC's 1 GB/s.
  auto end = flows_end(c, 8, {{0, 1, FlowClass::fwd_prop, 0, 4e9}, {2, 4, FlowClass::fwd_prop, 0, 1e9}});
  CHECK(end[0] == doctest::Approx(1).epsilon(1e-9));
  CHECK(end[1] == doctest::Approx(1).epsilon(1e-9));
  // Two classes leaving one GPU for another node share its NIC, in the ratio of their weights.
  c.weights = {3, 1, 1};
  end = flows_end(c, 8, {{0, 2, FlowClass::fwd_prop, 0, 3e9}, {0, 2, FlowClass::grad_sync, 0, 1e9}});
  CHECK(end[0] == doctest::Approx(4).epsilon(1e-6));
  CHECK(end[1] == doctest::Approx(4).epsilon(1e-6));
  // Separate channels: each class its own NIC.
  c.model = "separate";
  c.weights = {1, 1, 1};
  end = flows_end(c, 8, {{0, 2, FlowClass::fwd_prop, 0, 3e9}, {0, 2, FlowClass::grad_sync, 0, 1e9}});
  CHECK(end[0] == doctest::Approx(3).epsilon(1e-9));
  CHECK(end[1] == doctest::Approx(1).epsilon(1e-9));
  // Two nodes per leaf, a leaf uplink of one NIC's rate: two flows from leaf 0 to leaf 1 out
  // of different nodes share it; a flow inside leaf 0 does not cross it.
  c.model = "shared";
  c.fabric.nodes_per_leaf = 2;
  c.fabric.leaf_bytes_per_s = 1e9;
  end = flows_end(c, 8,
                  {{0, 4, FlowClass::grad_sync, 0, 1e9},
                   {2, 6, FlowClass::grad_sync, 0, 1e9},
                   {1, 3, FlowClass::grad_sync, 0, 1e9}});
  CHECK(end[0] == doctest::Approx(2).epsilon(1e-9));
  CHECK(end[1] == doctest::Approx(2).epsilon(1e-9));
  CHECK(end[2] == doctest::Approx(1).epsilon(1e-9));
  // One node behind a PCIe root complex of 4 GB/s: two copies between other GPUs share it.
  ChannelConfig pcie;
  pcie.model = "shared";
  pcie.bytes_per_s = 4e9;
  pcie.fabric.host_bytes_per_s = 4e9;
  end = flows_end(pcie, 4, {{0, 1, FlowClass::fwd_prop, 0, 4e9}, {2, 3, FlowClass::fwd_prop, 0, 4e9}});
  CHECK(end[0] == doctest::Approx(2).epsilon(1e-9));
  CHECK(end[1] == doctest::Approx(2).epsilon(1e-9));
}

TEST_CASE("receiver congestion slows 1F1B, never GPipe, whose phases send one way at a time") {
  auto step = [](const char* schedule, bool limit) {
    auto p = parallel(std::string(R"({"stages": 4, "micro_batches": 8, "schedule": ")") + schedule +
                          R"(", "channels": {"model": "shared"},
                            "abstract": {"forward": 1, "backward": 2, "transfer": 3}})",
                      4);
    p.setup.channels.receiver_limit = limit;
    return run_abstract(p).steps[0].step_s;
  };
  CHECK(step("gpipe", true) == doctest::Approx(step("gpipe", false)).epsilon(1e-12));
  CHECK(step("1f1b", true) > step("1f1b", false) + 0.1);
}

TEST_CASE("bad parallel sections are refused with the key and what was expected") {
  auto fails = [](const std::string& json, int world_size, const std::string& message) {
    CAPTURE(json);
    CHECK_THROWS_WITH_AS(parallel(json, world_size), doctest::Contains(message.c_str()), InputError);
  };
  const std::string work = R"("abstract": {})";
  fails(R"({"stages": 3, )" + work + "}", 4, "stages (3) must divide training.world_size (4)");
  fails(R"({"stages": 4, "micro_batches": 2, "schedule": "1f1b", )" + work + "}", 4,
        "1f1b needs at least as many micro-batches as stages");
  fails(R"({"stages": 2, "channels": {"weights": {"fwd_prop": -1}}, )" + work + "}", 2,
        "weights: fwd_prop must be > 0");
  fails(R"({"stages": 2, "channels": {"weights": {"grad_sync": 1001}}, )" + work + "}", 2,
        "the largest weight is at most 1000 times the smallest");
  fails(R"({"stages": 2, "channels": {"weights": {"grad_sync": 0}}, )" + work + "}", 2,
        "weights: grad_sync must be > 0");
  fails(R"({"stages": 2, "channels": {"exclusive": ["fwd_prop", "grad_sync"]}, )" + work + "}", 2,
        "exclusive names one flow class");
  fails(R"({"stages": 2, "channels": {"exclusive": "sync"}, )" + work + "}", 2,
        "exclusive is one of fwd_prop, bwd_prop, grad_sync");
  fails(R"({"stages": 2, "schedule": "interleaved", )" + work + "}", 2, "schedule is \"gpipe\" or \"1f1b\"");
  fails(R"({"stages": 2, "stage": 2, )" + work + "}", 2, "unknown key \"stage\"");
  fails(R"({"stages": 2, "partition": "greedy"})", 2, "partition is uniform, time, memory, balanced or a list");
  fails(R"({"stages": 2, "partition": [3, 0]})", 2, "partition[1] is 0: every stage needs at least one layer");
  fails(R"({"stages": 2, "partition": [3, 3, 3]})", 2, "partition lists 3 stages' layer counts, stages is 2");
  fails(R"({"stages": 2, "micro_batches": 4, "sync_every": 5, )" + work + "}", 4, "sync_every (5) is more than");
  fails(R"({"stages": 4, "micro_batches": 64, )" + work + "}", 8192, "GPUs × micro_batches is 524288, at most 262144");
  CHECK(parallel(R"({"stages": 4, )" + work + "}", 4096).setup.groups == 1024);
}

namespace {

Config model_config(const std::string& parallel) {
  return parse_config(nlohmann::json::parse(R"({"training": {"world_size": 4, "global_batch": 32, "steps": 3},
                                                "policies": ["static", "sorted"], "parallel": )" +
                                            parallel + "}"),
                      "c.json", "");
}

}  // namespace

TEST_CASE("FSDP's keys in a pipeline job are refused as its parallel section's business; their defaults pass") {
  const auto job = [](const nlohmann::json& training) {
    nlohmann::json doc = nlohmann::json::parse(R"({"training": {"world_size": 4, "steps": 3},
                                                   "parallel": {"stages": 2, "abstract": {}}})");
    doc["training"].update(training);
    return parse_config(doc, "c.json", "");
  };
  for (const auto& item : {std::pair<const char*, nlohmann::json>{"shard_group", 2},
                                   {"wrap", "root"},
                                   {"forward_prefetch", 2},
                                   {"reshard_after_forward", false},
                                   {"no_sync", true}}) {
    const auto& key = item.first;  // named, not bound: clang 14 captures no binding
    const auto& value = item.second;
    CAPTURE(key);
    const std::string says = "c.json: training: " + std::string(key) +
                             " is sharded data parallelism's (data_parallel \"fsdp\" or \"hybrid\"); a pipeline "
                             "job's data parallelism is its parallel section's data_parallel (ddp or zero2)";
    CHECK_THROWS_WITH_AS(job({{key, value}}), doctest::Contains(says.c_str()), InputError);
  }
  CHECK_NOTHROW(job({{"wrap", "layer"}, {"no_sync", false}, {"forward_prefetch", 1}}));  // a printed config's
}

TEST_CASE("model mode: ZeRO-2's reduce-scatter and all-gather move what DDP's allreduce moves") {
  const auto zero2 = simulate_parallel(model_config(R"({"stages": 2, "micro_batches": 4, "data_parallel": "zero2"})"));
  const auto ddp = simulate_parallel(model_config(R"({"stages": 2, "micro_batches": 4, "data_parallel": "ddp"})"));
  REQUIRE(zero2.size() == 2);  // a column per policy
  CHECK(zero2[0].label == "static");
  const auto sync = static_cast<std::size_t>(FlowClass::grad_sync);
  CHECK(zero2[0].flows[sync].volume == doctest::Approx(ddp[0].flows[sync].volume).epsilon(1e-12));
  // a reduce-scatter and an all-gather, each a phase of one flow per GPU, against one allreduce
  CHECK(zero2[0].flows[sync].transfers == 2 * ddp[0].flows[sync].transfers);
  for (std::size_t s = 0; s < 2; ++s) CHECK(zero2[0].stage_mem_mib[s] < ddp[0].stage_mem_mib[s]);
}

TEST_CASE("model mode: ZeRO-2 divides the optimizer's update over the groups, and keeps the rest whole") {
  const auto mean_step = [](double share, const char* dp) {
    Config c = model_config(std::string(R"({"stages": 2, "micro_batches": 4, "data_parallel": ")") + dp + "\"}");
    auto m = std::make_shared<PerfModel>(*c.model);
    REQUIRE(m->optimizer_ms > 0);
    m->optimizer_update_share = share;
    c.model = m;
    const auto steps = simulate_parallel(c)[0].step_times;
    return std::accumulate(steps.begin(), steps.end(), 0.0) / static_cast<double>(steps.size());
  };
  CHECK(mean_step(0, "zero2") > mean_step(1, "zero2"));  // nothing sharded: the whole optimizer on every group
  CHECK(mean_step(0.5, "zero2") > mean_step(1, "zero2"));
  CHECK(mean_step(0, "ddp") == mean_step(1, "ddp"));  // DDP steps the whole optimizer either way
}

TEST_CASE("model mode: compute noise and stragglers by GPU, the same draws for every policy") {
  auto with = [](const std::string& simulation) {
    auto doc = nlohmann::json::parse(R"({"training": {"world_size": 4, "global_batch": 32, "steps": 3},
                                         "policies": ["static"], "parallel": {"stages": 2, "micro_batches": 4},
                                         "platform": {"topology": "nvlink"}})");  // compute-bound
    doc["simulation"] = nlohmann::json::parse(simulation);
    return simulate_parallel(parse_config(doc, "c.json", "")).front();
  };
  const auto quiet = with(R"({"noise_sigma": 0})");
  const auto noisy = with(R"({"noise_sigma": 0.2})");
  CHECK(noisy.step_times != quiet.step_times);
  CHECK(with(R"({"noise_sigma": 0.2})").step_times == noisy.step_times);  // seeded
  // GPU 1 (group 0, stage 1) at half speed from step 1: steps 1 and 2 slow down, step 0 does not.
  const auto slow = with(R"({"noise_sigma": 0, "stragglers": [{"rank": 1, "factor": 2, "from_step": 1}]})");
  CHECK(slow.step_times[0] == doctest::Approx(quiet.step_times[0]).epsilon(1e-12));
  for (std::size_t t = 1; t < 3; ++t) CHECK(slow.step_times[t] > 1.3 * quiet.step_times[t]);
}

TEST_CASE("abstract mode: a slow GPU stretches its stage as a pipeline would") {
  // GPipe, 4 stages, 8 micro-batches, no transfers; stage 1 at half speed (f 2, b 4): forward
  // (1 + 2 + 1 + 1) + 7·2, backward (2 + 4 + 2 + 2) + 7·4, 57 in all (33 without).
  auto doc = nlohmann::json::parse(R"({"training": {"world_size": 4, "steps": 1},
      "parallel": {"stages": 4, "schedule": "gpipe", "micro_batches": 8, "abstract": {"transfer": 0}},
      "simulation": {"rank_speed": [1, 2, 1, 1]}})");
  CHECK(simulate_parallel(parse_config(doc, "c.json", "")).front().step_mean == doctest::Approx(57).epsilon(1e-9));
  doc["simulation"].erase("rank_speed");
  CHECK(simulate_parallel(parse_config(doc, "c.json", "")).front().step_mean == doctest::Approx(33).epsilon(1e-9));
}

TEST_CASE("model mode: an explicit partition must cover the model's layers") {
  // Checked while the config is read, before any work.
  CHECK_THROWS_WITH_AS(model_config(R"({"stages": 2, "partition": [1, 1]})"),
                       doctest::Contains("parallel: partition gives 2 layers, model rtx3090-distilbert has"),
                       InputError);
  const Config balanced = model_config(R"({"stages": 2, "partition": "balanced", "schedule": "1f1b"})");
  const auto first = stage_partition(balanced);
  CHECK(first.size() == 2);
  CHECK(first[0] == 0);
}
