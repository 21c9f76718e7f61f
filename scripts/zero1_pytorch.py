#!/usr/bin/env python3
"""ZeRO-1 and packed sequences as PyTorch users run them, measured for ddpsim: a small Llama-like
decoder (ddpsim.torch.decoder) trained over torch.distributed with DDP and either AdamW or
PyTorch's ZeroRedundancyOptimizer around it, on padded batches or on samples packed end to end
(--attention packed), every step traced by ddpsim.torch.StepTracer; and its profile through
ddpsim.torch.profile(), from which `ddpsim calibrate` fits the model (the all-gather and the
optimizer update's share included) that predicts the runs before they are made.

    PYTHONPATH=build/release/python python3 scripts/zero1_pytorch.py profile --out P
    PYTHONPATH=build/release/python python3 scripts/zero1_pytorch.py train --optimizer zero1 --out P/runs

Each rank runs on one core of its own (pinned, one thread), as ddptrain's ranks do. Sample
lengths are SST-2's as the BERT WordPiece tokenizer counts them (`ddpsim lengths`' histogram,
every sample once, in a seeded order); token ids are random (a timing, not a language model).
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import ddpsim
from ddpsim._core import optimizer_levels_text, parse_policy
from ddpsim.torch import BalancedBatchSampler, Profiler, StepTracer, keep_freed_memory, profile, write_layout
from ddpsim.torch.decoder import causal_lm_loss, decoder_from_config, packed_batch, packed_lm_loss, random_batch

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# 18.5 M parameters, which a CPU core steps in a fraction of a second. Untied, the embedding and
# the head (42% of them each) fall to different ranks under ZeroRedundancyOptimizer's partition
# by whole parameters, whose two shards are then near even; tied (--tie-embeddings, 10.7 M), the
# embedding's rank holds 73% of them.
CONFIG = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_attention_heads": 4,
          "num_key_value_heads": 2, "num_hidden_layers": 4, "vocab_size": 30522, "tie_word_embeddings": False,
          "max_position_embeddings": 512}


def integers(text):
    return [int(x) for x in text.split(",") if x]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("mode", choices=("profile", "train"), help="profile the model, or train it traced")
    p.add_argument("--out", required=True, help="folder: layout.json and profile.csv, or POLICY/steps.csv a policy")
    p.add_argument("--nproc", type=int, default=2, help="ranks, one core each (default 2)")
    p.add_argument("--lengths", default=os.path.join(SOURCE, "traces", "sst2-train-lengths.json"),
                   help="a `ddpsim lengths` histogram (default SST-2's training sentences)")
    p.add_argument("--max-length", type=int, default=128, help="truncation length in tokens (default 128)")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (train) or the profile's order (profile)")
    p.add_argument("--optimizer", choices=("adamw", "zero1"), default="adamw",
                   help="train: AdamW on every rank (DDP), or ZeroRedundancyOptimizer over AdamW (ZeRO-1)")
    p.add_argument("--policies", default="static,sorted",
                   help="train: batch policies, trained one after another (or a step each in turn: --interleaved)")
    p.add_argument("--interleaved", action="store_true",
                   help="train: one step of each policy in turn, each with its own model, optimizer and sampler "
                        "(as `ddptrain --policy A,B` trains), so that a machine drifting over minutes drifts under "
                        "every policy alike; the traces say `interleaved=` with the list")
    p.add_argument("--global-batch", type=int, default=24, help="train: samples a step over all ranks")
    p.add_argument("--steps", type=int, default=150, help="train: steps a policy")
    p.add_argument("--batches", default="1,2,3,4,6,8,12,16", help="profile: a rank's batch sizes")
    p.add_argument("--profile-lengths", default="8,12,16,24,32,48,66",
                   help="profile: sample lengths (a point is b samples of L tokens, padded or packed)")
    p.add_argument("--reps", type=int, default=5, help="profile: timed repetitions a point")
    p.add_argument("--profile-alongside", action="store_true",
                   help="train: after each training step, one step of the profile grid (--batches, "
                        "--profile-lengths, --reps) in the same processes, written to OUT/profile/: a profile of "
                        "the runs' own minutes and process state")
    p.add_argument("--attention", choices=("padded", "packed"), default="padded",
                   help="batches padded to their longest sample (default), or samples packed end to end into one "
                        "row, each attending to itself (remove-padding training)")
    p.add_argument("--broadcast-buffers", choices=("on", "off"), default="on",
                   help="DDP's broadcast_buffers: on (its default) broadcasts the model's buffers (the rotary "
                        "frequencies) from rank 0 at each forward, which makes every step start with the ranks "
                        "together; off leaves them to each rank")
    p.add_argument("--tie-embeddings", action="store_true",
                   help="the head shares the embedding's weights (llama-11m-tied; default untied, llama-18m)")
    a = p.parse_args()
    a.name = "llama-11m-tied" if a.tie_embeddings else "llama-18m"
    cores = len(os.sched_getaffinity(0))
    if not 1 <= a.nproc <= cores:
        p.error(f"--nproc {a.nproc}: from 1 to this machine's {cores} cores (a rank a core)")
    if a.global_batch < a.nproc or a.steps < 1 or a.reps < 1:
        p.error("--global-batch must be at least --nproc, --steps and --reps at least 1")
    a.policy_list = a.policies.split(",")
    folders = {}
    for policy in a.policy_list:
        try:
            folder = policy_folder(parse_policy(policy).label)
        except (ddpsim.UsageError, ddpsim.InputError) as e:
            p.error(f"--policies {a.policies}: {e}")
        if folder in folders:
            p.error(f"--policies {a.policies}: {policy} would write {folder}/, as {folders[folder]} does: "
                    "give each policy once")
        folders[folder] = policy
    if not os.path.isfile(a.lengths):
        p.error(f"--lengths {a.lengths}: no such file (write one with `ddpsim lengths TSV --vocab V --out HIST.json`)")
    return a


def sample_lengths(path, max_length, seed=0):
    """Every sample of the histogram once, truncated to max_length, in a seeded order."""
    with open(path) as f:
        counts = json.load(f)["counts"]
    lengths = [min(int(n), max_length) for n, k in counts for _ in range(int(k))]
    random.Random(seed).shuffle(lengths)
    return lengths


def make_batch(a, lengths, indices):
    """A padded batch (ids, mask), or a packed one (ids, lengths)."""
    pack = packed_batch if a.attention == "packed" else random_batch
    return pack(lengths, indices, CONFIG["vocab_size"])


def loss_fn(a, model, batch):
    """The loss through the DDP model's forward (so that DDP sees every parameter used)."""
    ids, second = batch
    if a.attention == "packed":
        return packed_lm_loss(model(ids, second), ids, second)
    return causal_lm_loss(model(ids), ids, second)


