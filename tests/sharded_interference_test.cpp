// A model's interference factors under FSDP and HSDP: a unit's forward or backward runs
// comm_slowdown times slower while its group's all-gathers and reduce-scatters are in flight, and
// those run allreduce_slowdown times slower while a rank of the group computes, as DDP's backward
// and buckets do. Checked against steps worked by hand, against a step ticked through from the
// definitions, fast mode against full, and the note on what is left out (HSDP's allreduce across
// groups).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "alpha_beta.hpp"
#include "eval/config.hpp"
#include "test_data.hpp"

using namespace ddpsim;

namespace {

// Two ranks, FSDP over a root and one block of 1 MB each, each half of the compute.
EngineSetup two_units(double slowdown) {
  EngineSetup s = test::alpha_beta_setup(2);
  s.sharding = "fsdp";
  s.units = {{1e6, 0.5, true}, {1e6, 0.5, false}};
  s.comm_slowdown = slowdown;
  return s;
}

std::vector<PolicyWork> uneven(int G, int micro) {
  std::vector<PolicyWork> policies(2);
  for (std::size_t p = 0; p < 2; ++p) {
    policies[p] = {3, p == 1, {}};
    for (int t = 0; t < 3; ++t)
      for (int g = 0; g < G; ++g) {
        const double f = 1 + 0.37 * ((g * 7 + t * 3) % 5);
        RankWork& w = policies[p].work.emplace_back(RankWork{0.05, 2 * f, 4 * f, 1.5});
        for (int m = 1; m < micro; ++m) w.earlier.push_back({3 - f, 5 + m - f});
      }
  }
  return policies;
}

// An independent reference for one FSDP step (backward_pre, one micro-batch): time advanced in ticks of `dt` ms, the
// issue rules checked at each, each rank's compute progressing at 1/comm_slowdown while a collective is in flight and
// the stream's collective at 1/allreduce_slowdown while a rank computes. Returns when the last reduce-scatter ends.
double ticked_step(const EngineSetup& s, const std::vector<RankWork>& ranks, double gather_ms, double dt) {
  const std::size_t G = ranks.size(), U = s.units.size();
  // A rank's compute is its 2U units, forward 0 … U−1, then backward U−1 … 0; collectives: a
  // unit's gather u, its re-gather U + u, its reduce-scatter 2U + u.
  std::vector<std::size_t> at(G, 0);
  std::vector<double> left(G, -1);  // of the unit in progress; < 0: not begun
  std::vector<char> issued(3 * U), done(3 * U);
  std::vector<std::size_t> queue;
  std::size_t head = 0;
  double stream_left = 0;
  const auto unit = [&](std::size_t i) { return i < U ? i : 2 * U - 1 - i; };
  const auto issue = [&](std::size_t id) {
    if (!issued[id]) queue.push_back(id), issued[id] = 1;
  };
  const auto all = [&](auto pred) {
    for (std::size_t g = 0; g < G; ++g)
      if (!pred(g)) return false;
    return true;
  };
  const auto begun = [&](std::size_t i) {
    return all([&](std::size_t g) { return at[g] > i || (at[g] == i && left[g] >= 0); });
  };
  const auto finished = [&](std::size_t i) { return all([&](std::size_t g) { return at[g] > i; }); };
  const auto ahead = static_cast<std::size_t>(s.forward_prefetch),
             depth = static_cast<std::size_t>(s.backward_prefetch_depth);
  for (std::size_t u = 0; u < ahead; ++u) issue(u);
  for (double t = 0;; t += dt) {
    for (std::size_t u = 0; u + ahead < U; ++u)
      if (begun(u)) issue(u + ahead);
    if (finished(U - 1) && !s.units[U - 1].root) issue(2 * U - 1);
    for (std::size_t k = U; k-- > 0;) {
      if (finished(2 * U - 1 - k)) issue(2 * U + k);
      for (std::size_t j = k; j-- > 0 && j + depth >= k;)
        if (begun(2 * U - 1 - k) && !s.units[j].root) issue(U + j);
    }
    for (std::size_t g = 0; g < G; ++g) {  // a unit begins once its gather is done
      if (left[g] >= 0 || at[g] == 2 * U) continue;
      const std::size_t u = unit(at[g]);
      const bool ready = at[g] < U ? done[u] : s.units[u].root || done[U + u];
      if (ready) left[g] = (at[g] < U ? ranks[g].fwd_ms : ranks[g].bwd_ms) * s.units[u].share;
    }
    const bool in_flight = head < queue.size(), computing = !all([&](std::size_t g) { return left[g] < 0; });
    if (in_flight && stream_left <= 0) stream_left = gather_ms;  // the next collective starts
    if (in_flight && (stream_left -= dt / (computing ? s.allreduce_slowdown : 1)) <= 0) {
      done[queue[head++]] = 1;
      if (std::all_of(done.begin() + 2 * U, done.end(), [](char d) { return d; })) return t + dt;
    }
    for (std::size_t g = 0; g < G; ++g)
      if (left[g] >= 0 && (left[g] -= dt / (in_flight ? s.comm_slowdown : 1)) <= 0) left[g] = -1, ++at[g];
  }
}

}  // namespace

