// --pad-to-multiple-of N: each batch padded past its longest sample up to a multiple of N (never
// past --max-length), because every new (b, L) a run meets costs a GPU a first-use penalty
// (kernel selection, autotuning, allocator growth), and a policy that varies b per rank meets
// hundreds of them; rounding L cuts their number by about N at the price of the extra tokens.
#pragma once

#include "data/text_data.hpp"
#include "report/policy_run.hpp"

namespace ddptrain {

// The length a batch whose longest sample has `longest` tokens is padded to (0 stays 0: a rank
// given no samples computes nothing).
int padded_length(int longest, int multiple, int max_length);
// The batch's ids and mask extended with [PAD] and masked positions to padded_length().
void pad_batch(Batch& batch, int multiple, int max_length);
// A trace row's lengths and padded tokens as pad_batch() made them, so that the trace records
// the shapes the GPU computed on.
void pad_row(ddpsim::RankStep& row, int multiple, int max_length);

}  // namespace ddptrain
