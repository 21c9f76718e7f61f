// FSDP (full sharding) in the fast step engine against hand-computed steps: the ring all-gather
// alone, a compute-bound step (every gather but the first of each pass hidden), a
// communication-bound one (every collective in a row), a slow rank holding the others at each
// unit; the units read from a layout; the memory of a sharded rank; the refusals and notes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "alpha_beta.hpp"
#include "common/error.hpp"
#include "eval/config.hpp"
#include "eval/sharding.hpp"
#include "eval/simulate.hpp"
#include "model/perf_model.hpp"

using namespace ddpsim;

namespace {

// G ranks on the α–β platform; a root unit of 100 MB and `blocks` of 50 MB, each block with an
// equal share of compute and the root a tenth.
EngineSetup fsdp_setup(int G, int blocks) {
  EngineSetup s = test::alpha_beta_setup(G);
  s.sharding = "fsdp";
  s.units.push_back({100e6, 0.1, true});
  for (int b = 0; b < blocks; ++b) s.units.push_back({50e6, 0.9 / blocks, false});
  return s;
}

double gather_ms(int G, double bytes) {
  return test::ring_ms(G, bytes, 1);
}

using test::one_step;

// A config of this training section is refused with a message holding `says`.
void refused(const nlohmann::json& training, const char* says) {
  CHECK_THROWS_WITH_AS(parse_config(nlohmann::json{{"training", training}}, "c.json", ""), doctest::Contains(says),
                       InputError);
}

}  // namespace

TEST_CASE("FSDP's all-gather takes the ring's alpha-beta time") {
  FastEngine engine(fsdp_setup(4, 2));
  CHECK(engine.gather_ms().at(50e6) == doctest::Approx(gather_ms(4, 50e6)).epsilon(1e-9));
  CHECK(engine.gather_ms().at(100e6) == doctest::Approx(gather_ms(4, 100e6)).epsilon(1e-9));
}

TEST_CASE(
    "compute-bound: the root's gather, forward, the last block's re-gather, backward, the root's reduce-scatter") {
  const EngineSetup s = fsdp_setup(4, 4);
  const RankWork w{0, 400, 800, 8};  // ms: every collective but those named hides behind compute
  const auto timing = one_step(s, std::vector<RankWork>(4, w));
  const double expected = gather_ms(4, 100e6) + 400 + gather_ms(4, 50e6) + 800 + gather_ms(4, 100e6) + 8.0 / 4;
  for (const RankTiming& t : timing) {
    CHECK(t.step_ms == doctest::Approx(expected).epsilon(1e-12));
    CHECK(t.opt_ms == doctest::Approx(2.0));  // the optimizer steps a quarter of the state
    CHECK(t.comm_wait_ms == doctest::Approx(expected - 400 - 800 - 2));
  }
}

TEST_CASE("communication-bound: every gather and reduce-scatter in a row on the stream") {
  const EngineSetup s = fsdp_setup(4, 3);
  const RankWork w{0, 1e-6, 1e-6, 0};
  const auto timing = one_step(s, std::vector<RankWork>(4, w));
  // Forward gathers every unit, backward re-gathers the blocks, and every unit is reduce-scattered.
  const double root = gather_ms(4, 100e6), block = gather_ms(4, 50e6);
  const double expected = (root + 3 * block) + 3 * block + (root + 3 * block);
  CHECK(timing[0].step_ms == doctest::Approx(expected).epsilon(1e-6));
}

TEST_CASE("a slow rank holds the others at every unit: the fast ranks' wait is its extra compute and more") {
  const EngineSetup s = fsdp_setup(4, 4);
  const RankWork fast{0, 40, 80, 8}, slow{0, 60, 120, 8};
  const auto timing = one_step(s, {slow, fast, fast, fast});
  CHECK(timing[1].step_ms == doctest::Approx(timing[0].step_ms));  // a synchronous step ends together
  CHECK(timing[1].comm_wait_ms >= timing[0].comm_wait_ms + (60 + 120) - (40 + 80) - 1e-9);
  const auto even = one_step(s, std::vector<RankWork>(4, fast));
  CHECK(timing[0].step_ms > even[0].step_ms + 60 - 1e-9);
}

