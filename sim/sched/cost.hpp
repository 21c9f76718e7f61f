// What a scheduler balances: the predicted cost of a micro-batch of b samples padded to
// length L on rank g, or, with packed sequences (no padding), of Σ s tokens and Σ s²
// attention pairs. Pluggable so that later layers add predicted time from a calibrated
// model, or per-rank speed factors, without touching the policies. Every model must be
// non-decreasing in b and in L: the min-max solver relies on it.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ddpsim {

class CostModel {
 public:
  virtual ~CostModel() = default;
  virtual std::string name() const = 0;
  virtual double cost(int rank, int batch, int max_len) const = 0;
  // A packed micro-batch: `tokens` = Σ s over its samples, `pairs` = Σ s² (varlen attention).
  virtual double packed_cost(int rank, double tokens, double pairs) const = 0;
  // out[k-1] = cost(rank, k, running_max[k-1]) for k = 1..out.size(); one virtual call per
  // rank keeps the per-step cost curves cheap at G = 1024.
  virtual void curve(int rank, std::span<const int> running_max, std::span<double> out) const;
  // True when every cost is a whole number (token counts and their products): the min-max
  // solver's fast path for T* relies on it.
  virtual bool whole() const { return false; }
};

// Padded tokens b·L (the study's proxy).
class TokensCost final : public CostModel {
 public:
  std::string name() const override { return "tokens"; }
  bool whole() const override { return true; }
  double cost(int, int batch, int max_len) const override { return double(batch) * max_len; }
  double packed_cost(int, double tokens, double) const override { return tokens; }
  void curve(int rank, std::span<const int> running_max, std::span<double> out) const override;
};

// (b·L)², the study's second proxy (a negative result worth reproducing).
class TokensSqCost final : public CostModel {
 public:
  std::string name() const override { return "tokens_sq"; }
  bool whole() const override { return true; }
  double cost(int, int batch, int max_len) const override {
    const double t = double(batch) * max_len;
    return t * t;
  }
  double packed_cost(int, double tokens, double) const override { return tokens * tokens; }
  void curve(int rank, std::span<const int> running_max, std::span<double> out) const override;
};

// VeRL's workload estimate, 24576·tokens + pairs (its constants for a 7B model): linear layers
// per token plus attention per token pair, padded (b·L, b·L²) or packed (Σ s, Σ s²).
class WorkloadCost final : public CostModel {
 public:
  std::string name() const override { return "workload"; }
  bool whole() const override { return true; }
  double cost(int, int batch, int max_len) const override {
    return 24576.0 * batch * max_len + double(batch) * max_len * max_len;
  }
  double packed_cost(int, double tokens, double pairs) const override { return 24576.0 * tokens + pairs; }
};

// Another cost scaled per rank: a rank with factor 1.3 is 30% slower (heterogeneous GPUs,
// stragglers).
class RankScaledCost final : public CostModel {
 public:
  RankScaledCost(std::unique_ptr<CostModel> base, std::vector<double> factors);
  std::string name() const override { return base_->name(); }
  double cost(int rank, int batch, int max_len) const override;
  double packed_cost(int rank, double tokens, double pairs) const override;
  void curve(int rank, std::span<const int> running_max, std::span<double> out) const override;

 private:
  std::unique_ptr<CostModel> base_;
  std::vector<double> factors_;
};

// "tokens", "tokens_sq" or "workload"; throws InputError naming the known costs otherwise. (The third
// cost, "model", is predicted time from a performance model: see model/perf_model.hpp.)
std::unique_ptr<CostModel> make_token_cost(std::string_view name);

}  // namespace ddpsim
