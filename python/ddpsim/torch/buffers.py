"""What DDP does with a model's buffers at each forward, for the tracer. Broadcast (DDP's default,
``broadcast_buffers=True``), they are a collective at every step's start: the ranks wait for each
other there, inside the traced forward, and no profile times it (it runs under ``no_sync``). On two
Gloo ranks of a 2-core Xeon it waited 5-6 ms a rank-step inside the forward; at the step it was
not told from run-to-run spread (traces/cpu/prereg29 to prereg31)."""

from __future__ import annotations

import statistics
from typing import Any

import torch


def _buffer_bytes(ddp_model: torch.nn.Module) -> int:
    return sum(b.numel() * b.element_size() for b in getattr(ddp_model, "module", ddp_model).buffers())


def broadcasts(ddp_model: torch.nn.Module) -> bool:
    """Whether DDP broadcasts the model's buffers at each forward."""
    return bool(getattr(ddp_model, "broadcast_buffers", False)) and _buffer_bytes(ddp_model) > 0


def ddp_buffers(ddp_model: torch.nn.Module) -> str:
    """The trace's ``ddp_buffers`` line: the buffers' bytes and whether DDP broadcasts them."""
    nbytes = _buffer_bytes(ddp_model)
    if not nbytes:
        return "none"
    if broadcasts(ddp_model):
        return f"{nbytes} bytes broadcast from rank 0 at each forward (broadcast_buffers=True)"
    return f"{nbytes} bytes, not broadcast (broadcast_buffers=False)"


class PreForwardTimer:
    """Marks DDP's work before its module's forward (the buffer broadcast and the wait for the
    other ranks there) through two forward pre-hooks, DDP's own and its module's. Marks, not
    times: on a GPU, reading a time would synchronise it in the middle of the step."""

    def __init__(self, ddp_model: torch.nn.Module, clock: Any):
        self._clock = clock
        self._start: Any = None
        self._spans: list = []
        ddp_model.register_forward_pre_hook(self._outer)
        ddp_model.module.register_forward_pre_hook(self._inner)

    def _outer(self, module, inputs) -> None:
        self._start = self._clock.mark()

    def _inner(self, module, inputs) -> None:
        if self._start is not None:
            self._spans.append((self._start, self._clock.mark()))
        self._start = None

    def take(self) -> list:
        """The (start, end) marks since the last take."""
        spans, self._spans = self._spans, []
        return spans


def pre_forward_line(by_rank: list[list[float]]) -> str:
    """The trace's ``ddp_pre_forward`` line from each rank's per-step milliseconds."""
    means = [statistics.fmean(ms) for ms in by_rank]
    overall = statistics.fmean(ms for rank in by_rank for ms in rank)
    return (f"mean {overall:.2f} ms a rank-step (by rank: {', '.join(f'{m:.2f}' for m in means)}), inside fwd_ms: "
            "DDP's work before the module's forward, its buffer broadcast and the wait for the other ranks there")
