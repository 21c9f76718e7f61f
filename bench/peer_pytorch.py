#!/usr/bin/env python3
"""The study's own stack as a peer for ddptrain: Python, PyTorch eager and Hugging Face's
DistilBERT (built from its config, random init, nothing downloaded), training SST-2 with the
static or the min-max batch loop, G ranks emulated in one process on one GPU as
`ddptrain --emulate-ranks G` does. Timed as ddptrain times an emulated step: per rank, CUDA
events around forward and around backward, each rank's batch copied to the GPU before its
timing starts; a step is the slowest rank's forward + backward, plus the same modelled ring
allreduce, plus the optimizer. Writes steps.csv in ddpsim's trace schema through
ddpsim.torch.StepTracer (emulate_ranks=G; ddpsim validate reads it) and summary.json; needs the
ddpsim package on PYTHONPATH (build/release/python).

    python3 bench/peer_pytorch.py --data sst2/train.tsv --vocab vocab.txt --policy minmax --out peer/minmax
"""
import argparse
import json
import math
import os
import random
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="GLUE SST-2 train.tsv (sentence<TAB>label, with a header)")
    p.add_argument("--vocab", required=True, help="the uncased WordPiece vocab.txt")
    p.add_argument("--policy", choices=["static", "minmax"], default="static",
                   help="static: B/G samples per rank; minmax: the study's min-max over padded tokens")
    p.add_argument("--global-batch", type=int, default=48, help="B, samples per step over all ranks")
    p.add_argument("--ranks", type=int, default=4, help="G, ranks emulated in this process")
    p.add_argument("--buffer", type=int, default=64, help="minmax: K, each rank's prefetch buffer")
    p.add_argument("--steps", type=int, default=800)
    p.add_argument("--max-length", type=int, default=256)
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="bf16: forward under autocast, as ddptrain --precision bf16")
    p.add_argument("--link-GBps", type=float, default=10, help="the modelled ring allreduce, as ddptrain's default")
    p.add_argument("--latency-us", type=float, default=10, help="its per-step latency")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cuda", help="cuda (the comparison) or cpu (the plumbing alone)")
    p.add_argument("--out", required=True, help="folder for steps.csv and summary.json")
    a = p.parse_args()
    if a.ranks < 1 or a.global_batch < a.ranks:
        p.error("--global-batch must be at least --ranks")
    if a.policy == "static" and a.global_batch % a.ranks:
        p.error("static needs --global-batch divisible by --ranks")
    if a.policy == "minmax" and a.global_batch > a.ranks * a.buffer:
        p.error("minmax needs --global-batch <= --ranks x --buffer")
    for path in (a.data, a.vocab):
        if not os.path.isfile(path):
            p.error(f"{path}: no such file")
    return a


