// --pad-to-multiple-of N: each batch padded past its longest sample up to a multiple of N (never
// past --max-length), because every new (b, L) a run meets costs a GPU a first-use penalty
// (kernel selection, autotuning, allocator growth), and a policy that varies b per rank meets
// hundreds of them; rounding L cuts their number by about N at the price of the extra tokens.
#pragma once

#include "data/text_data.hpp"
#include "report/policy_run.hpp"

namespace ddptrain {

// The rounding itself (padded_length, and pad_row for the trace's rows, so that they record
// the shapes the GPU computed on) is the scheduler library's, shared with the simulator.
using ddpsim::padded_length;
using ddpsim::pad_row;
// The batch's ids and mask extended with [PAD] and masked positions to padded_length().
void pad_batch(Batch& batch, int multiple, int max_length);

}  // namespace ddptrain
