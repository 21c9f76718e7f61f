"""The collectives profile() times apart from the steps, as ``ddptrain --profile`` times them:
the allreduce over a ladder of sizes (rows of policy "allreduce", from which ``ddpsim
calibrate`` fits the network) and ZeRO-1's gather of the updated parameters (the ``allgather``
metadata line, from which it fits ``allgather_factor``), as the framework gathers them: PyTorch's
ZeroRedundancyOptimizer broadcasts each rank's shard from its owner, DeepSpeed all-gathers.
Every timing starts at a barrier, so each is the collective of all ranks at once, after a
warm-up that lets it settle.
"""

from __future__ import annotations

import random
import statistics
from typing import Callable, Optional, Sequence

import torch
import torch.distributed as dist

from ddpsim.torch.tracer import _Clock


def settle(once: Callable[[], float], fixed: Optional[int], cap: int, agree: Callable[[bool], bool]) -> int:
    """ddptrain's warm-up: runs until the median of the last 3 times is within 5% of the 3
    before (at least 6 runs, at most ``cap``), or ``fixed`` runs; returns how many ran."""
    if fixed is not None:
        for _ in range(fixed):
            once()
        return fixed
    times: list[float] = []
    while len(times) < cap:
        times.append(once())
        settled = False
        if len(times) >= 6:
            recent, before = statistics.median(times[-3:]), statistics.median(times[-6:-3])
            settled = abs(recent - before) <= 0.05 * recent
        if agree(settled):
            break
    return len(times)


def _timed(collective: Callable[[], None], clock: _Clock) -> Callable[[], float]:
    """One timing of ``collective`` in ms, from a barrier: every rank starts it at once."""
    def once() -> float:
        dist.barrier()
        start = clock.mark()
        collective()
        return clock.ms(start, clock.mark())
    return once


def allreduce_rows(sizes, reps, warmup, max_warmup, seed, device, agree) -> list[dict]:
    """Allreduces of each size (in a seeded order), timed on every rank at once: rank 0's rows."""
    clock = _Clock(device)
    order = list(sizes)
    random.Random(seed).shuffle(order)
    rows = []
    for size in order:
        buffer = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)
        once = _timed(lambda: dist.all_reduce(buffer), clock)
        settle(once, warmup, max_warmup, agree)
        for _ in range(reps):
            t = once()
            rows.append(dict(step=len(rows), rank=0, batch_size=0, max_len=0, real_tokens=0, padded_tokens=0,
                             loss_weight=0.0, allreduce_bytes=float(buffer.numel() * 4), allreduce_ms=t, step_ms=t))
    return rows


# profile()'s zero_gather values, and what each times (the allgather_as metadata line).
GATHERS = {"broadcast": "a broadcast of each rank's shard from it, all in flight at once (PyTorch's "
                        "ZeroRedundancyOptimizer with parameters_as_bucket_view)",
           "all_gather": "dist.all_gather of each rank's shard (DeepSpeed's ZeRO, ddptrain's)"}


def allgather_timings(sizes: Sequence[int], reps, warmup, max_warmup, device, agree, how: str) -> str:
    """ZeRO-1's gather of the updated parameters at each size S (in float32, a G-th of S from
    each rank, into the whole flat buffer), ``how`` one of GATHERS: "S:median ms" pairs, this
    rank's medians, the ``allgather`` metadata ddptrain writes."""
    clock, G = _Clock(device), dist.get_world_size()
    pairs = []
    for size in sorted(set(sizes)):
        per_rank = max(1, size // 4 // G)
        whole = torch.ones(per_rank * G, dtype=torch.float32, device=device)
        parts = list(whole.split(per_rank))
        mine = parts[dist.get_rank()].clone()

        def gather():
            if how == "all_gather":
                dist.all_gather(parts, mine)
                return
            for work in [dist.broadcast(parts[r], src=r, async_op=True) for r in range(G)]:
                work.wait()

        once = _timed(gather, clock)
        settle(once, warmup, max_warmup, agree)
        median = statistics.median(once() for _ in range(reps))
        pairs.append(f"{per_rank * G * 4}:{median:.4f}")
    return ",".join(pairs)