TEST_CASE("units follow the layout's blocks; a sharded rank holds a G-th of the state, the root and two blocks") {
  const PerfModel m = load_perf_model("h100-distilbert");
  const auto units = shard_units(m);
  REQUIRE(units.size() == 7);  // the root (embeddings, heads) and six blocks
  CHECK(units[0].root);
  double params = 0, share = 0;
  for (const ShardUnit& u : units) params += u.bytes / m.bytes_per_param, share += u.share;
  CHECK(params == doctest::Approx(double(m.total_params())));
  CHECK(share == doctest::Approx(1.0));
  CHECK(units[1].bytes == units[6].bytes);  // blocks alike
  Config c = parse_config(
      nlohmann::json{{"model", "h100-distilbert"}, {"training", {{"data_parallel", "fsdp"}, {"world_size", 8}}}},
      "c.json", "");
  constexpr double MiB = 1024.0 * 1024.0;
  const double state = 66'955'010.0 * 16 / MiB, gathered = (units[0].bytes + 2 * units[1].bytes) / MiB;
  // ZeRO-3's 16Ψ/N of state, plus the gathered units (the root, kept through backward, the block
  // computing and the one prefetched), in place of the model's fixed memory (which,
  // measured, may hold less than the 16Ψ formula: the rank then holds at least the sharded state).
  const double offset = std::max(state / 8 - m.mem_m0_mib, state / 8 - state) + gathered;
  CHECK(c.model->mem_m0_mib == doctest::Approx(m.mem_m0_mib + offset));
  CHECK(c.model->mem_m0_mib >= state / 8 + gathered - 1e-9);
}

TEST_CASE("what a sharded config cannot take yet is refused by its key") {
  const auto refused_fsdp = [](const nlohmann::json& extra, const char* says) {
    nlohmann::json doc = {{"training", {{"data_parallel", "fsdp"}}}};
    doc.merge_patch(extra);
    CHECK_THROWS_WITH_AS(parse_config(doc, "c.json", ""), doctest::Contains(says), InputError);
  };
  refused_fsdp({{"simulation", {{"algorithm", "tree"}}}}, "simulation.algorithm \"tree\" is DDP's allreduce");
  const Config noted =
      parse_config(nlohmann::json{{"training", {{"data_parallel", "fsdp"}, {"overlap", false}}}}, "c.json", "");
  REQUIRE(noted.notes.size() == 1);
  CHECK(noted.notes[0].find("have no effect under training.data_parallel \"fsdp\"") != std::string::npos);
  CHECK(parse_config(nlohmann::json{{"training", {{"data_parallel", "fsdp"}}}}, "c.json", "").notes.empty());
  CHECK_THROWS_WITH_AS(parse_config(nlohmann::json{{"training", {{"data_parallel", "zero3"}}}}, "c.json", ""),
                       doctest::Contains("data_parallel is \"ddp\" (bucketed allreduce), \"zero1\""), InputError);
}

TEST_CASE(
    "backward_prefetch: a block's re-gather hides behind the block after it, waits for its end, or for its "
    "reduce-scatter") {
  // Compute-bound, units 1 to 4 the blocks: backward re-gathers block 4 as forward ends (exposed
  // in every case), then blocks 3, 2 and 1 (the root is kept). backward_pre hides those behind
  // the block after each; backward_post issues each as that block ends, so all 3 are exposed;
  // none issues each after that block's reduce-scatter, so 3 are exposed behind one each.
  const RankWork w{0, 400, 800, 8};
  const double root = gather_ms(4, 100e6), block = gather_ms(4, 50e6);
  const double pre = root + 400 + block + 800 + root + 8.0 / 4;
  EngineSetup s = fsdp_setup(4, 4);
  CHECK(one_step(s, std::vector<RankWork>(4, w))[0].step_ms == doctest::Approx(pre).epsilon(1e-12));
  s.backward_prefetch = "backward_post";
  CHECK(one_step(s, std::vector<RankWork>(4, w))[0].step_ms == doctest::Approx(pre + 3 * block).epsilon(1e-12));
  s.backward_prefetch = "none";
  CHECK(one_step(s, std::vector<RankWork>(4, w))[0].step_ms == doctest::Approx(pre + 6 * block).epsilon(1e-12));
  // Communication-bound, every collective is in a row whatever the order.
  const RankWork tiny{0, 1e-6, 1e-6, 0};
  const double all = one_step(fsdp_setup(4, 4), std::vector<RankWork>(4, tiny))[0].step_ms;
  CHECK(one_step(s, std::vector<RankWork>(4, tiny))[0].step_ms == doctest::Approx(all).epsilon(1e-6));
  refused({{"data_parallel", "fsdp"}, {"backward_prefetch", "BACKWARD_PRE"}},
          "c.json: training: backward_prefetch is FSDP's BackwardPrefetch");
  refused({{"backward_prefetch", "none"}}, "backward_prefetch sets FSDP's re-gathers");
}