def fresh_model(a):
    torch.manual_seed(0)
    return DDP(decoder_from_config(dict(CONFIG, tie_word_embeddings=a.tie_embeddings)),
               broadcast_buffers=a.broadcast_buffers == "on")


def profiled_model(rank, a, folder):
    """A fresh model and its optimizer to profile, its layout written to ``folder`` (rank 0)."""
    model = fresh_model(a)
    if rank == 0:
        os.makedirs(folder, exist_ok=True)
        write_layout(model, os.path.join(folder, "layout.json"), name=a.name)
    return model, torch.optim.AdamW(model.parameters(), lr=1e-4)


def profile_arguments(a, folder):
    """What profile() and Profiler take beyond the model and its optimizer: the grid of b samples of L tokens."""
    return dict(make_batch=lambda b, L: make_batch(a, [L] * b, range(b)), loss_fn=lambda m, x: loss_fn(a, m, x),
                path=os.path.join(folder, "profile.csv"), batches=integers(a.batches),
                lengths=integers(a.profile_lengths), reps=a.reps, seed=a.seed, model_name=a.name,
                allreduce_bytes=[1 << 20, 4 << 20, 16 << 20, 64 << 20], attention=a.attention)


def run_profile(rank, a):
    profile(*profiled_model(rank, a, a.out), **profile_arguments(a, a.out))


def alongside_profiler(rank, a):
    """--profile-alongside: a Profiler stepped after each training step, into OUT/profile/."""
    folder = os.path.join(a.out, "profile")
    return Profiler(*profiled_model(rank, a, folder), **profile_arguments(a, folder))


def optimizer_for(model, kind):
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-4)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    return ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4,
                                   parameters_as_bucket_view=True)


