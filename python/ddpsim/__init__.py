"""ddpsim's batch policies and its simulator from Python.

The same C++ library as the ``ddpsim`` simulator and the ``ddptrain`` trainer: for the same
lengths, world size, global batch, policy, caps and seed, :class:`Scheduler` plans exactly the
steps ``ddptrain`` trains on. ``ddpsim.torch`` builds a PyTorch batch sampler, a step tracer
and a profiler on it (and is the only part that imports torch). :func:`run` and :func:`compare`
simulate a config's policies as the ``ddpsim`` command does, in this process (ddpsim.simulator).
"""

import operator as _operator

from ddpsim._core import (
    InputError,
    Plan,
    PolicySpec,
    UsageError,
    policy_names,
    synthetic_lengths,
    trace_columns,
    write_trace,
)
from ddpsim import _core as _core_module
from ddpsim._core import Scheduler as _Scheduler
from ddpsim._core import parse_policy as _parse_policy

# Each argument's kind, for the message that names a wrong one (pybind11's own lists every overload).
_KINDS = {"world_size": "int", "global_batch": "int", "seed": "int", "micro_batches": "int", "max_length": "int?",
          "b_max": "ints?", "policy": "str", "micro_batching": "str", "perf_model": "str"}


def _as_int(value):
    """``value`` as an int where it is one (a Python or NumPy integer; not a bool, a float or a
    string), else None: the one test every argument check of the package shares."""
    if isinstance(value, bool):
        return None
    try:
        return _operator.index(value)
    except TypeError:
        return None


_C_INT = (-(2**31), 2**31 - 1)
_RANGES = {"seed": (0, 2**64 - 1), "lengths": (1, 2**31 - 1)}  # what the library's C++ types hold


def _wrong_argument(lengths, kwargs) -> str:
    """What is wrong with Scheduler's arguments, named: a keyword it does not take, or a value of
    another kind, or past the range the library's integers hold."""
    def fits(v, key):
        n = _as_int(v)
        lo, hi = _RANGES.get(key, _C_INT)
        return n is not None and lo <= n <= hi

    for key, value in kwargs.items():
        kind = _KINDS.get(key)
        if kind is None:
            return f"{key}: not an argument of Scheduler (it takes lengths, {', '.join(_KINDS)})"
        if value is None and kind.endswith("?"):
            continue
        lo, hi = _RANGES.get(key, _C_INT)
        if kind.startswith("ints"):
            if not (isinstance(value, (list, tuple)) and all(fits(v, key) for v in value)):
                return f"{key}: expected a list of integers from {lo} to {hi} (one cap per rank), got {value!r}"
        elif kind.startswith("int") and not fits(value, key):
            return f"{key}: expected an integer from {lo} to {hi}, got {value!r} ({type(value).__name__})"
        if kind == "str" and not isinstance(value, str):
            return f"{key}: expected a string, got {value!r} ({type(value).__name__})"
    if not isinstance(lengths, (list, tuple)):
        return f"lengths: expected a list of integer sample lengths, got {type(lengths).__name__}"
    lo, hi = _RANGES["lengths"]
    for i, n in enumerate(lengths):
        if not fits(n, "lengths"):
            return f"lengths[{i}]: expected an integer number of tokens from {lo} to {hi}, got {n!r}"
    return "lengths: expected a list of integer sample lengths"


def parse_policy(text):
    """The policy ``text`` names ("minmax:cost=tokens"), checked as the command line checks it."""
    if not isinstance(text, str):
        raise InputError(f"policy: expected a string such as 'minmax:cost=tokens', got {text!r} "
                         f"({type(text).__name__})")
    return _parse_policy(text)


class Scheduler(_Scheduler):
    __doc__ = _Scheduler.__doc__

    def __init__(self, lengths, **kwargs):
        try:
            super().__init__(lengths, **kwargs)
        except TypeError as e:
            if "incompatible constructor arguments" not in str(e):
                raise
            raise InputError(_wrong_argument(lengths, kwargs)) from None


if hasattr(_core_module, "run_verb"):  # built with the simulator (not a trainer-only build)
    from ddpsim.simulator import Frames, Outputs, Result, SweepResult, Validation, calibrate, compare, run, sweep, validate

    from ddpsim import plots

__version__ = _core_module.version  # as `ddpsim --version` names this build

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
    "run",
    "compare",
    "sweep",
    "validate",
    "calibrate",
    "Result",
    "SweepResult",
    "Validation",
    "Outputs",
    "Frames",
]
