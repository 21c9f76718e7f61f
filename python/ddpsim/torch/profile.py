"""profile(): times a user's model over a (batch size, length) grid, as ``ddptrain --profile``.

Each point warms up until its timing settles, points run in a seeded random order (so that the
machine's drift spreads over the grid rather than landing in one corner), and every repetition
is a trace row of policy "profile". With several ranks, all time the grid together (DDP's
buckets fill under ``no_sync`` but are never reduced: communication is left out), then the
allreduce is timed over a ladder of sizes and DDP's own bucket sizes (rows of policy
"allreduce"), from which ``ddpsim calibrate`` fits the network, and then, unless
``interference=False``, backward beside allreduces both ways (:mod:`ddpsim.torch.interference`,
rows of the same run), from which it fits comm_slowdown and allreduce_slowdown, and ZeRO-1's
gather of the parameters, as ``zero_gather`` says the framework runs it, at those sizes and the
model's own (the ``allgather`` line, for allgather_factor).
Each step's ``optimizer.step()`` is timed apart from ``zero_grad()``: its median share is the
``optimizer_update_share`` line, the part of the optimizer time ZeRO shards. One rank has no
collective to time. ``write_layout`` gives calibrate the model's gradient buckets (``--base``).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Optional, Sequence

import torch
import torch.distributed as dist

import ddpsim
from ddpsim.torch.collectives import GATHERS, allgather_timings, allreduce_rows, settle
from ddpsim.torch.interference import bucket_bytes, interference_rows
from ddpsim.torch.tracer import StepTracer, _Clock, grad_dtype

DEFAULT_BYTES = (64 << 10, 1 << 20, 4 << 20, 16 << 20)


def _points(points, batches, lengths) -> list:
    """The (b, L) points to time: ``points`` as given, or the grid of ``batches`` × ``lengths``."""
    if points is not None:
        if batches is not None or lengths is not None:
            raise ddpsim.UsageError("give batches and lengths (a grid) or points (a list of (b, L)), not both")
        if isinstance(points, (str, bytes)) or not hasattr(points, "__iter__"):
            raise ddpsim.UsageError(f"points: expected a list of (batch size, length) pairs, got {points!r}")
        grid = []
        for i, point in enumerate(points):
            if isinstance(point, (str, bytes)) or not hasattr(point, "__len__") or len(point) != 2:
                raise ddpsim.UsageError(f"points[{i}]: expected a (batch size, length) pair, got {point!r}")
            grid.append((_whole(f"points[{i}][0]", point[0], 1), _whole(f"points[{i}][1]", point[1], 0)))
        twice = sorted({p for p in grid if grid.count(p) > 1})
        if twice:
            raise ddpsim.UsageError(f"points: {', '.join(map(str, twice))} given twice (each point is timed once)")
    else:
        if batches is None or lengths is None:
            raise ddpsim.UsageError("batches and lengths: the grid needs both (or give points, a list of (b, L))")
        for name, values in (("batches", batches), ("lengths", lengths)):
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                raise ddpsim.UsageError(f"{name}: expected a list of integers (the grid's {name}), got {values!r}")
        batches = [_whole(f"batches[{i}]", b, 1) for i, b in enumerate(batches)]
        lengths = [_whole(f"lengths[{i}]", L, 0) for i, L in enumerate(lengths)]
        for name, values in (("batches", batches), ("lengths", lengths)):
            if len(set(values)) != len(values):
                twice = sorted({v for v in values if values.count(v) > 1})
                raise ddpsim.UsageError(f"{name}: {', '.join(map(str, twice))} given twice (each point is timed once)")
        grid = [(b, L) for L in lengths for b in batches]
    if not grid:
        raise ddpsim.UsageError("batches and lengths: the grid needs at least one of each" if points is None
                                else "points: none given")
    if any(L < 2 for _, L in grid):
        raise ddpsim.UsageError(f"lengths: {min(L for _, L in grid)} is under 2 (a [CLS] and a [SEP] token)")
    return grid


class Profiler:
    """The profile of :func:`profile`, a step at a time: :meth:`step` times the grid's next
    point, in passes over it, each pass in a fresh seeded order, so that it can run between the
    turns of training runs and measure the minutes they ran in (``ddptrain --profile-alongside``:
    a machine's speed drifts, and a profile taken before the runs cannot know it). :meth:`close`
    (every rank) times the allreduce and the interference and writes the trace.

    ``interference_batch`` is the rank's batch size the interference is timed at (default the
    largest of ``batches``; ``ddptrain`` takes a rank's share of its global batch)."""

    def __init__(self, model, optimizer, make_batch, loss_fn, path, *, batches=None, lengths=None, points=None,
                 reps=5, warmup=None, max_warmup=30, seed=0, allreduce_bytes=DEFAULT_BYTES, device=None, model_name="",
                 interference=True, interference_batch=None, precision="fp32", zero_gather="broadcast",
                 attention="padded", log=lambda line: None):
        for name, thing in (("model", model), ("optimizer", optimizer), ("make_batch", make_batch),
                            ("loss_fn", loss_fn)):
            if thing is None:
                raise ddpsim.UsageError(f"{name}: None; profile() times steps of a model, its optimizer, a "
                                        "make_batch(b, L) and a loss_fn(model, batch)")
        reps = _whole("reps", reps, 1)
        max_warmup = _whole("max_warmup", max_warmup, 1)
        if warmup is not None:
            warmup = _whole("warmup", warmup, 0)
        grid = _points(points, batches, lengths)
        batches = sorted({b for b, _ in grid})
        lengths = sorted({L for _, L in grid})
        seed = _whole("seed", seed, 0)
        if interference_batch is not None:
            interference_batch = _whole("interference_batch", interference_batch, 1)
        if zero_gather not in GATHERS:
            raise ddpsim.UsageError(f"zero_gather: {zero_gather!r}; ZeRO-1's gather is timed as "
                                    + " or ".join(f"{k!r} ({v})" for k, v in GATHERS.items()))
        if _shards_itself(optimizer):
            raise ddpsim.UsageError(f"optimizer: a {type(optimizer).__name__} steps only this rank's shard; profile "
                                    "the plain optimizer it wraps (calibrate reads the whole model's optimizer time, "
                                    "which ddpsim shards under data_parallel zero1, with the all-gather profiled "
                                    "here)")
        if device is None and not any(True for _ in model.parameters()):
            raise ddpsim.UsageError("model: it has no parameters, so there is nothing to train or to take the device "
                                    "from (profile a model with parameters)")
        self.model, self.optimizer, self.make_batch, self.loss_fn = model, optimizer, make_batch, loss_fn
        self.path, self.reps, self.warmup, self.max_warmup, self.seed = path, reps, warmup, max_warmup, seed
        self.allreduce_bytes, self.log, self.zero_gather = allreduce_bytes, log, zero_gather
        self.interference_batch = max(batches) if interference_batch is None else interference_batch
        self.lengths = sorted(set(lengths))
        self.distributed = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.G = dist.get_world_size() if self.distributed else 1
        self.interference = bool(interference) and self.distributed
        self.rank = dist.get_rank() if self.distributed else 0
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.clock = _Clock(self.device)
        self.grid = grid
        self._queue: list = []
        self._passes = 0
        self._update_shares: list[float] = []  # optimizer.step()'s share of the optimizer time, a step each
        self.packed = attention == "packed"
        self.tracer = StepTracer(path, policy="profile", world_size=self.G, rank=self.rank, device=self.device,
                                 model=model_name, seed=seed, precision=precision, attention=attention,
                                 metadata={"allreduce": "not in the steps (DDP's buckets fill under no_sync); timed "
                                                        "apart as policy allreduce" if self.distributed
                                                        else "none (one rank)"})

    def agree(self, settled: bool) -> bool:
        """Every rank runs as many steps: all must have settled."""
        if not self.distributed:
            return settled
        flag = torch.tensor([0 if settled else 1], dtype=torch.int64,
                            device=self.device if dist.get_backend() == "nccl" else "cpu")
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return int(flag.item()) == 0

    def time(self, b: int, L: int, batch: Any, record: bool) -> float:
        """One training step on the batch, every rank at once; a trace row when ``record``."""
        if self.distributed:
            dist.barrier()
        clock = self.clock
        start = clock.mark()
        no_sync = self.model.no_sync if hasattr(self.model, "no_sync") else contextlib.nullcontext
        packed = dict(real_tokens=b * L, sq_tokens=b * L * L) if self.packed else {}
        context = self.tracer.step(batch_size=b, max_len=L, global_batch=b * self.G, loss_weight=1.0, **packed) \
            if record else contextlib.nullcontext()
        with context as s:
            with no_sync():
                marks = [clock.mark()]
                loss = self.loss_fn(self.model, batch)
                marks.append(clock.mark())
                loss.backward()
                marks.append(clock.mark())
                self.optimizer.step()
                stepped = clock.mark()
                self.optimizer.zero_grad()
                marks.append(clock.mark())
            if s is not None:
                for name, a, z in zip(("fwd", "bwd", "opt"), marks, marks[1:]):
                    s.phases.append((name, a, z, None))
                s.loss = loss
                # The update is what ZeRO shards; clearing the gradients stays whole-model work.
                whole = clock.ms(marks[2], marks[3])
                if whole > 0:
                    self._update_shares.append(clock.ms(marks[2], stepped) / whole)
        return clock.ms(start, clock.mark())

    def step(self) -> None:
        """Times the next point of the grid once (no warm-up of its own)."""
        if not self._queue:
            self._queue = list(self.grid)
            random.Random(self.seed + self._passes).shuffle(self._queue)
            self._passes += 1
        b, L = self._queue.pop()
        self.model.train()
        self.time(b, L, self.make_batch(b, L), record=True)
        if self.distributed:  # the next training step starts with the ranks together, as after its allreduce
            dist.barrier()

    def close(self, what: Optional[str] = None) -> None:
        """Times the allreduce (several ranks) and writes the trace (rank 0); every rank calls it."""
        timed = len(self.tracer._steps)
        if what is None:
            what = (f"alongside training, one profiled step at a time: {timed} steps over {len(self.grid)} points in "
                    f"seeded random orders, no warm-up of their own")
        then = "allreduce, interference and all-gather" if self.interference else "allreduce and all-gather"
        self.tracer._meta.append(("profile", what + (f"; on {self.G} ranks at once; then {then}"
                                                     if self.distributed else "")))
        rows = self.tracer.rows()
        buckets = _ddp_bucket_bytes(self.model)
        if self.distributed and buckets:  # calibrate fits the allreduce line at the sizes a step reduces
            self.tracer._meta.append(("ddp_buckets", ",".join(str(b) for b in buckets)))
        comm = []
        if self.distributed:
            sizes = sorted(set(self.allreduce_bytes) | set(buckets))
            comm = allreduce_rows(sizes, self.reps, self.warmup, self.max_warmup, self.seed, self.device, self.agree)
            if self.interference:
                comm += self._interference(buckets, len(comm))
            parameter_bytes = sum(p.numel() * p.element_size() for p in self.model.parameters())
            self.tracer._meta.append(("allgather", allgather_timings(
                sorted(set(self.allreduce_bytes) | {parameter_bytes}), self.reps, self.warmup, self.max_warmup,
                self.device, self.agree, self.zero_gather)))
            self.tracer._meta.append(("allgather_as", GATHERS[self.zero_gather]))
            gathered: list = [None] * self.G
            dist.all_gather_object(gathered, rows)
        else:
            gathered = [rows]
        if self.rank != 0:
            return
        if self._update_shares:
            self.tracer._meta.append(("optimizer_update_share", f"{statistics.median(self._update_shares):.4f}"))
        everyone = [dict(gathered[g][i], rank=g) for i in range(len(rows)) for g in range(self.G)]
        runs = [("profile", self.G, everyone)] + ([("allreduce", 1, comm)] if comm else [])
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        ddpsim.write_trace(self.path, self.tracer._meta, runs)

    def _interference(self, buckets: list[int], first_step: int) -> list[dict]:
        """Backward beside allreduces both ways, with DDP's own hooks off; the median and the
        longest profiled lengths, as ddptrain."""
        lengths = sorted({self.lengths[len(self.lengths) // 2], self.lengths[-1]})
        return interference_rows(self.model, self.optimizer, self.make_batch, self.loss_fn, b=self.interference_batch,
                                 lengths=lengths, bucket=bucket_bytes(self.model, buckets), reps=self.reps,
                                 seed=self.seed, device=self.device, first_step=first_step, log=self.log)


def _progress(line: str) -> None:
    """profile()'s default log: each point's line on stderr, from rank 0 only."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_rank() == 0:
        print(line, file=sys.stderr, flush=True)


def profile(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    make_batch: Callable[[int, int], Any],
    loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor],
    path: str,
    *,
    batches: Optional[Sequence[int]] = None,
    lengths: Optional[Sequence[int]] = None,
    points: Optional[Sequence[tuple[int, int]]] = None,
    reps: int = 5,
    warmup: Optional[int] = None,
    max_warmup: int = 30,
    seed: int = 0,
    allreduce_bytes: Sequence[int] = DEFAULT_BYTES,
    device: Optional[torch.device] = None,
    model_name: str = "",
    interference: bool = True,
    interference_batch: Optional[int] = None,
    precision: str = "fp32",
    zero_gather: str = "broadcast",
    attention: str = "padded",
    log: Optional[Callable[[str], None]] = _progress,
) -> None:
    """Times training steps of ``loss_fn(model, make_batch(b, L))`` (forward, backward,
    ``optimizer.step()`` and ``zero_grad()``) at every (b, L) of the ``batches`` × ``lengths``
    grid, or at each of ``points`` (a list of (b, L): shapes a grid would waste time or memory
    on), and writes ``path`` (rank 0).

    ``model`` may be DDP-wrapped; every rank of the default group must call this together. With
    several ranks, the allreduce is timed too, and (``interference``, the default) backward
    beside it both ways at ``interference_batch`` (see :class:`Profiler`).

    ``precision`` is the trace's metadata line (``bf16`` where ``loss_fn`` runs under autocast).

    ``zero_gather`` is how ZeRO-1's gather of the parameters is timed (for ``allgather_factor``):
    ``"broadcast"``, each rank's shard broadcast from it, as PyTorch's ZeroRedundancyOptimizer
    gathers, or ``"all_gather"``, as DeepSpeed (and ``ddptrain``) do.

    ``attention="packed"`` profiles packed sequences: ``make_batch(b, L)`` then packs b samples of
    L tokens into one row, and each row records Σ s = b·L and Σ s² = b·L², from which
    ``ddpsim calibrate`` fits the packed form a + β·Σs + γ·Σs².

    Each point's progress goes to ``log``: by default a line on stderr from rank 0 with the time
    taken and left; ``log=None`` is silent."""
    if log is None:
        log = lambda line: None  # noqa: E731
    p = Profiler(model, optimizer, make_batch, loss_fn, path, batches=batches, lengths=lengths, points=points, reps=reps,
                 warmup=warmup, max_warmup=max_warmup, seed=seed, allreduce_bytes=allreduce_bytes, device=device,
                 model_name=model_name, interference=interference, interference_batch=interference_batch,
                 precision=precision, zero_gather=zero_gather, attention=attention, log=log)
    points = list(p.grid)
    random.Random(seed).shuffle(points)
    warmups = 0
    model.train()
    start = time.monotonic()
    for n, (b, L) in enumerate(points):
        batch = make_batch(b, L)
        warmups += settle(lambda: p.time(b, L, batch, record=False), warmup, max_warmup, p.agree)
        for _ in range(reps):
            p.time(b, L, batch, record=True)
        spent = time.monotonic() - start
        left = spent / (n + 1) * (len(points) - n - 1)
        log(f"profile: b={b} L={L} ({n + 1}/{len(points)}), {spent:.0f} s, about {left:.0f} s left")
    p.close(f"warmup {'auto' if warmup is None else warmup} ({warmups} runs in all), repetitions {reps}, "
            f"{len(points)} points in a seeded random order")


def _shards_itself(optimizer) -> bool:
    """PyTorch's ZeroRedundancyOptimizer, whose step() is a shard's update and the gather."""
    try:
        from torch.distributed.optim import ZeroRedundancyOptimizer
    except ImportError:  # a torch built without distributed
        return False
    return isinstance(optimizer, ZeroRedundancyOptimizer)


def _whole(name: str, value: Any, minimum: int) -> int:
    """An int argument (a Python or NumPy integer, not a float or a bool) of at least ``minimum``."""
    number = ddpsim._as_int(value)
    if number is None or number < minimum:
        raise ddpsim.UsageError(f"{name}: expected an integer of at least {minimum}, got {value!r}")
    return number


def _ddp_bucket_bytes(model: torch.nn.Module) -> list[int]:
    """The sizes of DDP's gradient buckets, one per bucket (empty for a model DDP does not wrap)."""
    logging_data = getattr(model, "_get_ddp_logging_data", None)
    text = str(logging_data().get("bucket_sizes", "")) if logging_data else ""
    return [int(b) for b in text.split(",") if b.strip().isdigit() and int(b) > 0]


def write_layout(model: torch.nn.Module, path: str, name: str = "layout") -> None:
    """The model's parameter layout as a ddpsim model without timings, for ``ddpsim calibrate
    --base``: one layer per parameter tensor in registration order (DDP's bucket order), each
    with its share of backward work (an embedding's elements / 25: its gradient is a scatter of
    rows, not a matrix product), as ``ddptrain --write-layout`` weighs DistilBERT's (there in
    elements, which ddpsim normalises alike)."""
    if not isinstance(model, torch.nn.Module):
        raise ddpsim.UsageError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    module = model.module if hasattr(model, "module") else model
    if not any(p.requires_grad for p in module.parameters()):
        raise ddpsim.UsageError(f"model {type(module).__name__}: no trained parameters, so no gradient for DDP to "
                                "bucket: a layout needs at least one")
    embedding = {id(p) for m in module.modules() if isinstance(m, torch.nn.Embedding) for p in m.parameters()}
    work = [(n, p.numel(), p.numel() / 25.0 if id(p) in embedding else float(p.numel()))
            for n, p in module.named_parameters()]
    # Shares of the whole, not element counts: ddpsim refuses a weight above 1e7 (a 1B model's
    # embedding is 2.6e8 elements), and normalises them anyway.
    total = sum(w for _, _, w in work)
    layers = [{"name": n, "params": count, "bwd_fraction": w / total} for n, count, w in work]
    doc = {"name": name,
           "source": f"parameter layout of the PyTorch model {type(module).__name__} (ddpsim.torch.write_layout); "
                     "no timings: a base for ddpsim calibrate",
           "forward_ms": {"a": 0, "beta": 0, "gamma": 0}, "backward_ms": {"a": 0, "beta": 0, "gamma": 0},
           "gradient_bytes_per_param": 2 if grad_dtype(module) in ("bf16", "fp16") else 4, "layers": layers}
    if os.path.isdir(path):
        raise ddpsim.UsageError(f"{path}: is a folder; give the layout file to write (e.g. {path}/layout.json)")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, suffix=".tmp") as out:
        json.dump(doc, out, indent=2)
    try:
        os.replace(out.name, path)
    except OSError:
        os.unlink(out.name)  # no half-written layout left behind
        raise
