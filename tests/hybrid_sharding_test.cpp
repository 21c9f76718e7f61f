// HSDP (full sharding inside groups, replicated across them) and reshard_after_forward in the
// fast step engine, against hand-computed steps: the groups' gathers and the allreduce across
// them take the rings' alpha-beta times; one group is FSDP exactly; a communication-bound step
// is its group's stream plus the last allreduce across groups; without resharding the backward
// gathers go; memory per rank is ZeRO-3's 16Ψ/S plus what stays gathered; the keys' refusals.
#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>

#include "alpha_beta.hpp"
#include "common/error.hpp"
#include "eval/config.hpp"
#include "eval/sharding.hpp"
#include "model/perf_model.hpp"

using namespace ddpsim;

namespace {

// G ranks on the α–β platform, groups of S; a root unit of 100 MB and 3 blocks of 50 MB.
EngineSetup hybrid_setup(int G, int S) {
  EngineSetup s = test::alpha_beta_setup(G);
  s.sharding = S == G ? "fsdp" : "hybrid";
  s.shard_group = S;
  s.units.push_back({100e6, 0.1, true});
  for (int b = 0; b < 3; ++b) s.units.push_back({50e6, 0.3, false});
  return s;
}

// An all-gather inside a group of S, and an allreduce across R groups.
double gather_ms(int S, double bytes) {
  return test::ring_ms(S, bytes, 1);
}
double replica_ms(int R, double bytes) {
  return test::ring_ms(R, bytes, 2);
}

using test::one_step;

const RankWork TINY{0, 1e-6, 1e-6, 0};  // ms: a step all communication

}  // namespace

TEST_CASE("HSDP: groups gather at once in their own rings; shards are allreduced across the groups") {
  FastEngine engine(hybrid_setup(8, 4));
  CHECK(engine.gather_ms().at(50e6) == doctest::Approx(gather_ms(4, 50e6)).epsilon(1e-9));
  CHECK(engine.replica_ms().at(50e6 / 4) == doctest::Approx(replica_ms(2, 50e6 / 4)).epsilon(1e-9));
  CHECK(engine.replica_ms().at(100e6 / 4) == doctest::Approx(replica_ms(2, 100e6 / 4)).epsilon(1e-9));
  CHECK(FastEngine(hybrid_setup(8, 8)).replica_ms().empty());  // one group: FSDP, nothing across
}

