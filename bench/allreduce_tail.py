#!/usr/bin/env python3
"""How heavy the tail of Gloo's allreduce is on this machine, as docs/python.md reports it: two
ranks pinned to a core each time 120 allreduces of each size after a barrier, and rank 0 prints
the quantiles and the mean. `ddpsim calibrate` fits each size's median, so a mean well above
the median is wait a model calibrated here leaves out.

    PYTHONPATH=build/release/python python3 bench/allreduce_tail.py
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))

import common  # noqa: E402

SIZES = (16 << 10, 256 << 10, 1 << 20, 4 << 20)
WARMUP, TIMED = 10, 120


def worker(rank, world_size):
    import torch
    import torch.distributed as dist

    rows = []
    for size in SIZES:
        buffer = torch.zeros(size // 4)
        times = []
        for i in range(WARMUP + TIMED):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(buffer)
            if i >= WARMUP:
                times.append((time.perf_counter() - start) * 1e3)
        times.sort()
        at = [times[int(q * (len(times) - 1))] for q in (0, 0.25, 0.5, 0.75, 0.9, 1)]
        rows.append(f"{size >> 10:>6} KiB  min {at[0]:.2f}  P25 {at[1]:.2f}  median {at[2]:.2f}  P75 {at[3]:.2f}  "
                    f"P90 {at[4]:.2f}  max {at[5]:.2f}  mean {statistics.mean(times):.2f} ms")
    if rank == 0:
        print(f"Gloo allreduce, {world_size} ranks pinned a core each, {TIMED} timed after a barrier each:")
        print("\n".join(rows))


if __name__ == "__main__":
    common.spawn(worker, 2, pin=True)
