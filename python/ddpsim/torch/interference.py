"""Interference, as ``ddptrain --profile`` times it after the allreduce, both ways, on every rank
at once with DDP's own hooks off (``no_sync``: the only communication is the one measured).

- Compute beside communication: backward alone against backward while allreduces of DDP's
  largest bucket run back to back for all of it (enough queued to outlast two backward passes;
  a row whose backward outlived them is dropped). Rows carry ``concurrent_allreduce_bytes``
  (0 alone); ``ddpsim calibrate`` fits their ratio as ``comm_slowdown``.
- Communication beside compute: as many such allreduces as take a third of backward alone,
  queued alone and queued as backward starts (timed from launch to the last one's completion by
  a waiting thread, which holds no core). Rows give each allreduce's share in ``allreduce_ms``;
  those beside backward also carry its shape and ``bwd_ms``, which is how calibrate tells them
  apart (``allreduce_slowdown``).

Each is timed at a rank's batch b and at the median and the longest profiled lengths, alone and
beside in a seeded random alternation; the rows join the trace's policy "allreduce" run.
"""

from __future__ import annotations

import contextlib
import math
import random
import statistics
import threading
import time
from typing import Any, Callable, Sequence

import torch
import torch.distributed as dist

from ddpsim.torch.tracer import _Clock

MiB = 1 << 20
DDP_BUCKET_CAP = 25 * MiB  # DistributedDataParallel's default bucket_cap_mb
BUFFERS = 8  # a small model's backward can outlast hundreds of allreduces; their values do not matter


