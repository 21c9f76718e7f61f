// `--nproc-per-node N`: starts N copies of this program as ranks 0..N−1 on this machine, with
// the torchrun-style environment each needs, and waits for them; the first failure stops the
// others. The rendezvous port is one the kernel just handed out on the loopback interface.
#pragma once

#include <string>
#include <vector>

namespace ddptrain {

// `args` is argv without the program and without --nproc-per-node; returns the exit code.
int launch_local_ranks(int nproc, const std::vector<std::string>& args);

}  // namespace ddptrain
