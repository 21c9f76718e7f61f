// Compute that runs slower while communication is in flight on the same device: kernels and
// collectives compete for SMs and memory bandwidth. The DDP engine stretches backward beside a
// bucket's allreduce; the pipeline engine stretches forward and backward beside a gradient sync.
#pragma once

#include <vector>

#include <simgrid/s4u/ConditionVariable.hpp>
#include <simgrid/s4u/Mutex.hpp>

namespace ddpsim {

class Interference {
 public:
  explicit Interference(int devices);
  // Sleeps (in the calling actor) until `work_s` seconds of undisturbed compute are done on
  // `device`, at 1/slowdown of the speed while communication is in flight there.
  void compute(int device, double work_s, double slowdown);
  // Communication on `device` starts (+1) or ends (−1); several may overlap.
  void communicating(int device, int delta);

 private:
  std::vector<int> in_flight_;
  std::vector<simgrid::s4u::MutexPtr> lock_;
  std::vector<simgrid::s4u::ConditionVariablePtr> changed_;
};

}  // namespace ddpsim
