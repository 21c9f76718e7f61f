// The policies of docs/method.md, "Policy names" behind the Scheduler interface, and the factory that
// validates a run's shape against each one's constraints before the first step.
#include <algorithm>
#include <cctype>
#include <iterator>
#include <set>
#include <type_traits>
#include <utility>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "sched/cost.hpp"
#include "sched/karmarkar_karp.hpp"
#include "sched/policy_catalogue.hpp"
#include "sched/policy_detail.hpp"
#include "sched/policy_options.hpp"
#include "sched/scheduler.hpp"
#include "sched/verl_balance.hpp"

namespace ddpsim {

namespace policy_detail {

void finish_plan(StepPlan& plan) {
  const auto G = plan.batches.size();
  std::size_t total = 0;
  for (const auto& batch : plan.batches) total += batch.size();
  plan.global_batch = static_cast<int>(total);
  plan.loss_weights.resize(G);
  for (std::size_t g = 0; g < G; ++g) plan.loss_weights[g] = double(G) * double(plan.batches[g].size()) / double(total);
}

void reset_plan(StepPlan& plan, int G) {
  plan.batches.resize(static_cast<std::size_t>(G));
  for (auto& batch : plan.batches) batch.clear();
  plan.micro_sizes.clear();
}

}  // namespace policy_detail

namespace {

using policy_detail::finish_plan;
using policy_detail::reset_plan;

std::string shape_text(const StepShape& s) {
  return "G=" + std::to_string(s.G) + ", B=" + std::to_string(s.B);
}

void require_divisible(const std::string& policy, const StepShape& s) {
  if (s.B % s.G != 0)
    throw InputError(policy + ": global batch B=" + std::to_string(s.B) +
                     " is not divisible by G=" + std::to_string(s.G) + " ranks (it gives every rank B/G samples)");
  for (int g = 0; g < s.G; ++g)
    if (s.B / s.G > s.cap(g))
      throw InputError(policy + ": B/G=" + std::to_string(s.B / s.G) +
                       " samples exceed b_max=" + std::to_string(s.cap(g)) + " of rank " + std::to_string(g));
}

// Every rank takes its next B/G samples: PyTorch DDP with a DistributedSampler.
class StaticPolicy final : public Scheduler {
 public:
  explicit StaticPolicy(const StepShape& s) : shape_(s) { require_divisible("static", s); }
  std::size_t buffer_size() const override { return static_cast<std::size_t>(shape_.B / shape_.G); }
  void plan(RankBuffers& buffers, StepPlan& out) override {
    reset_plan(out, shape_.G);
    for (int g = 0; g < shape_.G; ++g) buffers.take(g, buffer_size(), out.batches[static_cast<std::size_t>(g)]);
    finish_plan(out);
  }

 private:
  StepShape shape_;
};

// VeRL's balance_batch: draw the global batch as static would, then re-partition it into
// G equal-count parts whose per-sample cost sums are as even as largest differencing gets.
class KarmarkarKarpPolicy final : public Scheduler {
 public:
  KarmarkarKarpPolicy(const StepShape& s, PolicyOptions& options) : shape_(s) {
    require_divisible("kk", s);
    const std::string cost = options.text("cost", "tokens", {"tokens", "tokens_sq", "workload"});
    if (cost != "tokens" && cost != "tokens_sq" && cost != "workload")
      throw InputError("kk: unknown cost \"" + cost +
                       "\" (known: tokens = Σ length, tokens_sq = Σ length², workload = Σ 24576·length + length²)");
    cost_ = make_token_cost(cost);
    for (int len = 0; len <= std::max(0, s.max_length); ++len)
      weight_of_length_.push_back(cost_->packed_cost(0, len, double(len) * len));
  }
  std::size_t buffer_size() const override { return static_cast<std::size_t>(shape_.B / shape_.G); }
  void plan(RankBuffers& buffers, StepPlan& out) override {
    pool_.clear();
    for (int g = 0; g < shape_.G; ++g) buffers.take(g, buffer_size(), pool_);
    weights_.resize(pool_.size());
    for (std::size_t i = 0; i < pool_.size(); ++i) {
      const int len = pool_[i].len;
      weights_[i] = static_cast<std::size_t>(len) < weight_of_length_.size()
                        ? weight_of_length_[static_cast<std::size_t>(len)]
                        : cost_->packed_cost(0, len, double(len) * len);
    }
    const std::span<const int> parts = kk_.partition(weights_, shape_.G);
    const std::size_t per_rank = buffer_size();
    reset_plan(out, shape_.G);
    for (std::size_t g = 0; g < out.batches.size(); ++g) {
      auto& batch = out.batches[g];
      batch.resize(per_rank);
      for (std::size_t i = 0; i < per_rank; ++i) batch[i] = pool_[static_cast<std::size_t>(parts[g * per_rank + i])];
    }
    finish_plan(out);
  }