def policy_folder(label):
    """A policy's folder name as ddptrain writes it: no ':' or '=' (a Windows checkout refuses ':')."""
    return label.replace(":", "-").replace("=", "-")


def policy_steps(rank, a, lengths, policy, optimizer_medians):
    """One policy's traced training, a step each time it is advanced (a generator), so that the
    policies can be trained one after another or a step each in turn. At its end, rank 0's
    optimizer median after step 0 goes into ``optimizer_medians``: the same work in every policy."""
    model = fresh_model(a)
    optimizer = optimizer_for(model, a.optimizer)
    sampler = BalancedBatchSampler(lengths, global_batch=a.global_batch, policy=policy, seed=a.seed,
                                   max_length=a.max_length, attention=a.attention)
    meta = {"data_parallel": "zero1" if a.optimizer == "zero1" else "ddp",
            **({"zero_partition": "parameters"} if a.optimizer == "zero1" else {}),
            "optimizer": ("ZeroRedundancyOptimizer over AdamW, parameters as a bucket view" if a.optimizer == "zero1"
                          else "AdamW"),
            "data": f"{os.path.basename(a.lengths)}: every sample once in a seeded order; random token ids",
            **({"interleaved": a.policies} if a.interleaved and len(a.policy_list) > 1 else {})}
    start = time.monotonic()
    with StepTracer(os.path.join(a.out, policy_folder(sampler.policy), "steps.csv"), policy=sampler.policy,
                    global_batch=a.global_batch, model=a.name, seed=a.seed, metadata=meta,
                    attention=a.attention) as tracer:
        tracer.attach(model)
        for step, indices in enumerate(sampler):
            if step == a.steps:
                break
            batch = make_batch(a, lengths, indices)
            with tracer.step(**sampler.shape(step)) as s:
                with s.phase("fwd"):
                    loss = loss_fn(a, model, batch)
                with s.phase("bwd"):
                    sampler.scale_loss(loss, step).backward()
                with s.phase("opt"):
                    optimizer.step()
                    optimizer.zero_grad()
                s.loss = loss
            if rank == 0 and (step + 1) % 50 == 0:
                print(f"{sampler.policy}: step {step + 1}/{a.steps}, {time.monotonic() - start:.0f} s", flush=True)
            yield
        opt = [row["opt_ms"] for row in tracer.rows()[1:]]
        if opt:
            optimizer_medians[sampler.policy] = statistics.median(opt)


def train(rank, a, lengths, alongside):
    """Every policy of --policies, one after another or (--interleaved) a step each in turn; the
    alongside profile, where asked, steps after each training step (after each turn, interleaved)."""
    medians = {}
    runs = [policy_steps(rank, a, lengths, policy, medians) for policy in a.policy_list]
    if a.interleaved:
        while runs:
            runs = [run for run in runs if next(run, StopIteration) is not StopIteration]
            if runs and alongside:
                alongside.step()
    else:
        for run in runs:
            for _ in run:
                if alongside:
                    alongside.step()
    if rank == 0 and len(medians) > 1:
        print(optimizer_levels_text(list(medians.items()), a.interleaved), end="", flush=True)


def worker(rank, a, init):
    cores = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cores[rank]})
    torch.set_num_threads(1)
    # Subnormal gradients, which this tiny model reaches as its loss falls, run backward up to 20x
    # slower on some x86 cores: flushed to zero, a step's time depends on its shape, not on how far
    # training has gone.
    torch.set_flush_denormal(True)
    keep_freed_memory()  # as ddptrain does: a step's time then follows its shape, not malloc's page faults
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=a.nproc)
    try:
        if a.mode == "profile":
            run_profile(rank, a)
        else:
            lengths = sample_lengths(a.lengths, a.max_length)
            alongside = alongside_profiler(rank, a) if a.profile_alongside else None
            train(rank, a, lengths, alongside)
            if alongside:
                alongside.close()
    finally:
        dist.destroy_process_group()
    # Its traces written, a rank leaves without finalizing the interpreter: torch 1.13 aborts a
    # process whose Gloo threads still release a collective's tensors as the interpreter finalizes.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main():
    a = parse_args()
    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(worker, args=(a, "file://" + os.path.join(tmp, "rendezvous")), nprocs=a.nproc, join=True)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    try:
        main()
    except ddpsim.UsageError as e:
        sys.exit(f"zero1_pytorch.py: {e}")
