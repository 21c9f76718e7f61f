"""A ``torch.utils.data`` batch sampler that plans each step with a ddpsim policy.

Every rank builds the same seeded plan from the lengths alone (no communication), as
``ddptrain`` does, and keeps its own part: the indices it trains on, and the weight
G·b_g/B_t that makes DDP's averaged gradient the global batch's mean gradient.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from ddpsim import InputError, Scheduler, _as_int


def scale_loss(mean_loss: torch.Tensor, weight: float, share: float = 1.0) -> torch.Tensor:
    """The loss to call backward() on under DDP.

    ``mean_loss`` is the mean over this rank's b_g samples (or over one micro-batch of them,
    whose ``share`` is b_k/b_g). DDP averages gradients over G ranks, so scaling by
    G·b_g/B_t makes the average (1/B_t)·Σ of every sample's gradient: the gradient of the
    global batch's mean loss, however unevenly the policy split the batch.
    """
    return mean_loss * (weight * share)


def _integer(name: str, value: Any, minimum: Optional[int] = None) -> int:
    """``value`` as an int (a Python or NumPy integer; not a float, a bool or a string), at least
    ``minimum``: a fractional length or a string world size is a mistake to name, not to round."""
    number = _as_int(value)
    if number is None:
        kind = "" if isinstance(value, bool) else f" ({type(value).__name__})"
        raise InputError(f"{name}: expected an integer, got {value!r}{kind}")
    if minimum is not None and number < minimum:
        raise InputError(f"{name}: expected an integer of at least {minimum}, got {number}")
    return number


def _sequence(name: str, value: Any, what: str = "one per sample") -> Sequence:
    """``value`` where it is a sequence of items (a list, a tuple, an array), else a message."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or not hasattr(value, "__getitem__"):
        raise InputError(f"{name}: expected a list of integers ({what}), got {value!r} ({type(value).__name__})")
    return value


def _world(world_size: Optional[int], rank: Optional[int]) -> tuple[int, int]:
    if world_size is None or rank is None:
        if not (dist.is_available() and dist.is_initialized()):
            raise ValueError("give world_size and rank, or initialise torch.distributed first")
        world_size = dist.get_world_size() if world_size is None else world_size
        rank = dist.get_rank() if rank is None else rank
    return world_size, rank


