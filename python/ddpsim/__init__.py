"""ddpsim's batch policies from Python.

The same C++ library as the ``ddpsim`` simulator and the ``ddptrain`` trainer: for the same
lengths, world size, global batch, policy, caps and seed, :class:`Scheduler` plans exactly the
steps ``ddptrain`` trains on. ``ddpsim.torch`` builds a PyTorch batch sampler, a step tracer
and a profiler on it (and is the only part that imports torch).
"""

from ddpsim._core import (
    InputError,
    Plan,
    PolicySpec,
    Scheduler,
    UsageError,
    parse_policy,
    policy_names,
    synthetic_lengths,
    trace_columns,
    write_trace,
)

__all__ = [
    "InputError",
    "Plan",
    "PolicySpec",
    "Scheduler",
    "UsageError",
    "parse_policy",
    "policy_names",
    "synthetic_lengths",
    "trace_columns",
    "write_trace",
]