 private:
  StepShape shape_;
  std::unique_ptr<CostModel> cost_;       // of one sample, alone
  std::vector<double> weight_of_length_;  // cost_ of a sample of each length up to max_length
  std::vector<Sample> pool_;
  std::vector<double> weights_;
  KarmarkarKarp kk_;
};

// Hugging Face group_by_length: draw `mega` global batches at once, sort them longest first,
// cut into global batches, and deal each out as G contiguous slices of similar lengths.
class SortedPolicy final : public Scheduler {
 public:
  SortedPolicy(const StepShape& s, PolicyOptions& options) : shape_(s) {
    require_divisible("sorted", s);
    mega_ = options.integer("mega", 50, 1, 100000);
  }
  std::size_t buffer_size() const override { return static_cast<std::size_t>(mega_) * (shape_.B / shape_.G); }
  void plan(RankBuffers& buffers, StepPlan& out) override {
    if (next_ == pending_.size()) draw_mega_batch(buffers);
    const auto per_rank = static_cast<std::ptrdiff_t>(shape_.B / shape_.G);
    reset_plan(out, shape_.G);
    for (auto& batch : out.batches) {
      const auto first = pending_.begin() + static_cast<std::ptrdiff_t>(next_);
      batch.assign(first, first + per_rank);
      next_ += static_cast<std::size_t>(per_rank);
    }
    finish_plan(out);
  }

 private:
  // Longest first, in arrival order among equal lengths: std::stable_sort's order, by counting
  // (a mega-batch at G = 16,384 is 13 M samples, whose merge sort was a twentieth of a run).
  void draw_mega_batch(RankBuffers& buffers) {
    pool_.clear();
    for (int g = 0; g < shape_.G; ++g) buffers.take(g, buffer_size(), pool_);
    int longest = INT32_MIN, shortest = INT32_MAX;
    for (const Sample& x : pool_) longest = std::max(longest, x.len), shortest = std::min(shortest, x.len);
    pending_.resize(pool_.size());
    next_ = 0;
    if (pool_.empty()) return;
    const auto rank_of = [&](const Sample& x) { return static_cast<std::size_t>(std::int64_t{longest} - x.len); };
    if (rank_of(Sample{0, 0, shortest}) > (std::size_t{1} << 22)) {  // lengths too spread out to count
      std::copy(pool_.begin(), pool_.end(), pending_.begin());
      std::stable_sort(pending_.begin(), pending_.end(),
                       [](const Sample& a, const Sample& b) { return a.len > b.len; });
      return;
    }
    starts_.assign(rank_of(Sample{0, 0, shortest}) + 1, 0);
    for (const Sample& x : pool_) ++starts_[rank_of(x)];
    std::size_t at = 0;
    for (auto& start : starts_) at += std::exchange(start, at);
    for (const Sample& x : pool_) pending_[starts_[rank_of(x)]++] = x;
  }

