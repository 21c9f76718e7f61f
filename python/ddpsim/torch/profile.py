"""profile(): times a user's model over a (batch size, length) grid, as ``ddptrain --profile``.

Each point warms up until its timing settles, points run in a seeded random order (so that the
machine's drift spreads over the grid rather than landing in one corner), and every repetition
is a trace row of policy "profile". With several ranks, all time the grid together (DDP's
buckets fill under ``no_sync`` but are never reduced: communication is left out), then the
allreduce is timed over a ladder of sizes (rows of policy "allreduce"), from which
``ddpsim calibrate`` fits the network. ``write_layout`` gives calibrate the model's gradient
buckets (``--base``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import tempfile
from typing import Any, Callable, Optional, Sequence

import torch
import torch.distributed as dist

import ddpsim
from ddpsim.torch.tracer import StepTracer, _Clock

DEFAULT_BYTES = (64 << 10, 1 << 20, 4 << 20, 16 << 20)


def _settle(once: Callable[[], float], fixed: Optional[int], cap: int, agree: Callable[[bool], bool]) -> int:
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


def profile(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    make_batch: Callable[[int, int], Any],
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
    path: str,
    *,
    batches: Sequence[int],
    lengths: Sequence[int],
    reps: int = 5,
    warmup: Optional[int] = None,
    max_warmup: int = 30,
    seed: int = 0,
    allreduce_bytes: Sequence[int] = DEFAULT_BYTES,
    device: Optional[torch.device] = None,
    model_name: str = "",
    log: Callable[[str], None] = lambda line: None,
) -> None:
    """Times training steps of ``loss_fn(model, make_batch(b, L))`` (forward, backward,
    ``optimizer.step()`` and ``zero_grad()``) at every (b, L) and writes ``path`` (rank 0).

    ``model`` may be DDP-wrapped; every rank of the default group must call this together."""
    if reps < 1:
        raise ddpsim.UsageError("reps must be at least 1")
    for L in lengths:
        if L < 2:
            raise ddpsim.UsageError(f"lengths: {L} is under 2 (a [CLS] and a [SEP] token)")
    for b in batches:
        if b < 1:
            raise ddpsim.UsageError(f"batches: {b} is not a batch size (≥ 1)")
    distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    G = dist.get_world_size() if distributed else 1
    rank = dist.get_rank() if distributed else 0
    device = torch.device(device) if device is not None else next(model.parameters()).device
    clock = _Clock(device)
    points = [(b, L) for L in lengths for b in batches]
    random.Random(seed).shuffle(points)

    def agree(settled: bool) -> bool:  # every rank runs as many steps: all must have settled
        if not distributed:
            return settled
        flag = torch.tensor([0 if settled else 1], dtype=torch.int64, device=device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item()) == 0

    no_sync = model.no_sync if hasattr(model, "no_sync") else contextlib.nullcontext
    tracer = StepTracer(path, policy="profile", world_size=G, rank=rank, device=device, model=model_name, seed=seed,
                        metadata={"allreduce": "not in the steps (DDP's buckets fill under no_sync); timed apart as "
                                               "policy allreduce" if distributed else "none (one rank)"})
    timed = warmups = 0
    model.train()
    for b, L in points:
        batch = make_batch(b, L)

        def once(record: bool = False) -> float:
            if distributed:
                dist.barrier()
            start = clock.mark()
            with tracer.step(batch_size=b, max_len=L, global_batch=b * G, loss_weight=1.0) if record \
                    else contextlib.nullcontext() as s:
                with no_sync():
                    marks = [clock.mark()]
                    loss = loss_fn(model, batch)
                    marks.append(clock.mark())
                    loss.backward()
                    marks.append(clock.mark())
                    optimizer.step()
                    optimizer.zero_grad()
                    marks.append(clock.mark())
                if s is not None:
                    for name, a, z in zip(("fwd", "bwd", "opt"), marks, marks[1:]):
                        s.phases.append((name, a, z, None))
                    s.loss = loss
            return clock.ms(start, clock.mark())

        warmups += _settle(once, warmup, max_warmup, agree)
        for _ in range(reps):
            once(record=True)
            timed += 1
        log(f"profile: b={b} L={L} ({timed // reps}/{len(points)})")
    tracer._meta.append(("profile", f"warmup {'auto' if warmup is None else warmup} ({warmups} runs in all), "
                                    f"repetitions {reps}, {len(points)} points in a seeded random order" +
                         (f"; on {G} ranks at once; then allreduce" if distributed else "")))
    rows = tracer.rows()
    comm = _allreduce_rows(allreduce_bytes, reps, warmup, max_warmup, seed, device, agree) if distributed else []
    gathered = [None] * G
    if distributed:
        dist.all_gather_object(gathered, rows)
    else:
        gathered = [rows]
    if rank != 0:
        return
    everyone = [dict(gathered[g][i], rank=g) for i in range(len(rows)) for g in range(G)]
    runs = [("profile", G, everyone)]
    if comm:
        runs.append(("allreduce", 1, comm))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ddpsim.write_trace(path, tracer._meta, runs)


def _allreduce_rows(sizes, reps, warmup, max_warmup, seed, device, agree) -> list[dict]:
    """Allreduces of each size (in a seeded order), timed on every rank at once: rank 0's rows."""
    clock = _Clock(device)
    order = list(sizes)
    random.Random(seed).shuffle(order)
    rows = []
    for size in order:
        buffer = torch.ones(max(1, size // 4), dtype=torch.float32, device=device)

        def once() -> float:
            dist.barrier()
            start = clock.mark()
            dist.all_reduce(buffer)
            return clock.ms(start, clock.mark())

        _settle(once, warmup, max_warmup, agree)
        for _ in range(reps):
            t = once()
            rows.append(dict(step=len(rows), rank=0, batch_size=0, max_len=0, real_tokens=0, padded_tokens=0,
                             loss_weight=0.0, allreduce_bytes=float(buffer.numel() * 4), allreduce_ms=t, step_ms=t))
    return rows


def write_layout(model: torch.nn.Module, path: str, name: str = "layout") -> None:
    """The model's parameter layout as a ddpsim model without timings, for ``ddpsim calibrate
    --base``: one layer per parameter tensor in registration order (DDP's bucket order), each
    with its share of backward work (an embedding's elements / 25: its gradient is a scatter of
    rows, not a matrix product), as ``ddptrain --write-layout`` writes it for DistilBERT."""
    module = model.module if hasattr(model, "module") else model
    embedding = {id(p) for m in module.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    layers = [{"name": n, "params": p.numel(),
               "bwd_fraction": p.numel() / 25.0 if id(p) in embedding else float(p.numel())}
              for n, p in module.named_parameters()]
    doc = {"name": name,
           "source": f"parameter layout of the PyTorch model {type(module).__name__} (ddpsim.torch.write_layout); "
                     "no timings: a base for ddpsim calibrate",
           "forward_ms": {"a": 0, "beta": 0, "gamma": 0}, "backward_ms": {"a": 0, "beta": 0, "gamma": 0},
           "gradient_bytes_per_param": 4, "layers": layers}
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as out:
        json.dump(doc, out, indent=2)
    os.replace(out.name, path)