TEST_CASE("forward_prefetch: gathers issued further ahead fill the stream where it would idle") {
  // A root of half the compute, then 4 blocks of an eighth whose gathers take B, twice a block's
  // forward. Depth 1: each block's gather starts as the block before begins, so all 4 are
  // exposed by B/2 after the root's forward: forward ends at R + 5.5B. Depth 2 issues block 1's
  // and 2's during the root's forward, so the stream runs without a break from R: R + 4.5B.
  // Deeper cannot help: the stream is then never idle.
  EngineSetup s = test::alpha_beta_setup(4);
  s.sharding = "fsdp";
  s.units.push_back({100e6, 0.5, true});
  for (int b = 0; b < 4; ++b) s.units.push_back({50e6, 0.125, false});
  const double B = gather_ms(4, 50e6);
  const RankWork w{0, 4 * B, 8 * B, 8};
  auto step = [&](int depth) {
    s.forward_prefetch = depth;
    return one_step(s, std::vector<RankWork>(4, w))[0].step_ms;
  };
  const double one = step(1), two = step(2), three = step(3);
  CHECK(one - two == doctest::Approx(B).epsilon(1e-9));
  CHECK(three == doctest::Approx(two).epsilon(1e-12));

  // Memory: the root, the computing unit and the N largest ahead of it.
  auto offset = [](int depth) {
    return parse_config(nlohmann::json{{"model", "h100-distilbert"},
                                       {"training",
                                        {{"data_parallel", "fsdp"}, {"world_size", 8}, {"forward_prefetch", depth}}}},
                        "c.json", "")
        .model->mem_m0_mib;
  };
  const auto units = shard_units(load_perf_model("h100-distilbert"));
  CHECK(offset(3) - offset(1) == doctest::Approx(2 * units[1].bytes / (1024.0 * 1024.0)));
  CHECK(offset(64) - offset(1) == doctest::Approx(4 * units[1].bytes / (1024.0 * 1024.0)));  // all 6 blocks
  refused({{"data_parallel", "fsdp"}, {"forward_prefetch", true}},
          "c.json: training: forward_prefetch is how many units forward gathers ahead");
  refused({{"data_parallel", "fsdp"}, {"forward_prefetch", 0}}, "forward_prefetch");
  refused({{"data_parallel", "fsdp"}, {"forward_prefetch", 2.0}},
          "to 64 (FSDP2's set_modules_to_forward_prefetch), got 2.0 (written without a decimal point or exponent)");
  refused({{"forward_prefetch", 2}}, "forward_prefetch sets FSDP's gathers ahead");
}

TEST_CASE("backward_prefetch_depth: re-gathers issued further ahead in backward, until none is left to issue") {
  // A root of half the compute, then 4 blocks of an eighth; gathers and reduce-scatters take B;
  // backward is 7B, a block's 0.875B. Depth 1: each block's re-gather waits behind the reduce-
  // scatter of the block after it, so the root's backward begins at 6B + x and the step ends with
  // its reduce-scatter. Depth 2 issues two re-gathers as the last block begins, depth 3 all
  // three: each saves B, as worked by hand; depth 4 has none left to issue.
  EngineSetup s = test::alpha_beta_setup(4);
  s.sharding = "fsdp";
  s.units.push_back({100e6, 0.5, true});
  for (int b = 0; b < 4; ++b) s.units.push_back({50e6, 0.125, false});
  const double B = gather_ms(4, 50e6);
  const RankWork w{0, 4 * B, 7 * B, 8};
  auto step = [&](int depth) {
    s.backward_prefetch_depth = depth;
    return one_step(s, std::vector<RankWork>(4, w))[0].step_ms;
  };
  const double one = step(1), two = step(2), three = step(3), four = step(4);
  CHECK(one - two == doctest::Approx(B).epsilon(1e-9));
  CHECK(two - three == doctest::Approx(B).epsilon(1e-9));
  CHECK(four == doctest::Approx(three).epsilon(1e-12));

  // Memory: the root, the computing unit and the deeper prefetch's largest others.
  auto offset = [](int forward, int backward) {
    return parse_config(nlohmann::json{{"model", "h100-distilbert"},
                                       {"training",
                                        {{"data_parallel", "fsdp"},
                                         {"world_size", 8},
                                         {"forward_prefetch", forward},
                                         {"backward_prefetch_depth", backward}}}},
                        "c.json", "")
        .model->mem_m0_mib;
  };
  const auto units = shard_units(load_perf_model("h100-distilbert"));
  CHECK(offset(1, 3) - offset(1, 1) == doctest::Approx(2 * units[1].bytes / (1024.0 * 1024.0)));
  CHECK(offset(3, 3) == offset(1, 3));
  refused({{"data_parallel", "fsdp"}, {"backward_prefetch_depth", 1.5}},
          "c.json: training: backward_prefetch_depth is how many units backward re-gathers ahead");
  refused({{"data_parallel", "fsdp"}, {"backward_prefetch_depth", 65}}, "backward_prefetch_depth");
  refused({{"data_parallel", "fsdp"}, {"backward_prefetch", "backward_post"}, {"backward_prefetch_depth", 2}},
          "backward_prefetch_depth deepens backward_prefetch \"backward_pre\"'s re-gathers; backward_prefetch is "
          "\"backward_post\"");
  refused({{"backward_prefetch_depth", 2}}, "backward_prefetch_depth sets FSDP's re-gathers ahead");
}

