// What a CPU run's speed rests on beyond its shapes, for trace metadata: the processor, and the
// BLAS kernels LibTorch's matrix products run. OpenBLAS picks its kernels by the CPU it detects
// and falls back to old ones on a CPU newer than itself: on a 2-core Xeon VM (family 6, model 207)
// OpenBLAS 0.3.21 chose its Prescott kernels, a third of the AVX-512 ones' speed, so two runs of
// one command on two such VMs need not be of one machine.
#pragma once

#include <string>

namespace ddptrain {

// "Intel(R) Xeon(R) Processor (family 6, model 207)", from /proc/cpuinfo; "unknown" elsewhere.
std::string cpu_model();

// "OpenBLAS 0.3.21, Prescott kernels" (", set by OPENBLAS_CORETYPE" when that chose them), or
// "not OpenBLAS" when the process has no OpenBLAS to ask.
std::string blas_kernels();

// CPU tensors come from glibc's malloc, which by default gives large freed blocks back to the
// kernel and faults fresh pages in on the next use. Batch shapes change every step, so that
// cost landed on training steps and not on the fixed-shape profile: a 4-rank emulated step of
// the small model on one core took 383 ms instead of 172 ms, its optimizer 165 ms instead of
// 29 ms. Freed memory is kept for reuse instead, as CUDA's caching allocator does on GPUs (and
// ddpsim.torch's keep_freed_memory() in Python). Call it first thing.
void keep_freed_memory();

// What keep_freed_memory set, for trace metadata, in ddpsim.torch's words.
std::string malloc_setting();

}  // namespace ddptrain
