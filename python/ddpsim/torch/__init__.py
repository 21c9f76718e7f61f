"""ddpsim's policies in a PyTorch training loop, and the traces that calibrate ddpsim for it.

- :class:`BalancedBatchSampler`: a DDP batch sampler planning each step with a ddpsim policy,
  with each rank's loss weight (:func:`scale_loss`);
- :class:`StepTracer`: each rank's step phases in ddpsim's trace schema, for
  ``ddpsim calibrate``, ``replay`` and ``validate``;
- :func:`profile` (or :class:`Profiler`, a step at a time between training turns) and
  :func:`write_layout`: the (b, L) profile (over several ranks, with the allreduce and the
  interference, :mod:`ddpsim.torch.interference`) and the parameter layout ``ddpsim calibrate`` fits;
- :func:`keep_freed_memory`: glibc's malloc keeping freed memory for reuse, as ddptrain does, so
  that a CPU step's time follows its shape rather than the page faults of memory given back;
- :func:`unit_jitter`: how unevenly a step falls over the model's blocks, the σ of
  ``simulation.unit_jitter`` for sharded (FSDP) steps.
"""

from ddpsim.torch.profile import Profiler, profile, write_layout
from ddpsim.torch.sampler import BalancedBatchSampler, scale_loss
from ddpsim.torch.tracer import StepTracer
from ddpsim.torch.jitter import unit_jitter
from ddpsim.torch.machine import keep_freed_memory

__all__ = ["BalancedBatchSampler", "Profiler", "StepTracer", "keep_freed_memory", "profile", "scale_loss", "unit_jitter",
           "write_layout"]