TEST_CASE("both factors against a step ticked through independently from their definitions") {
  EngineSetup s = test::alpha_beta_setup(4);
  s.sharding = "fsdp";
  s.units = {{30e6, 0.1, true}, {30e6, 0.3, false}, {30e6, 0.3, false}, {30e6, 0.3, false}};
  const double gather = test::ring_ms(4, 30e6, 1);  // about 1 ms, as long as a unit's compute
  std::vector<RankWork> ranks;
  for (const double f : {1.0, 1.6, 1.2, 2.1}) ranks.push_back(RankWork{0, 2.5 * f, 5 * f, 0});
  const double dt = 1e-4;
  double plain = 0;
  for (const int prefetch : {1, 2})  // with 2, a collective has two units' compute beside it
    for (const auto& item : {std::pair{1.0, 1.0}, {1.5, 1.0}, {1.0, 1.8}, {1.5, 1.8}}) {
      const auto& comm = item.first;  // named, not bound: clang 14 captures no binding
      const auto& collective = item.second;
      CAPTURE(prefetch);
      CAPTURE(comm);
      CAPTURE(collective);
      s.forward_prefetch = s.backward_prefetch_depth = prefetch;
      s.comm_slowdown = comm, s.allreduce_slowdown = collective;
      const double engine = test::one_step(s, ranks)[0].step_ms;
      CHECK(std::abs(engine - ticked_step(s, ranks, gather, dt)) < 30 * dt);  // the ticks lag by about ten
      if (comm == 1 && collective == 1)
        plain = engine;
      else
        CHECK(engine > plain + 0.3);  // far beyond the ticks' error
    }
}

TEST_CASE("a unit's compute beside its group's collectives grows by (1 - 1/f) of their overlap") {
  // Forward: the root's gather exposed, the block's hidden behind the root's forward. Backward:
  // the block's re-gather exposed (nothing to compute beside it), its reduce-scatter hidden
  // behind the root's backward, the root's exposed. Each hidden collective (g ms) stretches the
  // compute beside it by (1 - 1/f)·g.
  const double F = 40, B = 80, opt = 6, f = 1.5;
  const double g = test::ring_ms(2, 1e6, 1);
  const std::vector<RankWork> ranks(2, RankWork{0, F, B, opt});
  const auto plain = test::one_step(two_units(1), ranks), slowed = test::one_step(two_units(f), ranks);
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    CHECK(plain[r].step_ms == doctest::Approx(3 * g + F + B + opt / 2).epsilon(1e-12));
    CHECK(slowed[r].step_ms == doctest::Approx(3 * g + F + B + opt / 2 + 2 * g * (1 - 1 / f)).epsilon(1e-12));
    // The stretch is compute's, not waiting: each phase reports what it took.
    CHECK(slowed[r].fwd_ms == doctest::Approx(F + g * (1 - 1 / f)).epsilon(1e-12));
    CHECK(slowed[r].bwd_ms == doctest::Approx(B + g * (1 - 1 / f)).epsilon(1e-12));
    CHECK(slowed[r].comm_wait_ms == doctest::Approx(plain[r].comm_wait_ms).epsilon(1e-9));
    CHECK(plain[r].fwd_ms == F);
  }
}