  StepShape shape_;
  int mega_ = 50;
  std::vector<Sample> pool_;
  std::vector<Sample> pending_;  // the sorted mega-batch; B samples a step dealt out from next_
  std::size_t next_ = 0;
  std::vector<std::size_t> starts_;  // per length, longest first: where its samples go
};

// fairseq's max_tokens: each rank takes buffered samples in arrival order while its padded
// tokens k·max_len (packed: its tokens Σ s) stay within the budget, so the global batch varies
// per step.
class TokenBudgetPolicy final : public Scheduler {
 public:
  TokenBudgetPolicy(const StepShape& s, PolicyOptions& options) : shape_(s) {
    // Twice max_length by default (512 at 256): every sample fits, and a longer max_length never
    // leaves the default behind.
    max_tokens_ = options.integer("max_tokens", static_cast<int>(std::min(2LL * s.max_length, 1000000LL)), 1);
    options.note_default("max_tokens", "twice max_length");
    K_ = options.integer("buffer", 64, 1, 65536);
    if (max_tokens_ < s.max_length)
      throw InputError("token_budget: max_tokens=" + std::to_string(max_tokens_) + " is below max_length=" +
                       std::to_string(s.max_length) + ", so a longest sample could never be scheduled");
  }
  std::size_t buffer_size() const override { return static_cast<std::size_t>(K_); }
  void plan(RankBuffers& buffers, StepPlan& out) override {
    reset_plan(out, shape_.G);
    for (int g = 0; g < shape_.G; ++g) {
      const auto lengths = buffers.lengths(g);
      const int limit = std::min({K_, shape_.cap(g), static_cast<int>(lengths.size())});
      // Padded, k samples cost k · (longest); packed, Σ s.
      int k = 0, longest = 0;
      std::int64_t tokens = 0;
      auto fits = [&](int len) {
        return shape_.packed ? tokens + len <= max_tokens_ : (k + 1) * std::max(longest, len) <= max_tokens_;
      };
      while (k < limit && fits(lengths[static_cast<std::size_t>(k)])) {
        longest = std::max(longest, lengths[static_cast<std::size_t>(k)]);
        tokens += lengths[static_cast<std::size_t>(k++)];
      }
      buffers.take(g, static_cast<std::size_t>(std::max(k, 1)), out.batches[static_cast<std::size_t>(g)]);
    }
    finish_plan(out);
  }

 private:
  StepShape shape_;
  int max_tokens_ = 512;
  int K_ = 64;
};

// VeRL's dynamic batching (sched/verl_balance.hpp) on the global batch static would draw.
class VerlPolicy final : public Scheduler {
 public:
  VerlPolicy(const StepShape& s, PolicyOptions& options) : shape_(s) {
    require_divisible("verl", s);
    o_.max_token_len = options.integer("max_token_len", o_.max_token_len, 1, INT32_MAX);
    o_.linear = options.integer("linear", static_cast<int>(o_.linear), 0, INT32_MAX);
    o_.quadratic = options.integer("quadratic", static_cast<int>(o_.quadratic), 0, INT32_MAX);
    o_.balance = on_off(options, "balance");
    o_.micro_balance = on_off(options, "micro_balance");
    if (o_.max_token_len < s.max_length)
      throw InputError("verl: max_token_len=" + std::to_string(o_.max_token_len) +
                       " is below max_length=" + std::to_string(s.max_length) +
                       ", so a longest sample fits no micro-batch (where the data's longest sample is shorter, "
                       "lower max_length to it)");
    if (o_.linear == 0 && o_.quadratic == 0) throw InputError("verl: linear and quadratic are both 0: no workload");
  }
  std::size_t buffer_size() const override { return static_cast<std::size_t>(shape_.B / shape_.G); }
  bool forms_micro_batches() const override { return true; }

