// A pipeline stage's data-parallel collectives (its gradient syncs and ZeRO-2's parameter
// all-gather) as the step engine's collective plans, over the stage's D peers and written on
// GPU indices, so that a pipeline's syncs run the same algorithms as DDP's.
#pragma once

#include <array>
#include <vector>

#include <simgrid/forward.h>

#include "engine/collective.hpp"
#include "pipeline/pipeline_sim.hpp"

namespace ddpsim::pipeline {

struct StagePlans {
  CollectivePlan sync;    // ddp: an allreduce; zero2: a reduce-scatter
  CollectivePlan gather;  // zero2: the all-gather after the optimizer; no phases otherwise
};

// One per stage; none with a single data-parallel group. Throws InputError where a hierarchical
// collective's peers are not spread evenly over the nodes.
std::vector<StagePlans> stage_plans(const PipelineSetup& s);

// The bytes each GPU sends in one run of `plan` over all its phases, per byte of its size.
double sent_per_byte(const CollectivePlan& plan);

// Every (src, dst, FlowClass::grad_sync) the stages' syncs and gathers send on: the routes a
// network must hold for them.
std::vector<std::array<int, 3>> sync_flows(const std::vector<StagePlans>& plans);

// Whether one group of each kind of alike flows stands exactly for the rest: the syncs' links
// carry no other class (separate channels) and no link that two stages' routes share can fill
// (disjoint_links' ignore_slack), so a stage's collective, whose flows all start together,
// meets no flow that moves otherwise.
bool alike_groups_exact(const PipelineSetup& s, const std::vector<StagePlans>& plans,
                        const std::vector<simgrid::s4u::Host*>& hosts);

}  // namespace ddpsim::pipeline