def load_sst2(path, vocab, max_length):
    """Token ids of every sentence ([CLS] ... [SEP], truncated) and its label."""
    from tokenizers import BertWordPieceTokenizer
    tok = BertWordPieceTokenizer(vocab, lowercase=True)
    tok.enable_truncation(max_length)
    sentences, labels = [], []
    with open(path, encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        if header[:2] != ["sentence", "label"]:
            sys.exit(f"{path}:1: expected the header 'sentence<TAB>label', got {header!r}")
        for n, line in enumerate(f, start=2):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 2 or fields[1] not in ("0", "1"):
                sys.exit(f"{path}:{n}: expected a sentence, a tab and a label 0 or 1")
            sentences.append(fields[0])
            labels.append(int(fields[1]))
    return [e.ids for e in tok.encode_batch(sentences)], labels


class Shards:
    """DistributedSampler's order: a seeded permutation per epoch, rank g taking every G-th."""

    def __init__(self, n, ranks, seed):
        self.n, self.ranks, self.seed, self.epoch = n, ranks, seed, 0
        self.queues = [[] for _ in range(ranks)]

    def take(self, g):
        if not self.queues[g]:
            perm = list(range(self.n))
            random.Random(self.seed * 1000003 + self.epoch).shuffle(perm)
            for r in range(self.ranks):
                self.queues[r].extend(perm[r::self.ranks])
            self.epoch += 1
        return self.queues[g].pop(0)


def minmax_sizes(buffers, lengths, B):
    """The smallest T such that ranks can take B samples with every k·(longest of the first k) <= T;
    then each rank up to T, the cheapest ranks filled first (the study breaks ties by least
    variance; this peer fills greedily)."""
    costs = []
    for buf in buffers:
        longest, c = 0, []
        for k, i in enumerate(buf, start=1):
            longest = max(longest, lengths[i])
            c.append(k * longest)
        costs.append(c)

    def room(T):
        return [max(1, sum(1 for x in c if x <= T)) for c in costs]

    candidates = sorted({x for c in costs for x in c})
    lo, hi = 0, len(candidates) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if sum(room(candidates[mid])) >= B:
            hi = mid
        else:
            lo = mid + 1
    cap = room(candidates[lo])
    sizes = [1] * len(buffers)
    while sum(sizes) < B:
        g = min((g for g in range(len(sizes)) if sizes[g] < cap[g]), key=lambda g: costs[g][sizes[g]])
        sizes[g] += 1
    return sizes


def main():
    a = parse_args()
    import torch

    import ddpsim  # its StepTracer writes the trace: fail here, before the data and the model load
    from ddpsim.torch import StepTracer
    from transformers import DistilBertConfig, DistilBertForSequenceClassification

    torch.manual_seed(a.seed)
    dev = torch.device(a.device)
    ids, labels = load_sst2(a.data, a.vocab, a.max_length)
    lengths = [len(x) for x in ids]
    config = DistilBertConfig(vocab_size=30522, max_position_embeddings=512, n_layers=6, dim=768, n_heads=12,
                              hidden_dim=3072, num_labels=2)
    model = DistilBertForSequenceClassification(config).to(dev).train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    params = sum(p.numel() for p in model.parameters())
    G, B = a.ranks, a.global_batch
    # What ddptrain charges under emulation: every 25 MiB bucket (1 MiB first) as a ring, back to back.
    sizes_b, left, cap = [], params * 4, 1 << 20
    while left > 0:
        sizes_b.append(min(left, cap))
        left -= cap
        cap = 25 << 20
    allreduce_ms = sum(2 * (G - 1) * a.latency_us * 1e-3 + 2 * (G - 1) / G * b / (a.link_GBps * 1e6)
                       for b in sizes_b) if G > 1 else 0.0

    shards = Shards(len(ids), G, a.seed)
    buffers = [[shards.take(g) for _ in range(a.buffer)] for g in range(G)] if a.policy == "minmax" else None

    def collate(samples):
        L = max(lengths[i] for i in samples)
        x = torch.zeros(len(samples), L, dtype=torch.long)
        m = torch.zeros(len(samples), L, dtype=torch.long)
        for r, i in enumerate(samples):
            x[r, :lengths[i]] = torch.tensor(ids[i])
            m[r, :lengths[i]] = 1
        y = torch.tensor([labels[i] for i in samples])
        return x.to(dev, non_blocking=True), m.to(dev, non_blocking=True), y.to(dev, non_blocking=True), L

    transformers = __import__("transformers").__version__
    # ddptrain's own line for the same ring, so that validate takes the platform from the trace.
    ring = (f"modelled: ring alpha-beta over {a.link_GBps:f} GB/s, {a.latency_us:f} us per step, buckets back to "
            f"back after the slowest rank (no overlap); NOT a real {G}-GPU run")
    # ddpsim's name for the min-max over padded tokens, which a registered prediction names.
    label = {"static": "static", "minmax": "minmax:cost=tokens"}[a.policy]
    tracer = StepTracer(os.path.join(a.out, "steps.csv"), policy=label, global_batch=B, device=dev,
                        model=f"distilbert-base (Hugging Face transformers {transformers}, PyTorch eager)",
                        data=a.data, seed=a.seed, precision=a.precision, emulate_ranks=G, allreduce_ms=allreduce_ms,
                        metadata={"attention_kernel": model.config._attn_implementation, "allreduce": ring,
                                  "grad_dtype": "fp32", "max_length": a.max_length})
    step_ms = []
    start = time.perf_counter()
    for step in range(a.steps):
        if a.policy == "static":
            batches = [[shards.take(g) for _ in range(B // G)] for g in range(G)]
        else:
            sizes = minmax_sizes(buffers, lengths, B)
            batches = []
            for g, b in enumerate(sizes):
                batches.append(buffers[g][:b])
                buffers[g] = buffers[g][b:] + [shards.take(g) for _ in range(b)]
        for g, samples in enumerate(batches):
            x, m, y, L = collate(samples)  # copied to the GPU before the rank's timing starts
            with tracer.step(batch_size=len(samples), max_len=L, real_tokens=sum(lengths[i] for i in samples),
                             padded_tokens=len(samples) * L) as s:
                with s.phase("fwd"), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
                    loss = model(input_ids=x, attention_mask=m, labels=y).loss
                with s.phase("bwd"):
                    (loss * (len(samples) / B)).backward()
                if g == G - 1:  # the step's optimizer, after its last rank
                    with s.phase("opt"):
                        opt.step()
                        opt.zero_grad(set_to_none=True)
                s.loss = loss
        if (step + 1) % 200 == 0 or step + 1 == a.steps:
            step_ms = [r["step_ms"] for r in tracer.rows()[::G]]
            print(f"peer {a.policy} {a.precision}: step {step + 1}/{a.steps}, {step_ms[-1]:.2f} ms", flush=True)
    wall_s = time.perf_counter() - start
    tracer.close()  # the trace schema (ddpsim validate reads it), written whole or not at all
    steady = sorted(step_ms[min(20, len(step_ms) - 1):])
    summary = {
        "tool": "peer_pytorch.py", "policy": a.policy, "precision": a.precision, "ranks_emulated": G,
        "global_batch": B, "steps": a.steps, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
        "torch": torch.__version__, "transformers": transformers, "ddpsim": ddpsim.__version__,
        "attention": model.config._attn_implementation, "modelled_allreduce_ms": allreduce_ms,
        "mean_max_step_ms": sum(step_ms) / len(step_ms),
        "steady_from_step": min(20, len(step_ms) - 1),
        "steady_mean_max_step_ms": sum(steady) / len(steady),
        "steady_p95_max_step_ms": steady[min(len(steady) - 1, math.ceil(0.95 * len(steady)) - 1)],
        "wall_s": wall_s,
    }
    with open(os.path.join(a.out, "summary.json.tmp"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    os.replace(os.path.join(a.out, "summary.json.tmp"), os.path.join(a.out, "summary.json"))
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