  void plan(RankBuffers& buffers, StepPlan& out) override {
    pool_.clear();
    for (int g = 0; g < shape_.G; ++g) buffers.take(g, buffer_size(), pool_);
    lengths_.resize(pool_.size());
    for (std::size_t i = 0; i < pool_.size(); ++i) lengths_[i] = pool_[i].len;
    const VerlPlan plan = verl_balance(lengths_, shape_.G, o_, kk_);
    reset_plan(out, shape_.G);
    out.micro_sizes.resize(plan.size());
    for (std::size_t g = 0; g < plan.size(); ++g)
      for (const auto& micro : plan[g]) {
        for (int i : micro) out.batches[g].push_back(pool_[static_cast<std::size_t>(i)]);
        out.micro_sizes[g].push_back(static_cast<int>(micro.size()));
      }
    finish_plan(out);
  }

 private:
  static bool on_off(PolicyOptions& options, const std::string& key) {
    const std::string value = options.text(key, "on", {"on", "off"});
    if (value != "on" && value != "off")
      throw InputError("verl: option " + key + " must be on or off, got \"" + value + "\"");
    return value == "on";
  }

  StepShape shape_;
  VerlOptions o_;
  std::vector<Sample> pool_;
  std::vector<int> lengths_;
  KarmarkarKarp kk_;
};

// Gradient accumulation over a fixed count: any policy's per-rank batch cut into
// training.micro_batches consecutive micro-batches.
class FixedMicroBatches final : public Scheduler {
 public:
  FixedMicroBatches(std::unique_ptr<Scheduler> inner, int count, std::string how)
      : inner_(std::move(inner)), count_(count), how_(std::move(how)) {}
  std::size_t buffer_size() const override { return inner_->buffer_size(); }
  std::string solver() const override { return inner_->solver(); }
  void plan(RankBuffers& buffers, StepPlan& out) override {
    inner_->plan(buffers, out);
    out.micro_sizes.resize(out.batches.size());
    for (std::size_t g = 0; g < out.batches.size(); ++g) {
      auto& batch = out.batches[g];
      const int b = static_cast<int>(batch.size());
      out.micro_sizes[g] = even_micro_sizes(b, count_);
      if (how_ == "sorted") {
        std::stable_sort(batch.begin(), batch.end(), [](const Sample& x, const Sample& y) { return x.len < y.len; });
      } else if (how_ == "kk" && b > count_) {
        workload_.clear();
        for (const Sample& s : batch) workload_.push_back(VERL_LINEAR * s.len + double(s.len) * s.len);
        std::vector<Sample> formed;
        out.micro_sizes[g].clear();
        for (const auto& items : balanced_micro_batches(workload_, count_, /*light_heavy_light=*/true, kk_)) {
          for (int i : items) formed.push_back(batch[static_cast<std::size_t>(i)]);
          out.micro_sizes[g].push_back(static_cast<int>(items.size()));
        }
        batch = std::move(formed);
      }
    }
  }

