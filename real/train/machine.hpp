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

}  // namespace ddptrain
