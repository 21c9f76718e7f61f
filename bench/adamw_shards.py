#!/usr/bin/env python3
"""What each ZeRO-1 shard's AdamW update costs, against its share of the parameters: ddpsim
prices a shard's update by its parameter count (training.zero_partition), and this measures
whether time follows count. The shards are PyTorch's ZeroRedundancyOptimizer's (whole
parameters, largest first, each to the rank holding fewest) of scripts/zero1_pytorch.py's
decoder; each shard's AdamW step, and the whole model's, is timed on this process's core alone
(one thread), the median of --reps steps after three warm-up steps.

    PYTHONPATH=build/release/python taskset -c 0 python3 bench/adamw_shards.py [--untied] [--ranks 2]
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from zero1_pytorch import CONFIG  # noqa: E402
from ddpsim.torch.decoder import decoder_from_config  # noqa: E402


def shards(params, ranks):
    """ZeroRedundancyOptimizer's partition of one parameter group."""
    held, out = [0] * ranks, [[] for _ in range(ranks)]
    for p in sorted(params, key=lambda t: t.numel(), reverse=True):
        r = held.index(min(held))
        out[r].append(p)
        held[r] += p.numel()
    return out


def step_ms(params, reps):
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    times = []
    for _ in range(reps + 3):
        start = time.perf_counter()
        optimizer.step()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times[3:])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--untied", action="store_true", help="the untied decoder (18.5 M; default the tied 10.7 M)")
    p.add_argument("--ranks", type=int, default=2, help="ZeRO-1's ranks, the shards (default 2)")
    p.add_argument("--reps", type=int, default=15, help="timed steps each (default 15)")
    a = p.parse_args()
    if a.ranks < 1 or a.reps < 1:
        p.error("--ranks and --reps must be at least 1")
    torch.set_num_threads(1)
    model = decoder_from_config(dict(CONFIG, tie_word_embeddings=not a.untied))
    params = list(model.parameters())
    total = sum(t.numel() for t in params)
    whole = step_ms(params, a.reps)
    print(f"whole model: {total} parameters in {len(params)} tensors, {whole:.2f} ms, "
          f"{whole / total * 1e6:.2f} ns a parameter")
    for r, shard in enumerate(shards(params, a.ranks)):
        n = sum(t.numel() for t in shard)
        ms = step_ms(shard, a.reps)
        print(f"rank {r}'s shard: {n / total:.1%} of the parameters in {len(shard)} tensors, {ms:.2f} ms "
              f"({ms / whole:.1%} of the whole's), {ms / n * 1e6:.2f} ns a parameter")


if __name__ == "__main__":
    main()
