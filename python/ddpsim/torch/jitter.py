"""unit_jitter: how unevenly a model's step falls over its blocks, for ``simulation.unit_jitter``.

FSDP's ranks meet at every wrapped unit, so a step pays not only for how the ranks' totals
differ but for how each rank's time is shared out over its units, which moves from step to step.
This times every block's forward and backward over repeated steps of one batch and estimates the
log-normal σ of a block's share of its step around its mean share: the parameter ddpsim's
``simulation.unit_jitter`` takes (docs/sharding.md, "Unit jitter").
"""

from __future__ import annotations

import math
from statistics import median
from typing import Callable, Sequence

import torch

import ddpsim
from ddpsim.torch.shapes import count as _count
from ddpsim.torch.tracer import _Clock


def _sigma(times: list[list[float]]) -> float:
    """σ of log-normal factors on each unit's share, from per-step unit times (steps × units).

    A share is s_u·x_u / Σ_k s_k·x_k, so its log varies by σ²(1 − 2s_u + Σ_k s_k²) to first
    order. Each log's distance from its unit's median, scaled by that, pooled over the units:
    1.4826 times their median is σ, robust to the odd step the host stalled a block.
    """
    units = len(times[0])
    logs = [[math.log(t / sum(row)) for t in row] for row in times]
    mean_share = [sum(math.exp(row[u]) for row in logs) / len(logs) for u in range(units)]
    squares = sum(s * s for s in mean_share)
    spread = []
    for u in range(units):
        column = [row[u] for row in logs]
        centre, scale = median(column), math.sqrt(1 - 2 * mean_share[u] + squares)
        spread += [abs(x - centre) / scale for x in column]
    return 1.4826 * median(spread)


class _Marks:
    """Hooks that mark each block's forward start and end and the end of its backward, a list of
    marks per block and step (a block that runs twice in a step has two), and whether the first
    block's input needs a gradient (else its backward hook fires before its backward runs)."""

    def __init__(self, blocks: Sequence[torch.nn.Module], clock: _Clock):
        self.clock = clock
        self.blocks = len(blocks)
        self.first_input_grad = True
        self.handles = []
        self.begin, self.end, self.grads = ([[] for _ in range(self.blocks)] for _ in range(3))
        for i, block in enumerate(blocks):
            self.handles.append(block.register_forward_pre_hook(self._mark(self.begin, i)))
            self.handles.append(block.register_forward_hook(self._mark(self.end, i)))
            self.handles.append(block.register_full_backward_hook(self._mark(self.grads, i)))
        self.handles.append(blocks[0].register_forward_pre_hook(self._first_input))

    def clear(self) -> None:
        for marks in (*self.begin, *self.end, *self.grads):
            marks.clear()

    def _mark(self, into: list, i: int) -> Callable:
        def hook(*_):
            into[i].append(self.clock.mark())

        return hook

    def _first_input(self, _, inputs) -> None:  # once without a gradient, left out throughout
        self.first_input_grad &= any(isinstance(x, torch.Tensor) and x.requires_grad for x in inputs)

    def check(self) -> None:
        """Refuses a step in which a block did not run forward and backward exactly once."""
        for i in range(self.blocks):
            counts = (len(self.begin[i]), len(self.grads[i]))
            if counts != (1, 1):
                raise ddpsim.InputError(
                    f"run_step: block {i} ran forward {counts[0]} and backward {counts[1]} times in a step; each "
                    "block must run forward and backward once (one batch, no micro-batches; activation "
                    "checkpointing runs forward again inside backward, which this timing cannot tell apart)")

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()


def unit_jitter(blocks: Sequence[torch.nn.Module], run_step: Callable[[], None], *, steps: int = 40,
                warmup: int = 5) -> dict:
    """Estimates ``simulation.unit_jitter`` for a model from its blocks' times.

    ``blocks``: the modules FSDP would wrap, in the order forward runs them (a decoder's
    ``model.layers``); ``run_step``: one forward and backward of a fixed batch (the optimizer
    step may be left out: it is not a block's), without activation checkpointing. A block's
    backward is the time between the end of the next block's backward and the end of its own
    (its gradients' hook), so the last block's backward, whose start no hook marks, is left out,
    and so is the first's where its input needs no gradient (its hook then fires before its
    backward). On a GPU, CUDA events on the current stream. The host's and the clock's own noise
    count as jitter: time on a machine otherwise idle.

    Returns ``sigma`` (forward and backward pooled: the key's value), ``forward_sigma``,
    ``backward_sigma``, ``blocks``, ``steps`` and ``device``.
    """
    blocks = list(blocks)
    if len({id(block) for block in blocks}) != len(blocks):
        raise ddpsim.InputError("blocks: a module is listed twice (each block once, in the order forward runs them)")
    if len(blocks) < 3:
        raise ddpsim.InputError(f"blocks: at least 3 are needed (a backward time needs the next block's), "
                                f"got {len(blocks)}")
    steps, warmup = _count("steps", steps, 3), _count("warmup", warmup, 0)
    parameter = next((p for block in blocks for p in block.parameters()), None)
    device = parameter.device if parameter is not None else torch.device("cpu")
    marks = _Marks(blocks, _Clock(device))
    forward, backward = [], []
    try:
        for step in range(warmup + steps):
            marks.clear()
            run_step()
            marks.check()
            if step < warmup:
                continue
            ms = marks.clock.ms
            forward.append([ms(marks.begin[u][0], marks.end[u][0]) for u in range(len(blocks))])
            backward.append([ms(marks.grads[u + 1][0], marks.grads[u][0]) for u in range(len(blocks) - 1)])
    finally:
        marks.remove()
    if not marks.first_input_grad:
        backward = [row[1:] for row in backward]
    if len(backward[0]) < 2:
        raise ddpsim.InputError(f"blocks: the backward of only {len(backward[0])} block can be timed (the last's "
                                "start has no hook, and the first's input needs no gradient); pass at least 4 blocks")
    if min(min(row) for row in forward + backward) <= 0:
        raise ddpsim.InputError("a block took no measurable time: the clock cannot tell its share")
    f, b = _sigma(forward), _sigma(backward)
    return {"sigma": math.sqrt((f * f + b * b) / 2), "forward_sigma": f, "backward_sigma": b,
            "blocks": len(blocks), "steps": steps, "device": str(device)}
