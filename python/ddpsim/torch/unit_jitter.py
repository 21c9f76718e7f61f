"""unit_jitter: how unevenly a model's step falls over its blocks, for ``simulation.unit_jitter``.

FSDP's ranks meet at every wrapped unit, so a step pays not only for how the ranks' totals
differ but for how each rank's time is shared out over its units, which moves from step to step.
This times every block's forward and backward over repeated steps of one batch and estimates the
log-normal σ of a block's share of its step around its mean share: the parameter ddpsim's
``simulation.unit_jitter`` takes (docs/sharding.md, "Unit jitter").
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import torch

import ddpsim
from ddpsim.torch.tracer import _Clock, _count


def _sigma(times: list[list[float]]) -> float:
    """σ of log-normal factors on each unit's share, from per-step unit times (steps × units).

    A share is s_u·x_u / Σ_k s_k·x_k, so its log varies by σ²(1 − 2s_u + Σ_k s_k²) to first
    order: the variance of the logs over steps, pooled over the units, divided by that.
    """
    units = len(times[0])
    logs = [[math.log(t / sum(row)) for t in row] for row in times]
    mean_share = [sum(math.exp(row[u]) for row in logs) / len(logs) for u in range(units)]
    squares = sum(s * s for s in mean_share)
    variance = scale = 0.0
    for u in range(units):
        column = [row[u] for row in logs]
        centre = sum(column) / len(column)
        variance += sum((x - centre) ** 2 for x in column) / (len(column) - 1)
        scale += 1 - 2 * mean_share[u] + squares
    return math.sqrt(variance / scale)


class _Marks:
    """Hooks that mark each block's forward start and end and the end of its backward."""

    def __init__(self, blocks: Sequence[torch.nn.Module], clock: _Clock):
        self.clock = clock
        self.begin, self.end, self.grads = {}, {}, {}
        self.handles = []
        for i, block in enumerate(blocks):
            self.handles.append(block.register_forward_pre_hook(self._mark(self.begin, i)))
            self.handles.append(block.register_forward_hook(self._mark(self.end, i)))
            self.handles.append(block.register_full_backward_hook(self._mark(self.grads, i)))

    def _mark(self, into: dict, i: int) -> Callable:
        def hook(*_):
            into[i] = self.clock.mark()

        return hook

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def unit_jitter(blocks: Sequence[torch.nn.Module], run_step: Callable[[], None], *, steps: int = 40,
                warmup: int = 5) -> dict:
    """Estimates ``simulation.unit_jitter`` for a model from its blocks' times.

    ``blocks``: the modules FSDP would wrap, in the order forward runs them (a decoder's
    ``model.layers``); ``run_step``: one forward and backward of a fixed batch (the optimizer
    step may be left out: it is not a block's). A block's backward is the time between the end of
    the next block's backward and the end of its own (its gradients' hook), so the last block's
    backward, whose start no hook marks, is left out. On a GPU, CUDA events on the current stream.

    Returns ``sigma`` (forward and backward pooled: the key's value), ``forward_sigma``,
    ``backward_sigma``, ``blocks``, ``steps`` and ``device``.
    """
    blocks = list(blocks)
    if len(blocks) < 3:
        raise ddpsim.InputError(f"blocks: at least 3 are needed (a backward time needs the next block's), "
                                f"got {len(blocks)}")
    steps, warmup = _count("steps", steps, 3), _count("warmup", warmup, 0)
    parameter = next(blocks[0].parameters(), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    marks = _Marks(blocks, _Clock(device))
    forward, backward = [], []
    try:
        for step in range(warmup + steps):
            marks.begin.clear(), marks.end.clear(), marks.grads.clear()
            run_step()
            if step < warmup:
                continue
            if len(marks.grads) != len(blocks) or len(marks.end) != len(blocks):
                raise ddpsim.InputError("run_step: every block must run forward and backward once a step "
                                        f"({len(marks.end)} forwards and {len(marks.grads)} backwards of "
                                        f"{len(blocks)} blocks were seen)")
            ms = marks.clock.ms
            forward.append([ms(marks.begin[u], marks.end[u]) for u in range(len(blocks))])
            backward.append([ms(marks.grads[u + 1], marks.grads[u]) for u in range(len(blocks) - 1)])
    finally:
        marks.remove()
    if min(min(row) for row in forward + backward) <= 0:
        raise ddpsim.InputError("a block took no measurable time: the clock cannot tell its share")
    f, b = _sigma(forward), _sigma(backward)
    return {"sigma": math.sqrt((f * f + b * b) / 2), "forward_sigma": f, "backward_sigma": b,
            "blocks": len(blocks), "steps": steps, "device": str(device)}
