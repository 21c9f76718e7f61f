// `--nproc-per-node N`: starts N copies of this program as ranks 0..N−1 on this machine, with
// the torchrun-style environment each needs, and waits for them; the first failure stops the
// others. The rendezvous port is one the kernel just handed out on the loopback interface.
#pragma once

#include <string>
#include <vector>

namespace ddptrain {

// `args` is argv without the program and without --nproc-per-node; returns the exit code.
// With `threads` > 0 and at least nproc × threads cores allowed to this process, rank r is
// pinned to its own `threads` cores (through DDPTRAIN_CPUS), so ranks do not fight over cores.
int launch_local_ranks(int nproc, const std::vector<std::string>& args, int threads);

// In a rank (or a lone process): takes the cores DDPTRAIN_CPUS names, and sets LibTorch's
// intra-op threads when `threads` > 0. Call before any LibTorch work.
void apply_cpu_placement(int threads);

// Whether apply_cpu_placement got the CPU to flush subnormal floats to zero, for trace metadata.
// Tiny gradients turning subnormal made a 2-core Xeon's backward up to 20x slower as training went
// on (the twenty-fifth registered CPU prediction's first profile): a cost no shape explains.
bool subnormals_flushed();

// The cores this process may run on and whether the launcher pinned it, for trace metadata:
// "0" or "0-1" or "0,2", then " (pinned)" or " (not pinned)".
std::string cpu_placement();

}  // namespace ddptrain
