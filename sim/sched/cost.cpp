#include "sched/cost.hpp"

#include "common/error.hpp"

namespace ddpsim {

void CostModel::curve(int rank, std::span<const int> running_max, std::span<double> out) const {
  for (std::size_t k = 0; k < out.size(); ++k) out[k] = cost(rank, static_cast<int>(k + 1), running_max[k]);
}

// The batch size is an int converted per value: a size_t's conversion is a branch per value on
// x86-64 without AVX-512, and a double counter is a chain of dependent additions. This way the
// loop vectorises.
void TokensCost::curve(int, std::span<const int> running_max, std::span<double> out) const {
  const int n = static_cast<int>(out.size());
  for (int k = 0; k < n; ++k)
    out[static_cast<std::size_t>(k)] = double(k + 1) * running_max[static_cast<std::size_t>(k)];
}

void TokensSqCost::curve(int, std::span<const int> running_max, std::span<double> out) const {
  const int n = static_cast<int>(out.size());
  for (int k = 0; k < n; ++k) {
    const double t = double(k + 1) * running_max[static_cast<std::size_t>(k)];
    out[static_cast<std::size_t>(k)] = t * t;
  }
}

RankScaledCost::RankScaledCost(std::unique_ptr<CostModel> base, std::vector<double> factors)
    : base_(std::move(base)), factors_(std::move(factors)) {
  for (std::size_t g = 0; g < factors_.size(); ++g)
    if (!(factors_[g] > 0))
      throw InputError("rank speed factor for rank " + std::to_string(g) + " must be > 0, got " +
                       std::to_string(factors_[g]));
}

double RankScaledCost::cost(int rank, int batch, int max_len) const {
  return base_->cost(rank, batch, max_len) * factors_.at(static_cast<std::size_t>(rank));
}

double RankScaledCost::packed_cost(int rank, double tokens, double pairs) const {
  return base_->packed_cost(rank, tokens, pairs) * factors_.at(static_cast<std::size_t>(rank));
}

void RankScaledCost::curve(int rank, std::span<const int> running_max, std::span<double> out) const {
  base_->curve(rank, running_max, out);
  const double f = factors_.at(static_cast<std::size_t>(rank));
  for (double& c : out) c *= f;
}

std::unique_ptr<CostModel> make_token_cost(std::string_view name) {
  if (name == "tokens") return std::make_unique<TokensCost>();
  if (name == "tokens_sq") return std::make_unique<TokensSqCost>();
  if (name == "workload") return std::make_unique<WorkloadCost>();
  throw InputError("unknown cost \"" + std::string(name) +
                   "\" (known: tokens, tokens_sq, workload, and model where a performance model is in force)");
}

}  // namespace ddpsim
