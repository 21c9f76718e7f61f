// minmax, the study's policy: per-step cost curves from each rank's prefetch buffer, solved by
// ExactMinMaxSolver (or the study's enumeration), at G = 1,024 within a fraction of a millisecond.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <span>

#include "common/error.hpp"
#include "sched/cost.hpp"
#include "sched/minmax_solver.hpp"
#include "sched/policy_detail.hpp"
#include "sched/policy_options.hpp"

namespace ddpsim::policy_detail {

namespace {

// The study's method (docs/method.md, "The min-max allocation"): each rank offers the first k of its K buffered samples
// at cost c_g(k); the solver picks b_g minimising the largest cost.
class MinMaxPolicy final : public Scheduler {
 public:
  MinMaxPolicy(const StepShape& s, PolicyOptions& options) : shape_(s) {
    const std::string cost = options.text("cost", "tokens", {"tokens", "tokens_sq", "workload", "model"});
    if (cost == "model") {
      if (!s.time_cost)
        throw InputError(
            "minmax: cost=model needs a performance model: use ddpsim run or compare (config key \"model\")");
      cost_ = s.time_cost;
    } else {
      cost_ = make_token_cost(cost);
    }
    K_ = options.integer("buffer", 64, 1, 65536);
    solver_ = options.text("solver", "exact", {"exact", "enumerate"});
    if (solver_ != "exact" && solver_ != "enumerate")
      throw InputError("minmax: unknown solver \"" + solver_ + "\" (known: exact, enumerate)");
    // Enumeration visits up to C(B−1, G−1) allocations a step: refuse what would never finish.
    const double log_allocations = std::lgamma(s.B) - std::lgamma(s.G) - std::lgamma(s.B - s.G + 1);
    if (solver_ == "enumerate" && s.B >= s.G && log_allocations > std::log(1e7)) {
      char count[32];
      std::snprintf(count, sizeof count, "%.3g", std::exp(log_allocations));
      throw InputError("minmax: solver=enumerate would visit up to " + std::string(count) +
                       " allocations a step at G=" + std::to_string(s.G) + ", B=" + std::to_string(s.B) +
                       " (at most 1e7); solver=exact finds the same optimum");
    }
    curves_.reset(s.G, K_);
    curves_.set_whole(cost_->whole());
    for (int g = 0; g < s.G; ++g) curves_.set_size(g, std::min(K_, s.cap(g)));
    check_minmax_feasible(curves_, s.B);
    running_max_.resize(static_cast<std::size_t>(LANES) * static_cast<std::size_t>(K_));
  }
  std::size_t buffer_size() const override { return static_cast<std::size_t>(K_); }
  std::string solver() const override { return solver_; }

  void plan(RankBuffers& buffers, StepPlan& out) override {
    for (int g = 0; g < shape_.G; ++g) {
      const auto lengths = buffers.lengths(g);
      curves_.set_size(g, std::min({K_, shape_.cap(g), static_cast<int>(lengths.size())}));
    }
    if (shape_.packed) {
      for (int g = 0; g < shape_.G; ++g) packed_curve(g, buffers.lengths(g));
    } else {
      for (int g = 0; g < shape_.G; g += LANES) padded_curves(g, buffers);
    }
    if (solver_ == "exact") {
      take(buffers, exact_.solve(curves_, shape_.B).batch, out);
    } else {
      take(buffers, solve_minmax_enumerate(curves_, shape_.B).batch, out);
    }
  }

 private:
  void take(RankBuffers& buffers, const std::vector<int>& batch, StepPlan& out) const {
    reset_plan(out, shape_.G);
    for (int g = 0; g < shape_.G; ++g)
      buffers.take(g, static_cast<std::size_t>(batch[static_cast<std::size_t>(g)]),
                   out.batches[static_cast<std::size_t>(g)]);
    finish_plan(out);
  }

  static constexpr int LANES = 4;

  // Costs by running maximum, LANES ranks at a time: a running maximum is a chain of dependent
  // steps, and four chains side by side keep the core busy (one at a time, it was a fifth of a
  // decision at G = 1,024).
  void padded_curves(int first, const RankBuffers& buffers) {
    const int lanes = std::min(LANES, shape_.G - first);
    const auto K = static_cast<std::size_t>(K_);
    std::array<const std::int32_t*, LANES> len{};
    std::array<int, LANES> longest{}, n{};
    int common = K_;
    for (int j = 0; j < lanes; ++j) {
      len[static_cast<std::size_t>(j)] = buffers.lengths(first + j).data();
      n[static_cast<std::size_t>(j)] = curves_.size(first + j);
      common = std::min(common, n[static_cast<std::size_t>(j)]);
    }
    if (lanes < LANES) common = 0;
    for (int k = 0; k < common; ++k)
      for (std::size_t j = 0; j < LANES; ++j)
        running_max_[j * K + static_cast<std::size_t>(k)] = longest[j] = std::max(longest[j], len[j][k]);
    for (std::size_t j = 0; j < static_cast<std::size_t>(lanes); ++j) {
      for (int k = common; k < n[j]; ++k)
        running_max_[j * K + static_cast<std::size_t>(k)] = longest[j] = std::max(longest[j], len[j][k]);
      const int g = first + static_cast<int>(j);
      cost_->curve(g, {running_max_.data() + j * K, static_cast<std::size_t>(n[j])},
                   curves_.row(g).first(static_cast<std::size_t>(n[j])));
    }
  }

  void packed_curve(int g, std::span<const std::int32_t> lengths) {
    auto row = curves_.row(g);
    double tokens = 0, pairs = 0;
    for (int k = 0; k < curves_.size(g); ++k) {
      const double len = lengths[static_cast<std::size_t>(k)];
      tokens += len;
      pairs += len * len;
      row[static_cast<std::size_t>(k)] = cost_->packed_cost(g, tokens, pairs);
    }
  }

  StepShape shape_;
  std::shared_ptr<const CostModel> cost_;
  int K_ = 64;
  std::string solver_;
  CostCurves curves_;
  std::vector<int> running_max_;
  ExactMinMaxSolver exact_;
};

}  // namespace

std::unique_ptr<Scheduler> make_minmax(const StepShape& shape, PolicyOptions& options) {
  return std::make_unique<MinMaxPolicy>(shape, options);
}

}  // namespace ddpsim::policy_detail