 private:
  static constexpr double VERL_LINEAR = 24576;  // calculate_workload's linear term
  std::unique_ptr<Scheduler> inner_;
  int count_;
  std::string how_;
  std::vector<double> workload_;
  KarmarkarKarp kk_;
};

template <class P>
std::unique_ptr<Scheduler> make(const StepShape& shape, PolicyOptions& options) {
  if constexpr (std::is_constructible_v<P, const StepShape&, PolicyOptions&>)
    return std::make_unique<P>(shape, options);
  else
    return std::make_unique<P>(shape);
}

// In the order outputs and messages list them; a name never changes meaning (docs/method.md).
const PolicyEntry POLICIES[] = {
    {"static", "each rank takes its next B/G samples (DDP with a DistributedSampler)", make<StaticPolicy>},
    {"minmax", "the study's method: min-max allocation of B over the ranks' buffers", policy_detail::make_minmax},
    {"kk", "VeRL's balance_batch: equal-count Karmarkar-Karp of the static draw", make<KarmarkarKarpPolicy>},
    {"sorted", "Hugging Face group_by_length: mega-batches sorted by length", make<SortedPolicy>},
    {"token_budget", "fairseq max_tokens: samples while k x longest <= max_tokens", make<TokenBudgetPolicy>},
    {"verl", "VeRL's dynamic batching: kk over ranks, micro-batches under a token cap", make<VerlPolicy>},
};

}  // namespace

std::span<const PolicyEntry> policy_table() {
  return POLICIES;
}

const std::vector<std::string>& micro_batching_names() {
  static const std::vector<std::string> names = {"even", "sorted", "kk"};
  return names;
}

namespace {

[[noreturn]] void throw_unknown_policy(const std::string& name) {
  std::set<std::string, std::less<>> known(policy_names().begin(), policy_names().end());
  std::string lower = name;  // MINMX is minmax's typo too
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const std::string hint = closest_key(lower, known);
  std::string names;
  for (const PolicyEntry& p : POLICIES) names += (names.empty() ? "" : ", ") + std::string(p.name);
  throw InputError("unknown policy \"" + name + "\"" + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)") +
                   "; known: " + names);
}

std::unique_ptr<Scheduler> build(const PolicySpec& spec, const StepShape& shape, PolicyOptions& options) {
  if (std::find(micro_batching_names().begin(), micro_batching_names().end(), shape.micro_batching) ==
      micro_batching_names().end())
    throw InputError("micro-batching is even, sorted or kk, got \"" + shape.micro_batching + "\"");
  if (shape.G < 1) throw InputError("world size G must be ≥ 1, got " + std::to_string(shape.G));
  if (!shape.b_max.empty() && static_cast<int>(shape.b_max.size()) != shape.G)
    throw InputError("b_max lists " + std::to_string(shape.b_max.size()) +
                     " ranks, the run has G=" + std::to_string(shape.G));
  if (spec.name != "token_budget" && shape.B < shape.G)
    throw InputError(spec.name + ": infeasible: global batch B=" + std::to_string(shape.B) +
                     " is smaller than G=" + std::to_string(shape.G) + " (" + shape_text(shape) + ")");
  const auto entry =
      std::find_if(std::begin(POLICIES), std::end(POLICIES), [&](const PolicyEntry& p) { return spec.name == p.name; });
  if (entry == std::end(POLICIES)) throw_unknown_policy(spec.name);
  std::unique_ptr<Scheduler> policy = entry->make(shape, options);
  options.reject_unknown();
  if (shape.micro_batches < 1)
    throw InputError("micro-batches per step must be ≥ 1, got " + std::to_string(shape.micro_batches));
  if (shape.micro_batches > 1 && !policy->forms_micro_batches())
    policy = std::make_unique<FixedMicroBatches>(std::move(policy), shape.micro_batches, shape.micro_batching);
  return policy;
}

}  // namespace

bool forms_own_micro_batches(const std::string& name) {
  return name == "verl";
}

std::string own_micro_batches_refusal(const std::string& count) {
  return count +
         ": verl forms its own micro-batches (as many as its max_token_len tokens per micro-batch need), so the "
         "count would be ignored: leave it out (and size them with verl:max_token_len=N)";
}

void require_known_policy(const std::string& name) {
  if (std::none_of(std::begin(POLICIES), std::end(POLICIES), [&](const PolicyEntry& p) { return name == p.name; }))
    throw_unknown_policy(name);
}

std::unique_ptr<Scheduler> make_scheduler(const PolicySpec& spec, const StepShape& shape) {
  PolicyOptions options(spec);
  return build(spec, shape, options);
}

PolicySpec resolved_policy(const PolicySpec& spec, const StepShape& shape) {
  PolicyOptions options(spec);
  build(spec, shape, options);
  return {spec.name, options.in_force(), {}};
}

}  // namespace ddpsim
