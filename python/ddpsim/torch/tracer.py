"""StepTracer: times each rank's training steps into ddpsim's trace schema.

Phases are timed with CUDA events on a GPU and the monotonic clock on a CPU. DDP's exposed
gradient synchronisation is told apart from backward by a communication hook: the last bucket
handed to the allreduce marks the end of the rank's own backward computation, and the rest of
``backward()`` is the wait for the other ranks. Rows stay in memory until :meth:`close`, which
gathers every rank's rows and has rank 0 write the trace to a temporary file renamed into
place: a run stopped early leaves no trace rather than a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Optional

import torch
import torch.distributed as dist

import ddpsim
from ddpsim._core import policy_label
from ddpsim.torch.buffers import PreForwardTimer, broadcasts, ddp_buffers, pre_forward_line
from ddpsim.torch.machine import blas_kernels, cpu_model, malloc_setting
from ddpsim.torch.shapes import ATTENTIONS, count as _count, non_negative as _non_negative, step_shape as _shape

_PHASES = ("fwd", "bwd", "opt")


class _Clock:
    """Marks on the monotonic clock, or CUDA events on the current stream (read at close)."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"

    def mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def ms(self, a: Any, b: Any) -> float:
        if self.cuda:
            b.synchronize()
            return a.elapsed_time(b)
        return (b - a) * 1e3


class TracedStep:
    """One step of one rank: the phases, the loss, and the batch's shape (see StepTracer.step)."""

    def __init__(self, tracer: "StepTracer", shape: dict):
        self._tracer = tracer
        self.shape = shape
        self.loss: Any = None
        self.phases: list[tuple[str, Any, Any, Any]] = []  # (name, start, end, last bucket mark or None)
        self.start = self.end = None
        self.peak_mem_mib: Optional[float] = None
        self.pre_forward: list = []  # DDP's pre-forward spans (start, end marks), where it broadcasts buffers
        self._open_phase: Optional[str] = None

    @contextlib.contextmanager
    def phase(self, name: str):
        """Times a phase: "fwd", "bwd" (DDP's wait split off) or "opt"; each may recur (micro-batches)."""
        if name not in _PHASES:
            raise ValueError(f'phase "{name}": expected one of {", ".join(_PHASES)}')
        if self.end is not None:
            raise ddpsim.UsageError(f'phase "{name}": its step has ended; time phases inside `with tracer.step(...)`')
        if self._open_phase:
            raise ddpsim.UsageError(f'phase "{name}" inside phase "{self._open_phase}": phases do not nest')
        self._open_phase = name
        clock = self._tracer._clock
        self._tracer._last_bucket = None
        start = clock.mark()
        try:
            yield
        finally:
            self._open_phase = None
        end = clock.mark()
        self.phases.append((name, start, end, self._tracer._last_bucket if name == "bwd" else None))


def _emulation(emulate_ranks, allreduce_ms, distributed: bool, world_size, rank) -> tuple[int, float]:
    """emulate_ranks and allreduce_ms checked against each other and the process's own ranks."""
    G = _count("emulate_ranks", emulate_ranks, 0)
    if G == 1:
        raise ddpsim.InputError("emulate_ranks 1: one rank takes no turns; give 2 or more, or 0 for none")
    allreduce_ms = _non_negative("allreduce_ms", allreduce_ms, " of ms")
    if allreduce_ms and not G:
        raise ddpsim.UsageError("allreduce_ms is the modelled allreduce of emulated ranks: give emulate_ranks too "
                                "(real ranks' allreduce is measured through attach)")
    if G and (distributed or (world_size or 1) > 1):
        raise ddpsim.UsageError(f"emulate_ranks {G}: emulated ranks run in one process; trace real ranks without it "
                                "(or leave torch.distributed uninitialised)")
    if G and rank:
        raise ddpsim.UsageError(f"rank {rank}: under emulate_ranks the tracer numbers the ranks itself, in the order "
                                "of each step's tracer.step(...) calls; leave rank out")
    return G, allreduce_ms


def _emulated(rows: list[dict], G: int, allreduce_ms: float) -> list[list[dict]]:
    """One process's rank-steps as G ranks' rows, as ddptrain --emulate-ranks times a step: each
    rank waits for the slowest forward and backward, then the modelled allreduce; the optimizer
    (timed in any of a step's rank-steps) is the step's, and so on every rank's row."""
    ranks: list[list[dict]] = [[] for _ in range(G)]
    for first in range(0, len(rows), G):
        step = rows[first:first + G]
        slowest = max(r["fwd_ms"] + r["bwd_ms"] for r in step)
        opt = sum(r["opt_ms"] for r in step)
        for g, r in enumerate(step):
            wait = slowest - r["fwd_ms"] - r["bwd_ms"] + allreduce_ms
            ranks[g].append(dict(r, step=first // G, rank=g, comm_wait_ms=wait, opt_ms=opt,
                                 step_ms=slowest + allreduce_ms + opt))
    return ranks


