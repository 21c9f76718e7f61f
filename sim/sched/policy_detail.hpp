// What the policies' translation units share: the bookkeeping around every decision, and the
// factories of policies that live in files of their own.
#pragma once

#include <memory>

#include "sched/scheduler.hpp"

namespace ddpsim {

class PolicyOptions;

namespace policy_detail {

// Sizes the plan for G ranks with every batch empty.
void reset_plan(StepPlan& plan, int G);
// Sets B_t and the loss weights G·b_g/B_t from the batches chosen.
void finish_plan(StepPlan& plan);

std::unique_ptr<Scheduler> make_minmax(const StepShape& shape, PolicyOptions& options);

}  // namespace policy_detail
}  // namespace ddpsim