TEST_CASE("communication-bound HSDP: the group's stream, then the root's shard allreduced across the groups") {
  const auto timing = one_step(hybrid_setup(8, 4), std::vector<RankWork>(8, TINY));
  const double root = gather_ms(4, 100e6), block = gather_ms(4, 50e6);
  // Each block's allreduce across groups ends before the next reduce-scatter does: only the
  // root's, the last, is exposed.
  REQUIRE(replica_ms(2, 50e6 / 4) < 2 * block);
  const double expected = (root + 3 * block) + 3 * block + (root + 3 * block) + replica_ms(2, 100e6 / 4);
  for (const RankTiming& t : timing) CHECK(t.step_ms == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("a slow rank holds its group at every unit, and the other groups only at the step's end") {
  const RankWork fast{0, 40, 80, 8}, slow{0, 60, 120, 8};
  std::vector<RankWork> ranks(8, fast);
  ranks[0] = slow;
  // When each rank's backward ends, from the step's spans.
  const auto backward_ends = [](EngineSetup s, const std::vector<RankWork>& work) {
    s.timeline_to = 1;
    FastEngine engine(s);
    engine.start_policy();
    PolicyTimes out;
    engine.advance(PolicyWork{1, false, work}, out);
    std::vector<double> ends(8);
    for (const Span& span : out.spans)
      if (span.name == "backward (units)") ends[static_cast<std::size_t>(span.rank)] = span.start_ms + span.dur_ms;
    for (const RankTiming& t : out.timing) CHECK(t.step_ms == doctest::Approx(out.timing[0].step_ms));
    return ends;
  };
  const auto hybrid = backward_ends(hybrid_setup(8, 4), ranks), full = backward_ends(hybrid_setup(8, 8), ranks);
  const auto even = backward_ends(hybrid_setup(8, 4), std::vector<RankWork>(8, fast));
  CHECK(full[5] == doctest::Approx(full[1]));    // FSDP: every rank held by the slow one at every unit
  CHECK(hybrid[1] > even[1] + 10);               // HSDP: its group is
  CHECK(hybrid[5] == doctest::Approx(even[5]));  // and the other group runs as if no rank were slow
  CHECK(one_step(hybrid_setup(8, 4), ranks)[0].opt_ms == doctest::Approx(2.0));  // a quarter of the state
  CHECK(one_step(hybrid_setup(8, 8), ranks)[0].opt_ms == doctest::Approx(1.0));  // an eighth
}

TEST_CASE("one group of every rank is FSDP, step for step") {
  EngineSetup hybrid = hybrid_setup(4, 4);
  hybrid.sharding = "hybrid";
  const RankWork a{0, 40, 80, 8}, b{0, 55, 110, 8};
  const auto h = one_step(hybrid, {a, b, a, a}), f = one_step(hybrid_setup(4, 4), {a, b, a, a});
  for (std::size_t g = 0; g < 4; ++g) CHECK(h[g].step_ms == f[g].step_ms);
}

TEST_CASE("without reshard_after_forward, backward gathers nothing again") {
  EngineSetup s = hybrid_setup(4, 4);
  s.reshard_after_forward = false;
  const auto timing = one_step(s, std::vector<RankWork>(4, TINY));
  const double root = gather_ms(4, 100e6), block = gather_ms(4, 50e6);
  CHECK(timing[0].step_ms == doctest::Approx((root + 3 * block) + (root + 3 * block)).epsilon(1e-6));
}

TEST_CASE("wrap \"root\": the whole model one unit, gathered once and kept through backward") {
  const Config c = parse_config(
      nlohmann::json{{"model", "h100-distilbert"}, {"training", {{"data_parallel", "fsdp"}, {"wrap", "root"}}}},
      "c.json", "");
  const auto units = shard_units(*c.model, "root");
  REQUIRE(units.size() == 1);
  CHECK(units[0].root);
  CHECK(units[0].share == doctest::Approx(1.0));
  CHECK(units[0].bytes == doctest::Approx(double(c.model->total_params()) * c.model->bytes_per_param));
  // A model whose layout names no block cannot be wrapped per layer.
  PerfModel flat = load_perf_model("h100-distilbert");
  for (LayerSpec& layer : flat.layers) layer.name = "flat." + std::to_string(&layer - flat.layers.data());
  CHECK(shard_units(flat).size() == 1);
}

TEST_CASE("HSDP memory: 16 B a parameter over the shard group, plus what stays gathered") {
  const PerfModel m = load_perf_model("h100-distilbert");
  const auto units = shard_units(m);
  constexpr double MiB = 1024.0 * 1024.0;
  const double state = 66'955'010.0 * 16 / MiB;
  double all = 0;
  for (const ShardUnit& u : units) all += u.bytes / MiB;
  const auto m0 = [](const nlohmann::json& training) {
    return parse_config(nlohmann::json{{"model", "h100-distilbert"},
                                       {"training", training},
                                       {"platform", {{"topology", "cluster"}, {"gpus_per_node", 4}}}},
                        "c.json", "")
        .model->mem_m0_mib;
  };
  const Config hybrid = parse_config(nlohmann::json{{"model", "h100-distilbert"},
                                                    {"training", {{"data_parallel", "hybrid"}, {"world_size", 8}}},
                                                    {"platform", {{"topology", "cluster"}, {"gpus_per_node", 4}}}},
                                     "c.json", "");
  CHECK(hybrid.training.shard_group == 4);                                       // a node's GPUs by default
  const double held = (units[0].bytes + units[1].bytes + units[2].bytes) / MiB;  // the root and two blocks
  CHECK(m0({{"data_parallel", "hybrid"}, {"world_size", 8}}) ==
        doctest::Approx(m.mem_m0_mib + std::max(state / 4 - m.mem_m0_mib, state / 4 - state) + held));
  CHECK(m0({{"data_parallel", "hybrid"}, {"world_size", 8}, {"shard_group", 2}}) ==
        doctest::Approx(m.mem_m0_mib + std::max(state / 2 - m.mem_m0_mib, state / 2 - state) + held));
  CHECK(m0({{"data_parallel", "fsdp"}, {"world_size", 8}, {"reshard_after_forward", false}}) ==
        doctest::Approx(m.mem_m0_mib + std::max(state / 8 - m.mem_m0_mib, state / 8 - state) + all));
  // A group of one rank gathers nothing: DDP's memory.
  CHECK(m0({{"data_parallel", "hybrid"}, {"world_size", 8}, {"shard_group", 1}}) == doctest::Approx(m.mem_m0_mib));
}

TEST_CASE("sharding keys a config cannot take are refused by name") {
  const auto refused = [](const nlohmann::json& training, const char* says) {
    CHECK_THROWS_WITH_AS(parse_config(nlohmann::json{{"training", training}}, "c.json", ""), doctest::Contains(says),
                         InputError);
  };
  refused({{"data_parallel", "hybrid"}, {"world_size", 6}, {"shard_group", 4}},
          "training.shard_group 4 does not divide training.world_size 6");
  refused({{"data_parallel", "fsdp"}, {"shard_group", 2}}, "shard_group sizes data_parallel \"hybrid\"'s groups");
  refused({{"shard_group", 2}}, "data_parallel \"ddp\" shards nothing");
  refused({{"reshard_after_forward", false}}, "reshard_after_forward false is FSDP's");
  refused({{"data_parallel", "zero2"}, {"wrap", "root"}}, "wrap sets FSDP's units");
  refused({{"data_parallel", "fsdp"}, {"wrap", "blocks"}}, "wrap is \"layer\"");
  // The defaults are no request under the other kinds: a sweep may set them across kinds.
  CHECK_NOTHROW(
      parse_config(nlohmann::json{{"training", {{"reshard_after_forward", true}, {"wrap", "layer"}}}}, "c.json", ""));
  refused({{"data_parallel", "hybrid"}, {"shard_group", 0}}, "shard_group");
  CHECK_THROWS_WITH_AS(
      parse_config(nlohmann::json{{"training", {{"data_parallel", "hybrid"}, {"world_size", 4}}},
                                  {"platform",
                                   {{"topology", "xml"},
                                    {"file", std::string(DDPSIM_SOURCE_DIR) + "/models/pcie-4x-rtx3090.xml"},
                                    {"hosts", {"gpu0", "gpu1", "gpu2", "gpu3"}}}}},
                   "c.json", ""),
      doctest::Contains("on an xml platform: give training.shard_group"), InputError);
}

TEST_CASE("wrap \"size\": PyTorch's size-based policy over the layout's module tree, children first") {
  PerfModel m = load_perf_model("h100-distilbert");
  m.bytes_per_param = 2;
  m.layers = {{"embed", 30'000'000, 0.1},         {"layers.0.attn", 40'000'000, 0.15},
              {"layers.0.mlp", 80'000'000, 0.25}, {"layers.1.attn", 40'000'000, 0.15},
              {"layers.1.mlp", 80'000'000, 0.25}, {"head", 30'000'000, 0.1}};
  const auto params = [&](const std::vector<ShardUnit>& units) {
    std::vector<double> out;
    for (const ShardUnit& u : units) out.push_back(u.bytes / m.bytes_per_param);
    return out;
  };
  // 1e8 (PyTorch's default): each block is the first module that large; the root keeps the rest.
  auto units = shard_units(m, "size", 1e8);
  CHECK(params(units) == std::vector<double>{60e6, 120e6, 120e6});
  CHECK(units[0].root);
  CHECK(units[0].share == doctest::Approx(0.2));
  CHECK(units[1].share == doctest::Approx(0.4));
  // 7e7: each MLP alone; what the blocks leave (both attentions, 80 M) goes to the root, as
  // "layers" is a module list, which the policy never wraps.
  units = shard_units(m, "size", 7e7);
  CHECK(params(units) == std::vector<double>{140e6, 80e6, 80e6});
  CHECK(units[0].share == doctest::Approx(0.5));
  // Under a module that is no list, what the MLPs leave is a unit, before them (gathered first).
  for (LayerSpec& layer : m.layers)
    if (layer.name.rfind("layers.", 0) == 0) layer.name = "body.block" + layer.name.substr(7);
  units = shard_units(m, "size", 7e7);
  CHECK(params(units) == std::vector<double>{60e6, 80e6, 80e6, 80e6});
  CHECK(units[1].share == doctest::Approx(0.3));
  // Larger than the model: the root holds everything, as FSDP without wrapping.
  CHECK(params(shard_units(m, "size", 1e9)) == std::vector<double>{300e6});
  // A layout of parameter tensors: a module's weight and bias are wrapped together, as its module.
  m.layers = {{"embed.weight", 30'000'000, 0.2}, {"proj.weight", 60'000'000, 0.6}, {"proj.bias", 20'000'000, 0.2}};
  CHECK(params(shard_units(m, "size", 1)) == std::vector<double>{0, 30e6, 80e6});
  CHECK_THROWS_WITH_AS(
      parse_config(nlohmann::json{{"training", {{"data_parallel", "fsdp"}, {"min_num_params", 5}}}}, "c.json", ""),
      doctest::Contains("min_num_params sizes wrap \"size\"'s units; wrap is \"layer\""), InputError);
  CHECK_THROWS_WITH_AS(
      parse_config(nlohmann::json{{"training", {{"data_parallel", "fsdp"}, {"wrap", "size"}, {"min_num_params", 0}}}},
                   "c.json", ""),
      doctest::Contains("min_num_params is a whole parameter count from 1 to 1e15, got 0"), InputError);
  CHECK_THROWS_WITH_AS(parse_config(nlohmann::json{{"training", {{"no_sync", true}}}}, "c.json", ""),
                       doctest::Contains("no_sync picks FSDP's gradient accumulation"), InputError);
}