def grad_dtype(model: torch.nn.Module) -> str:
    """The dtype DDP's buckets hold: that of the trained parameters (fp32 under autocast), as
    ddpsim names it ("" for a model without trained parameters)."""
    names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    trained = [p for p in model.parameters() if p.requires_grad]
    return names.get(trained[0].dtype, str(trained[0].dtype)) if trained else ""


class StepTracer:
    """Records every rank's steps and writes the trace ``ddpsim calibrate/replay/validate`` read.

    ``path`` is the CSV to write; ``policy`` its policy column (the sampler's ``policy`` label);
    ``global_batch`` the fixed B of every step (omit for token_budget); ``model``, ``data`` and
    ``metadata`` are written as metadata lines. Call :meth:`attach` on the DDP model, wrap each
    step in :meth:`step`, and :meth:`close` (every rank) at the end, or use it as a context manager.

    ``emulate_ranks=G`` traces G ranks run in turn in one process, as ``ddptrain --emulate-ranks``
    does (one GPU standing for G): a step is G calls of :meth:`step`, rank 0 first, with the
    optimizer timed as an "opt" phase in any of them; every rank's row then waits for the slowest
    rank's forward and backward plus ``allreduce_ms``, a modelled allreduce added after it.

    ``attention="packed"`` traces samples packed end to end without padding: each step then
    gives ``sq_tokens`` (Σ s²) beside ``real_tokens`` (Σ s), and the trace says so, for
    ``ddpsim calibrate`` to fit a + β·Σs + γ·Σs² and ``replay`` to simulate packed steps.
    """

    def __init__(
        self,
        path: str,
        *,
        policy: str = "trace",
        global_batch: Optional[int] = None,
        world_size: Optional[int] = None,
        rank: Optional[int] = None,
        device: Optional[torch.device] = None,
        model: str = "",
        data: str = "",
        seed: Optional[int] = None,
        precision: str = "fp32",
        metadata: Optional[dict] = None,
        group: Any = None,
        emulate_ranks: int = 0,
        allreduce_ms: float = 0.0,
        attention: str = "padded",
    ):
        if attention not in ATTENTIONS:
            raise ddpsim.InputError(f'attention "{attention}": expected padded or packed')
        self.attention = attention
        distributed = dist.is_available() and dist.is_initialized()
        self.emulated, self.allreduce_ms = _emulation(emulate_ranks, allreduce_ms, distributed, world_size, rank)
        group_size = dist.get_world_size(group) if distributed else 1
        self.world_size = group_size if world_size is None else _count("world_size", world_size, 1)
        self.rank = (dist.get_rank(group) if distributed else 0) if rank is None else _count("rank", rank, 0)
        if self.world_size != group_size and (distributed or self.world_size > 1):  # close() gathers over the group
            raise ddpsim.UsageError(
                f"world_size {self.world_size}: close() gathers every rank's rows over the process group, which has "
                f"{group_size} rank(s){'' if distributed else ' (torch.distributed is not initialised)'}: leave "
                "world_size out, or initialise the process group first")
        if metadata is not None and not isinstance(metadata, dict):
            raise ddpsim.InputError(f"metadata: expected a dict of key: value lines, got {type(metadata).__name__}")
        if global_batch is not None:
            global_batch = _count("global_batch", global_batch, 1)
        if not 0 <= self.rank < self.world_size:
            raise ddpsim.InputError(
                f"rank {self.rank} is out of range: world size G={self.world_size} (ranks 0 to {self.world_size - 1})"
            )
        if os.path.isdir(path):
            raise ddpsim.UsageError(f"{path}: is a folder; give the trace file to write (e.g. {path}/steps.csv)")
        self.path = path
        self.policy = policy_label(policy)
        self.global_batch = global_batch
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        self.group = group
        self._clock = _Clock(self.device)
        self._steps: list[TracedStep] = []
        self._last_bucket: Any = None
        self._hooked = False
        self._pre_forward: Optional[PreForwardTimer] = None
        self._closed = False
        self._open_step = False
        given = {str(k): str(v) for k, v in (metadata or {}).items()}  # a given key replaces the default's value
        for key, value in given.items():
            if not key or any(c in key for c in "=\n\r#") or any(c in value for c in "\n\r"):
                raise ddpsim.InputError(f"metadata {key!r}: {value!r}: a trace's metadata line is one line of "
                                        "key=value (no line break anywhere, no '=' or '#' in the key)")
        if "world_size" in given and given["world_size"] != str(self.world_size):
            raise ddpsim.InputError(f"metadata world_size={given['world_size']}, but the trace's ranks number "
                                    f"{self.world_size} (the process group's, or world_size=): leave it out")
        self._meta = [(k, given.pop(k, v)) for k, v in self._metadata(model, data, seed, precision, distributed)]
        self._meta += list(given.items())

    def _metadata(self, model: str, data: str, seed: Optional[int], precision: str, distributed: bool) -> list:
        device = torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else "cpu"
        meta = [
            ("tool", "ddpsim.torch"),
            ("device", device),
            ("world_size", str(self.world_size)),
            ("emulated_ranks", str(self.emulated)),
            ("backend", dist.get_backend(self.group) if distributed else "none"),
            ("torch", torch.__version__),
            ("ddpsim", ddpsim.__version__),
            ("attention", self.attention),
            ("precision", precision),
            ("policy", self.policy),
        ]
        if seed is not None:
            meta.append(("seed", str(seed)))
        if self.global_batch is not None:
            meta.append(("global_batch", str(self.global_batch)))
        if model:
            meta.append(("model", model))
        if data:
            meta.append(("data", data))
        if self.device.type == "cpu":
            meta.append(("threads", str(torch.get_num_threads())))
            meta += [("cpu", cpu_model()), ("blas", blas_kernels()), ("malloc", malloc_setting())]
        if self.emulated:
            meta.append(("allreduce", f"modelled: {self.allreduce_ms:g} ms a step after the slowest rank (no overlap); "
                                      f"NOT a real {self.emulated}-GPU run"))
        else:
            meta.append(("allreduce", "measured: DDP's buckets, overlapped with backward" if self.world_size > 1
                         else "none (one rank)"))
        return meta

    def attach(self, ddp_model: torch.nn.parallel.DistributedDataParallel, hook=None, state=None) -> None:
        """Registers a communication hook on ``ddp_model`` (DDP's default allreduce, or ``hook`` with
        ``state``) that marks when each bucket is handed over; DDP takes one hook per model."""
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

        inner = hook or default_hooks.allreduce_hook

        def marking(hook_state, bucket):
            self._last_bucket = self._clock.mark()
            return inner(hook_state, bucket)

        ddp_model.register_comm_hook(state, marking)
        self._hooked = True
        dtype = grad_dtype(ddp_model)
        if dtype and not any(key == "grad_dtype" for key, _ in self._meta):  # DDP reduces gradients in this dtype
            self._meta.append(("grad_dtype", dtype))
        if not any(key == "ddp_buffers" for key, _ in self._meta):
            self._meta.append(("ddp_buffers", ddp_buffers(ddp_model)))
        if broadcasts(ddp_model) and self._pre_forward is None:
            self._pre_forward = PreForwardTimer(ddp_model, self._clock)

    @contextlib.contextmanager
    def step(
        self,
        *,
        batch_size: int,
        max_len: int,
        real_tokens: Optional[int] = None,
        padded_tokens: Optional[int] = None,
        global_batch: Optional[int] = None,
        loss_weight: Optional[float] = None,
        micro: Optional[list] = None,
        sq_tokens: Optional[int] = None,
        **given,
    ):
        """One training step of this rank: time its phases inside with ``s.phase(...)`` and set
        ``s.loss``. The shape is this rank's batch (``**sampler.shape(step)`` gives all of it;
        its step and rank the tracer numbers itself)."""
        unknown = sorted(set(given) - {"step", "rank"})
        if unknown:
            raise ddpsim.UsageError(f"step: {', '.join(unknown)}: not a column of the step (batch_size, max_len, "
                                    "real_tokens, padded_tokens, global_batch, loss_weight, micro, sq_tokens)")
        if self._closed:
            raise ddpsim.UsageError("step: the tracer is closed (its trace is written); trace later steps with a new one")
        if self._open_step:
            raise ddpsim.UsageError("step inside a step: steps do not nest (end the last `with tracer.step(...)` first)")
        shape = _shape(batch_size, max_len, real_tokens, padded_tokens, global_batch, loss_weight, micro, sq_tokens,
                       self.attention == "packed")
        s = TracedStep(self, shape)
        if self._clock.cuda:
            torch.cuda.reset_peak_memory_stats(self.device)
        s.start = self._clock.mark()
        if self._pre_forward:
            self._pre_forward.take()  # a forward outside the traced steps is not this step's
        self._open_step = True
        try:
            yield s
        finally:
            self._open_step = False
        s.end = self._clock.mark()
        if self._pre_forward:
            s.pre_forward = self._pre_forward.take()
        if self._clock.cuda:
            s.peak_mem_mib = torch.cuda.max_memory_allocated(self.device) / 2**20
        if isinstance(s.loss, torch.Tensor):
            s.loss = s.loss.detach().float().item()
        self._steps.append(s)

    def _row(self, number: int, s: TracedStep) -> dict:
        ms = self._clock.ms
        times = {"fwd": 0.0, "bwd": 0.0, "opt": 0.0}
        wait = 0.0
        for name, start, end, last_bucket in s.phases:
            if last_bucket is not None:  # DDP reduced in this backward: the wait follows its last bucket
                times[name] += ms(start, last_bucket)
                wait += ms(last_bucket, end)
            else:
                times[name] += ms(start, end)
        row = dict(s.shape, step=number, rank=self.rank, fwd_ms=times["fwd"], bwd_ms=times["bwd"],
                   comm_wait_ms=wait if self._hooked or self.world_size == 1 else None, opt_ms=times["opt"],
                   step_ms=ms(s.start, s.end), peak_mem_mib=s.peak_mem_mib, loss=s.loss)
        return row

    def rows(self) -> list[dict]:
        """This rank's rows so far (timings in ms); under emulate_ranks, every rank's rows of the
        whole steps so far, in step and rank order, as the trace will hold them."""
        mine = self._own_rows()
        if not self.emulated:
            return mine
        whole = mine[:len(mine) - len(mine) % self.emulated]
        return [row for step in zip(*_emulated(whole, self.emulated, self.allreduce_ms)) for row in step]

    def _own_rows(self) -> list[dict]:
        return [self._row(i, s) for i, s in enumerate(self._steps)]

    def close(self) -> None:
        """Gathers every rank's rows (a collective: every rank calls it) and writes the trace (rank 0)."""
        if self._closed:
            return
        mine = self._own_rows()
        if not mine:  # the tracer stays open: steps may still come
            raise ddpsim.UsageError(f"close: no step was traced, so {self.path} would hold no row; wrap each "
                                    "training step in `with tracer.step(...)`")
        if self.emulated and len(mine) % self.emulated:
            raise ddpsim.UsageError(f"close: {len(mine)} rank-steps traced, not a whole number of steps of "
                                    f"emulate_ranks {self.emulated}: each step is one `tracer.step(...)` a rank")
        self._closed = True
        if self._pre_forward and not self.emulated:  # travels with the rows; rank 0 sums it up
            for row, s in zip(mine, self._steps):
                row["_pre_forward_ms"] = sum(self._clock.ms(a, z) for a, z in s.pre_forward)
        if self.emulated:
            gathered = _emulated(mine, self.emulated, self.allreduce_ms)
        elif self.world_size > 1:
            gathered: list = [None] * self.world_size
            dist.all_gather_object(gathered, mine, group=self.group)
        else:
            gathered = [mine]
        if self.rank != 0:
            return
        if any(len(r) != len(gathered[0]) for r in gathered):
            raise RuntimeError(f"ranks traced different numbers of steps: {[len(r) for r in gathered]}")
        ranks = len(gathered)
        rows = []
        for i in range(len(gathered[0])):
            step = [gathered[g][i] for g in range(ranks)]
            total = sum(r["batch_size"] for r in step)
            for r in step:
                r["global_batch"] = r["global_batch"] or total
                if r["loss_weight"] is None:
                    r["loss_weight"] = ranks * r["batch_size"] / total if total else 0.0
                rows.append(r)
        if "_pre_forward_ms" in rows[0]:
            waits = [[r.pop("_pre_forward_ms") for r in rank_rows if "_pre_forward_ms" in r] for rank_rows in gathered]
            self._meta.append(("ddp_pre_forward", pre_forward_line([w for w in waits if w])))
        folder = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(folder, exist_ok=True)
        ddpsim.write_trace(self.path, self._meta, [(self.policy, ranks, rows)])

    def __enter__(self) -> "StepTracer":
        return self

    def __exit__(self, kind, value, tb) -> None:
        if kind is None:  # an interrupted run writes nothing
            self.close()
