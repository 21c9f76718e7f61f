"""A traced step's shape, each value checked as ddpsim's trace reader will check it.

StepTracer checks a step's shape when the step starts rather than when the trace is written,
where one bad value would lose every step.
"""

from __future__ import annotations

import math
from typing import Any

import ddpsim
from ddpsim._core import possible_sq_tokens


def count(name: str, value: Any, minimum: int) -> int:
    """A count as an int of at least ``minimum`` (a Python or NumPy integer, not a float or a bool)."""
    number = ddpsim._as_int(value)
    if number is None or number < minimum:
        raise ddpsim.InputError(f"{name} is an integer of at least {minimum}, got {value!r}")
    return number


def non_negative(name: str, value: Any, unit: str = "") -> float:
    """A finite number ≥ 0 as a float (a Python or NumPy number, not a bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ddpsim.InputError(f"{name}: expected a finite number{unit} ≥ 0, got {value!r}")
    return float(value)


ATTENTIONS = ("padded", "packed")


def _packed_shape(batch_size: int, max_len: int, real_tokens, padded_tokens, sq_tokens) -> tuple[int, int]:
    """A packed step's real tokens and Σ s², possible for batch_size samples of 1 to max_len tokens."""
    if real_tokens is None or sq_tokens is None:
        raise ddpsim.UsageError("step: a packed step needs real_tokens (Σ s) and sq_tokens (Σ s²), which "
                                "sampler.shape(step) gives under attention=\"packed\"")
    real, pairs = count("real_tokens", real_tokens, 0), count("sq_tokens", sq_tokens, 0)
    if padded_tokens is not None and count("padded_tokens", padded_tokens, 0) != real:
        raise ddpsim.InputError(f"padded_tokens {padded_tokens}: packed sequences have no padding (real_tokens {real})")
    within = all(v < 1 << 63 for v in (pairs, real, batch_size, max_len))  # the C++ check's integers
    if not (within and possible_sq_tokens(pairs, real, batch_size, max_len)):
        raise ddpsim.InputError(f"sq_tokens {pairs}: Σ s² is impossible for {batch_size} samples of {real} tokens, at "
                                f"most {max_len} long")
    return real, pairs


def _check_micro(micro, packed: bool) -> None:
    """Each micro-batch as (batch_size, max_len, real_tokens), with sq_tokens when packed."""
    if micro is None:
        return
    fields = "(batch_size, max_len, real_tokens, sq_tokens)" if packed else "(batch_size, max_len, real_tokens)"
    for k, m in enumerate(micro):
        if not isinstance(m, (tuple, list)) or len(m) != fields.count(",") + 1:
            raise ddpsim.InputError(f"micro[{k}] {m!r}: expected {fields}")
        for name, value in zip(fields.strip("()").split(", "), m):
            count(f"micro[{k}] {name}", value, 0)


def step_shape(batch_size, max_len, real_tokens, padded_tokens, global_batch, loss_weight, micro, sq_tokens=None,
               packed=False) -> dict:
    """A step's columns; padded steps default their tokens to batch_size × max_len."""
    batch_size, max_len = count("batch_size", batch_size, 0), count("max_len", max_len, 1)
    full = batch_size * max_len
    if packed:
        real, sq_tokens = _packed_shape(batch_size, max_len, real_tokens, padded_tokens, sq_tokens)
        padded = real
    elif sq_tokens is not None:
        raise ddpsim.UsageError("step: sq_tokens is Σ s² of packed sequences; trace them with "
                                "StepTracer(attention=\"packed\")")
    else:
        real = full if real_tokens is None else count("real_tokens", real_tokens, 0)
        padded = full if padded_tokens is None else count("padded_tokens", padded_tokens, 0)
    if not real <= padded <= full:
        raise ddpsim.InputError(f"real_tokens {real}, padded_tokens {padded}: expected real ≤ padded ≤ batch_size × "
                                f"max_len = {full}")
    _check_micro(micro, packed)
    if global_batch is not None:
        global_batch = count("global_batch", global_batch, 1)
    if loss_weight is not None:
        loss_weight = non_negative("loss_weight", loss_weight)
    return dict(batch_size=batch_size, max_len=max_len, real_tokens=real, padded_tokens=padded,
                global_batch=global_batch, loss_weight=loss_weight, micro=micro, sq_tokens=sq_tokens)