TEST_CASE("a sharding key the config leaves nothing to act on gets a note, and indeed changes no step") {
  const nlohmann::json base = {{"model", "h100-distilbert"},
                               {"training", {{"data_parallel", "fsdp"}, {"world_size", 4}, {"global_batch", 32}}}};
  const auto config = [&](const nlohmann::json& training) {
    nlohmann::json doc = base;
    doc["training"].update(training);
    return parse_config(doc, "c.json", "");
  };
  const auto notes = [&](const nlohmann::json& training) {
    std::string all;
    for (const std::string& note : config(training).notes) all += note + "\n";
    return all;
  };
  // Whether two settings give every rank-step the same time, to a picosecond: SimGrid's clock
  // runs on across a process's runs, so a collective measured later can differ in its last bit.
  const auto same_steps = [&](const nlohmann::json& a, const nlohmann::json& b) {
    const auto steps = [&](const nlohmann::json& training) {
      Config c = config(training);
      c.training.steps = 5;
      const auto dataset = make_length_source(c.data, c.training.max_length)->dataset(c.training.seed);
      return simulate(c, dataset, {0, 0}).runs.front().rows;
    };
    const auto x = steps(a), y = steps(b);
    return x.size() == y.size() && std::ranges::equal(x, y, [](const RankStep& p, const RankStep& q) {
             return std::abs(p.step_ms - q.step_ms) < 1e-9;
           });
  };
  const nlohmann::json one_unit = {
      {"wrap", "root"}, {"reshard_after_forward", false}, {"forward_prefetch", 2}, {"backward_prefetch", "none"}};
  CHECK(notes(one_unit) ==
        "training.reshard_after_forward, training.forward_prefetch and training.backward_prefetch have no effect: "
        "the model is one unit (training.wrap), gathered once and kept through backward\n");
  CHECK(same_steps(one_unit, {{"wrap", "root"}}));
  const nlohmann::json two_units = {{"wrap", "size"}, {"min_num_params", 3e7}};  // a root and one module
  nlohmann::json post = two_units;
  post["backward_prefetch"] = "backward_post";
  CHECK(notes(post) ==
        "training.backward_prefetch has no effect: with one unit besides the root (training.wrap), backward "
        "re-gathers that unit alone, as it begins\n");
  CHECK(same_steps(post, two_units));
  const nlohmann::json kept = {{"reshard_after_forward", false}, {"backward_prefetch_depth", 2}};
  CHECK(notes(kept) ==
        "training.backward_prefetch_depth has no effect: with training.reshard_after_forward false "
        "every unit stays gathered from its forward to its backward, so backward re-gathers nothing\n");
  CHECK(same_steps(kept, {{"reshard_after_forward", false}}));
  CHECK(notes({{"reshard_after_forward", false}, {"forward_prefetch", 2}}).empty());  // forward's still acts
  CHECK(notes({{"no_sync", true}}).find("training.no_sync has no effect: a step of one micro-batch") == 0);
  CHECK(same_steps({{"no_sync", true}}, nlohmann::json::object()));
  CHECK_FALSE(same_steps({{"backward_prefetch", "none"}}, nlohmann::json::object()));  // the check can tell
  CHECK(notes({{"no_sync", true}, {"micro_batches", 2}}).empty());
  CHECK(notes({{"backward_prefetch_depth", 2}, {"forward_prefetch", 3}}).empty());
}