TEST_CASE("compute shorter than the collective beside it runs f times longer, then waits the rest") {
  // The block's gather (g ms) beside a root forward of F/2 < g/f: the forward ends at f·F/2, and
  // the block begins once its gather ends, as without the factor.
  const double g = test::ring_ms(2, 1e6, 1), f = 2, F = g / 4, B = 80;
  const std::vector<RankWork> ranks(2, RankWork{0, F, B, 0});
  const auto plain = test::one_step(two_units(1), ranks), slowed = test::one_step(two_units(f), ranks);
  CHECK(slowed[0].fwd_ms == doctest::Approx(F + F / 2 * (f - 1)).epsilon(1e-12));
  CHECK(slowed[0].step_ms - plain[0].step_ms == doctest::Approx(g * (1 - 1 / f)).epsilon(1e-9));  // the root's backward
}

TEST_CASE("a collective beside the group's compute runs f times slower until the compute it can overlap ends") {
  // The block's gather beside the root's forward, and the block's reduce-scatter beside the
  // root's backward, each of g ms beside g/2 of compute: (g/2)·f = g of the collective done
  // by the time that compute ends, instead of g/2, so each ends g/2·(1 − 1/f) later and delays
  // what waits for it (the block's forward; the root's reduce-scatter). The re-gather and the
  // root's reduce-scatter have no compute left beside them.
  const double g = test::ring_ms(2, 1e6, 1), f = 2;
  const std::vector<RankWork> ranks(2, RankWork{0, g, g, 6});
  EngineSetup slowed = two_units(1);
  slowed.allreduce_slowdown = f;
  const auto plain = test::one_step(two_units(1), ranks), step = test::one_step(slowed, ranks);
  for (std::size_t r = 0; r < 2; ++r) {
    CAPTURE(r);
    // Five collectives of g, and the half-g computes none of them hides (the block's).
    CHECK(plain[r].step_ms == doctest::Approx(6 * g + 3).epsilon(1e-12));
    CHECK(step[r].step_ms - plain[r].step_ms == doctest::Approx(2 * (g / 2) * (1 - 1 / f)).epsilon(1e-9));
    CHECK(step[r].fwd_ms == plain[r].fwd_ms);  // compute is not stretched by this factor
  }
  // Compute that outlasts the collective hides it, slowed or not.
  const std::vector<RankWork> long_compute(2, RankWork{0, 40, 80, 6});
  CHECK(test::one_step(slowed, long_compute)[0].step_ms ==
        doctest::Approx(test::one_step(two_units(1), long_compute)[0].step_ms).epsilon(1e-12));
}