def bucket_bytes(model: torch.nn.Module, buckets: Sequence[int]) -> int:
    """DDP's largest bucket, up to the model's bucket cap (the word-embedding gradient can be a
    bucket of its own); for a model DDP does not wrap, its gradients up to DDP's default cap."""
    cap = max(int(getattr(model, "bucket_bytes_cap", DDP_BUCKET_CAP)), MiB)
    largest = max(buckets) if buckets else sum(4 * p.numel() for p in model.parameters() if p.requires_grad)
    return max(1, min(largest, cap) // 4) * 4


class _Ranks:
    """Every rank's view of a few numbers, so that all run as many collectives and rank 0 writes
    what each timed."""

    def __init__(self, device: torch.device):
        self.device = device if dist.get_backend() == "nccl" else torch.device("cpu")
        self.G = dist.get_world_size()

    def max(self, value: int) -> int:
        t = torch.tensor([value], dtype=torch.int64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def gather(self, *values: float) -> list[list[float]]:
        mine = torch.tensor(values, dtype=torch.float64, device=self.device)
        everyone = [torch.empty_like(mine) for _ in range(self.G)]
        dist.all_gather(everyone, mine)
        return [t.cpu().tolist() for t in everyone]


def _wait_all(works: list, blocking: bool) -> float:
    """Waits for the allreduces in order; returns when the last completed (perf_counter, s).
    Gloo's wait blocks the host; NCCL's only orders streams, so its completion is polled."""
    for w in works:
        if blocking:
            w.wait()
        else:
            while not w.is_completed():
                time.sleep(50e-6)
    return time.perf_counter()


def _shape_row(step: int, b: int, L: int) -> dict:
    """A row of the backward's shape: b samples of exactly L tokens, as a profile row (Σ s² for a
    packed profile's trace)."""
    return dict(step=step, rank=0, batch_size=b, max_len=L, real_tokens=b * L, padded_tokens=b * L, global_batch=b,
                loss_weight=1.0, sq_tokens=b * L * L)


def _comm_row(step: int) -> dict:
    return dict(step=step, rank=0, batch_size=0, max_len=0, real_tokens=0, padded_tokens=0, global_batch=0,
                loss_weight=0.0)


def interference_rows(model: torch.nn.Module, optimizer: Any, make_batch: Callable[[int, int], Any],
                      loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor], *, b: int, lengths: Sequence[int],
                      bucket: int, reps: int, seed: int, device: torch.device, first_step: int,
                      log: Callable[[str], None]) -> list[dict]:
    """Both measurements at b and each of ``lengths``, every rank at once: rank 0's rows (every
    rank's times), numbered from ``first_step``."""
    ranks, clock = _Ranks(device), _Clock(device)
    blocking = dist.get_backend() != "nccl"
    elems = bucket // 4
    size = float(elems * 4)
    buffers: list[torch.Tensor] = []
    no_sync = model.no_sync if hasattr(model, "no_sync") else contextlib.nullcontext

    def queue(n: int) -> list:
        while len(buffers) < min(n, BUFFERS):
            buffers.append(torch.zeros(elems, dtype=torch.float32, device=device))
        return [dist.all_reduce(buffers[i % len(buffers)], async_op=True) for i in range(n)]

    def backward(batch: Any, concurrent: int) -> tuple[float, float, bool]:
        """One backward beside ``concurrent`` queued allreduces: its time (ms), theirs from launch
        to the last one's completion (ms), and whether they outlasted it."""
        model.train()
        optimizer.zero_grad()
        with no_sync():
            loss = loss_fn(model, batch)
            dist.barrier()
            t0 = time.perf_counter()
            works = queue(concurrent)
            comm_done = [t0]

            def wait() -> None:
                comm_done[0] = _wait_all(works, blocking)

            waiter = threading.Thread(target=wait)
            waiter.start()
            start = clock.mark()
            loss.backward()
            bwd_ms = clock.ms(start, clock.mark())
            bwd_done = time.perf_counter()
            waiter.join()
        return bwd_ms, (comm_done[0] - t0) * 1e3, comm_done[0] > bwd_done

    rows: list[dict] = []
    for L in lengths:
        batch = make_batch(b, L)
        for _ in range(3):
            backward(batch, 0)
        alone = ranks.max(math.ceil(statistics.median([backward(batch, 0)[0] for _ in range(3)])))
        dist.barrier()
        t0 = time.perf_counter()
        one_ms = max((_wait_all(queue(1), blocking) - t0) * 1e3, 1e-3)
        order = [0, 1] * reps
        random.Random(seed + L).shuffle(order)

        outlasting = min(1024, ranks.max(math.ceil(2.0 * alone / one_ms) + 1))
        times: tuple[list[float], list[float]] = ([], [])
        for beside in order:
            bwd_ms, _, outlasted = backward(batch, outlasting if beside else 0)
            # A backward that outlived its allreduces was not slowed for all of it: its row is
            # dropped (every rank sees it alike only by chance, so each decides for its own row).
            for valid, ms in ranks.gather(float(outlasted), bwd_ms):
                if beside and not valid:
                    continue
                rows.append(dict(_shape_row(first_step + len(rows), b, L), bwd_ms=ms,
                                 concurrent_allreduce_bytes=size if beside else 0.0))
                times[beside].append(ms)
        if times[0] and times[1]:
            log(f"profile: interference at b={b} L={L}: backward {statistics.median(times[0]):.4g} ms alone, "
                f"{statistics.median(times[1]):.4g} ms beside {outlasting} allreduces of {size:.0f} bytes")
        else:
            log(f"profile: interference at b={b} L={L}: {outlasting} allreduces of {size:.0f} bytes never outlasted "
                f"backward: its slowdown beside them is not measured there")

        # As many allreduces as take a third of backward alone (the fewest over the ranks), so
        # that they finish inside it even when slowed threefold.
        inside = -ranks.max(-int(alone / (3 * one_ms)))
        if inside < 1:
            log(f"profile: an allreduce of {size:.0f} bytes ({one_ms:.3g} ms) takes over a third of backward at "
                f"b={b} L={L}: its slowdown beside backward is not measured there")
            continue
        times = ([], [])
        for beside in order:
            if beside:
                bwd_ms, comm_ms, outlasted = backward(batch, inside)
            else:
                dist.barrier()
                start = time.perf_counter()
                comm_ms, bwd_ms, outlasted = (_wait_all(queue(inside), blocking) - start) * 1e3, 0.0, False
            for valid, share, ms in ranks.gather(float(not outlasted), comm_ms / inside, bwd_ms):
                if not valid:
                    continue
                row = _shape_row(first_step + len(rows), b, L) if beside else _comm_row(first_step + len(rows))
                row.update(allreduce_bytes=size, allreduce_ms=share)
                if beside:
                    row["bwd_ms"] = ms
                rows.append(row)
                times[beside].append(share)
        if times[0] and times[1]:
            log(f"profile: interference at b={b} L={L}: allreduce of {size:.0f} bytes "
                f"{statistics.median(times[0]):.4g} ms alone, {statistics.median(times[1]):.4g} ms beside backward "
                f"({inside} queued)")
    return rows