class BalancedBatchSampler(Sampler):
    """Yields this rank's sample indices, one list per step, for ``DataLoader(batch_sampler=...)``.

    Epoch e plans the stream that ``ddptrain --seed SEED+e`` trains on (the same shuffle of the
    data, shard by shard, and the same decisions), from its first step up to the step that would
    reach into the data's next pass: every sample comes at most once per epoch, and the ones
    still waiting in the policy's prefetch buffers then (at most ``world_size·buffer_size``,
    plus the N mod G that no shard holds) are left for later epochs, as ``drop_last`` leaves a
    tail. The epoch's plan is made when it starts (microseconds a step), so ``len()`` is exact
    and a resumed run (``start_step``) gets the remaining batches of the straight run.

    ``attention="packed"`` plans for samples packed end to end without padding (ddpsim's
    ``training.attention``): cost-aware policies then price a rank by Σ s and Σ s², and
    :meth:`shape` gives Σ s² (``sq_tokens``) with no padded tokens.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        *,
        world_size: Optional[int] = None,
        rank: Optional[int] = None,
        global_batch: int,
        policy: str = "minmax",
        seed: int = 0,
        b_max: Optional[Sequence[int]] = None,
        max_length: Optional[int] = None,
        micro_batches: int = 1,
        micro_batching: str = "even",
        perf_model: str = "",
        start_step: int = 0,
        attention: str = "padded",
    ):
        world_size = None if world_size is None else _integer("world_size", world_size, 1)
        rank = None if rank is None else _integer("rank", rank)
        self.world_size, self.rank = _world(world_size, rank)
        self.lengths = [_integer(f"lengths[{i}]", n, 1) for i, n in enumerate(_sequence("lengths", lengths))]
        self.global_batch = global_batch = _integer("global_batch", global_batch, 1)
        if not isinstance(policy, str):
            raise InputError(f"policy: expected a policy string such as 'minmax', got {policy!r}")
        seed = _integer("seed", seed, 0)
        micro_batches = _integer("micro_batches", micro_batches, 1)
        start_step = _integer("start_step", start_step, 0)
        self._options = dict(
            world_size=self.world_size,
            global_batch=global_batch,
            policy=policy,
            b_max=None if b_max is None else [_integer(f"b_max[{i}]", b, 1)
                                              for i, b in enumerate(_sequence("b_max", b_max, "one cap per rank"))],
            max_length=None if max_length is None else _integer("max_length", max_length, 1),
            micro_batches=micro_batches,
            micro_batching=micro_batching,
            perf_model=perf_model,
            attention=attention,
        )
        self.attention = attention
        self.seed = seed
        probe = Scheduler(self.lengths, seed=seed, **self._options)  # refuses bad input now, with the library's message
        if not 0 <= self.rank < self.world_size:
            raise InputError(
                f"rank {self.rank} is out of range: world size G={self.world_size} (ranks 0 to {self.world_size - 1})"
            )
        self.policy = probe.policy
        self.resolved_policy = probe.resolved_policy
        self.buffer_size = probe.buffer_size
        self.max_length = probe.max_length
        self.epoch = 0
        self.start_step = start_step
        self._planned_epoch: Optional[int] = None
        self._batches: list[list[int]] = []
        self._weights: list[float] = []
        self._micro: list[list[int]] = []
        self._rows: list[dict] = []

    def set_epoch(self, epoch: int, start_step: int = 0) -> None:
        """Moves to epoch ``epoch`` (another order, decided by seed+epoch); iteration starts at ``start_step``."""
        self.epoch = _integer("epoch", epoch, 0)
        self.start_step = _integer("start_step", start_step, 0)

    def _plan(self) -> None:
        if self._planned_epoch == self.epoch:
            return
        scheduler = Scheduler(self.lengths, seed=self.seed + self.epoch, **self._options)
        batches, weights, micro, rows = [], [], [], []
        while True:
            plan = scheduler.next()
            if plan.newest_epoch > 0:  # the step reaches into the data's next pass
                break
            batches.append(plan.indices(self.rank))
            weights.append(plan.loss_weight(self.rank))
            micro.append(plan.micro_sizes(self.rank))
            rows.append(plan.row(self.rank))
        if not batches:
            shard = len(self.lengths) // self.world_size
            raise InputError(
                f"lengths: {len(self.lengths)} samples do not make one step of global batch {self.global_batch} "
                f"with policy {self.policy} before the data's next pass: its prefetch buffer holds "
                f"{self.buffer_size} samples per rank, and each rank's shard {shard} (give more samples, or the "
                f"policy a smaller buffer option)"
            )
        self._batches, self._weights, self._micro, self._rows = batches, weights, micro, rows
        self._planned_epoch = self.epoch

    def __len__(self) -> int:
        self._plan()
        self._check_start()
        return len(self._batches) - self.start_step

    def _check_start(self) -> None:
        """A start past the epoch's steps would iterate nothing, in silence: said instead."""
        if self.start_step > len(self._batches):
            raise InputError(f"start_step {self.start_step}: epoch {self.epoch} has {len(self._batches)} steps "
                             f"(start at 0 to {len(self._batches)})")

    def __iter__(self) -> Iterator[list[int]]:
        self._plan()
        self._check_start()
        for step in range(self.start_step, len(self._batches)):
            yield self._batches[step]

    def steps_per_epoch(self) -> int:
        """Steps in the current epoch, the skipped ones of ``start_step`` included."""
        self._plan()
        return len(self._batches)

    def _step(self, step: Any) -> int:
        """``step`` checked against the epoch's plan: a step past it names the epoch's length."""
        self._plan()
        number = _integer("step", step, 0)
        if number >= len(self._batches):
            raise InputError(f"step {number}: epoch {self.epoch} has {len(self._batches)} steps (0 to "
                             f"{len(self._batches) - 1}); set_epoch() moves to the next")
        return number

    def _planned(self, attr: str, step: Any):
        """The plan's entry at ``step``, planned first (the list is the plan's, not an earlier one)."""
        number = self._step(step)
        return getattr(self, attr)[number]

    def loss_weight(self, step: int) -> float:
        """G·b_g/B_t of this rank at ``step`` of the current epoch (counted from its start)."""
        return self._planned("_weights", step)

    def micro_sizes(self, step: int) -> list[int]:
        """This rank's micro-batch sizes at ``step``, in order (one entry without accumulation)."""
        return self._planned("_micro", step)

    def shape(self, step: int) -> dict:
        """This rank's trace columns at ``step``: batch_size, max_len, real_tokens, padded_tokens,
        global_batch, loss_weight, micro, and with ``attention="packed"`` sq_tokens (what
        :class:`StepTracer` records)."""
        return dict(self._planned("_rows", step))

    def scale_loss(self, mean_loss: torch.Tensor, step: int, micro: Optional[int] = None) -> torch.Tensor:
        """``mean_loss`` (of the whole batch, or of micro-batch ``micro``) scaled for DDP; see :func:`scale_loss`."""
        share = 1.0
        if micro is not None:
            sizes = self.micro_sizes(step)
            index = _as_int(micro)
            if index is None or not 0 <= index < len(sizes):
                raise InputError(f"micro {micro!r}: step {step} has {len(sizes)} micro-batch(es) on rank {self.rank} "
                                 f"(0 to {len(sizes) - 1})")
            share = sizes[index] / max(1, sum(sizes))
        return scale_loss(mean_loss, self.loss_weight(step), share)