TEST_CASE("fast and full mode slow the same compute and collectives: FSDP and HSDP, micro-batches, jitter, prefetch") {
  // FSDP on 8 ranks of their own links; HSDP in nodes of 8 of a cluster, the replicas' allreduces
  // between the nodes on links no group's collective crosses, as fast mode has it.
  EngineSetup hsdp = test::cluster_setup(32);
  hsdp.sharding = "hybrid";
  hsdp.shard_group = 8;
  EngineSetup fsdp = test::alpha_beta_setup(8);
  fsdp.sharding = "fsdp";
  for (const EngineSetup& base : {fsdp, hsdp})
    for (const int micro : {1, 3})
      for (const char* prefetch : {"backward_pre", "backward_post", "none"}) {
        EngineSetup s = base;
        CAPTURE(s.sharding);
        CAPTURE(micro);
        CAPTURE(prefetch);
        s.backward_prefetch = prefetch;
        s.backward_prefetch_depth = micro;  // 1 or 3 under backward_pre
        s.forward_prefetch = micro == 3 ? 2 : 1;
        s.units.push_back({20e6, 0.1, true});
        for (int b = 0; b < 4; ++b) s.units.push_back({10e6, 0.225, false});
        s.comm_slowdown = 1.7;
        s.allreduce_slowdown = 1.6;
        s.unit_jitter = 0.2;
        s.jitter_seed = 3;
        s.mode = "fast";
        const auto fast = simulate_steps(s, uneven(s.G, micro)).policies;
        s.mode = "full";
        const auto full = simulate_steps(s, uneven(s.G, micro)).policies;
        s.comm_slowdown = s.allreduce_slowdown = 1;
        const auto plain = simulate_steps(s, uneven(s.G, micro)).policies;
        for (std::size_t p = 0; p < fast.size(); ++p)
          for (std::size_t i = 0; i < fast[p].timing.size(); ++i) {
            CAPTURE(i);
            // To SimGrid's nanosecond: its clock ends an activity within its timing precision.
            CHECK(std::abs(full[p].timing[i].step_ms - fast[p].timing[i].step_ms) < 1e-6);
            CHECK(std::abs(full[p].timing[i].bwd_ms - fast[p].timing[i].bwd_ms) < 1e-6);
            CHECK(fast[p].timing[i].fwd_ms + fast[p].timing[i].bwd_ms >
                  plain[p].timing[i].fwd_ms + plain[p].timing[i].bwd_ms);
          }
      }
}

TEST_CASE("notes: HSDP's allreduce across groups neither slows compute nor is slowed; no note where it has none") {
  const auto notes = [](const char* sharding, int S) {
    nlohmann::json doc = {{"model", DDPSIM_SOURCE_DIR "/models/cpu-distilbert-small-2ranks.json"},
                          {"training", {{"data_parallel", sharding}, {"world_size", 16}, {"global_batch", 64}}},
                          {"platform", {{"topology", "cluster"}}}};
    if (S > 0) doc["training"]["shard_group"] = S;
    std::string all;
    for (const std::string& note : parse_config(doc, "c.json", "").notes) all += note + "\n";
    return all;
  };
  CHECK(notes("hybrid", 0).find("comm_slowdown and allreduce_slowdown act between compute and its shard group's") !=
        std::string::npos);  // a node a group
  CHECK(notes("fsdp", 0).find("slowdown") == std::string::npos);
  CHECK(notes("hybrid", 16).find("slowdown") == std::string::npos);  // one group: no replicas
  CHECK(notes("hybrid", 1).find("have no effect under training.shard_group 1") != std::string::npos);
}

TEST_CASE("the HSDP note names only the factors a model has") {
  test::TempDir dir;
  std::ofstream(dir / "spec.json") << nlohmann::json{
      {"hf_config", DDPSIM_SOURCE_DIR "/models/hf/gpt2.json"},
      {"gpu", "h100-sxm"},
      {"allreduce_slowdown", 1.5}}.dump();
  const nlohmann::json doc = {{"model", dir / "spec.json"},
                              {"training", {{"data_parallel", "hybrid"}, {"world_size", 16}, {"global_batch", 64}}},
                              {"platform", {{"topology", "cluster"}}}};
  const std::vector<std::string> notes = parse_config(doc, "c.json", "").notes;
  REQUIRE(notes.size() == 1);
  CHECK(notes[0].find("model spec's allreduce_slowdown acts between compute") != std::string::npos);
  CHECK(notes[0].find("comm_slowdown") == std::string::npos);
}
