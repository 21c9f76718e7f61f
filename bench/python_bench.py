#!/usr/bin/env python3
"""Costs of the Python package, as docs/python.md reports them:

1. planning a step from Python (Scheduler.next() and this rank's indices as a list), per policy,
   at G=8, B=256 and at G=1024, B=16384, on SST-2 lengths;
2. StepTracer's overhead on a CPU training step of a small transformer: traced and untraced
   steps in alternating blocks (so that the machine's drift falls on both), and the tracer's
   own bookkeeping per step timed alone.

    PYTHONPATH=build/release/python python3 bench/python_bench.py [--quick]
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))

import ddpsim  # noqa: E402

POLICIES = ["static", "minmax", "kk", "sorted", "token_budget", "verl"]


def plan_costs(G, B, steps):
    """Per step: Scheduler.next() and rank 0's indices as a Python list, against the library
    alone (Scheduler.skip: the same draws and decision, no Python objects)."""
    lengths = ddpsim.synthetic_lengths("sst2", max(67349, B * (2 * steps + 20)), 128, 0)
    for policy in POLICIES:
        s = ddpsim.Scheduler(lengths, world_size=G, global_batch=B, policy=policy, max_length=128)
        s.skip(3)  # the buffers filled and the permutation drawn
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            s.next().indices(0)
            times.append((time.perf_counter() - start) * 1e6)
        start = time.perf_counter()
        s.skip(steps)
        library = (time.perf_counter() - start) * 1e6 / steps
        times.sort()
        print(f"plan G={G:<5} B={B:<6} {policy:<13} median {statistics.median(times):8.1f} us  "
              f"p95 {times[int(0.95 * (len(times) - 1))]:8.1f} us  mean {statistics.mean(times):8.1f} us  "
              f"(library alone: mean {library:8.1f} us)")


def tracer_overhead(blocks, steps):
    import torch
    import torch.nn.functional as F

    import common
    from ddpsim.torch import StepTracer

    torch.set_num_threads(1)
    model = common.small_transformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lengths = ddpsim.synthetic_lengths("sst2", 4000, 64, 0)
    sampler = ddpsim.Scheduler(lengths, world_size=1, global_batch=16, policy="static", max_length=64)
    batches = [common.collate(lengths, sampler.next().indices(0)) for _ in range(steps)]
    tracer = StepTracer(os.devnull + ".csv", policy="static")  # never closed: nothing is written

    def train(batch, traced):
        ids, mask, labels = batch
        if not traced:
            loss = F.cross_entropy(model(ids, mask), labels)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            return
        with tracer.step(batch_size=ids.shape[0], max_len=ids.shape[1]) as s:
            with s.phase("fwd"):
                loss = F.cross_entropy(model(ids, mask), labels)
            with s.phase("bwd"):
                loss.backward()
            with s.phase("opt"):
                optimizer.step()
                optimizer.zero_grad()
            s.loss = loss

    for batch in batches[:5]:
        train(batch, False)
    block_ms = {False: [], True: []}
    for b in range(2 * blocks):
        traced = b % 2 == 1
        start = time.perf_counter()
        for batch in batches:
            train(batch, traced)
        block_ms[traced].append((time.perf_counter() - start) * 1e3 / len(batches))
    plain, traced = statistics.median(block_ms[False]), statistics.median(block_ms[True])
    print(f"tracer: step {plain:.2f} ms untraced, {traced:.2f} ms traced (medians of {blocks} blocks of "
          f"{steps} steps): {100 * (traced - plain) / plain:+.2f}%")

    bare = StepTracer(os.devnull + ".csv", policy="static")
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        with bare.step(batch_size=16, max_len=64) as s:
            with s.phase("fwd"):
                pass
            with s.phase("bwd"):
                pass
            with s.phase("opt"):
                pass
    own_us = (time.perf_counter() - start) * 1e6 / n
    start = time.perf_counter()
    bare.rows()
    rows_us = (time.perf_counter() - start) * 1e6 / n
    print(f"tracer: its own work {own_us:.1f} us per step while training + {rows_us:.1f} us per step at close = "
          f"{100 * (own_us + rows_us) / (plain * 1e3):.3f}% of the untraced step")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    plan_costs(8, 256, 50 if args.quick else 500)
    plan_costs(1024, 16384, 5 if args.quick else 40)
    tracer_overhead(2 if args.quick else 6, 10 if args.quick else 40)


if __name__ == "__main__":
    main()
