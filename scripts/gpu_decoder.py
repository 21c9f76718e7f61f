#!/usr/bin/env python3
"""Campaign 4's decoder stage (issue 46): the registered decoders (SmolLM-135M and Llama-3.2-1B,
traces/gpu4/registered/decoder-shapes.json) profiled through ddpsim.torch.profile() at their
registered (b, L) shapes, bf16 autocast over fp32 weights with PyTorch's fused attention, as the
spec derivation assumed; each one's unit jitter (ddpsim.torch.unit_jitter: how unevenly a step
falls over its blocks, simulation.unit_jitter's σ for FSDP) at a short and a long shape; then a
short traced training run of the smaller one at world size 1 over NCCL, with the batch sampler and
the step tracer. Writes into OUT, per model, NAME-layout.json and NAME-profile.csv (the trace
schema: `ddpsim calibrate NAME-profile.csv --base NAME-layout.json`), NAME-unit-jitter.json, and
NAME-run/steps.csv (`ddpsim validate`), and env.json (the machine).

    PYTHONPATH=build-gpu/python python3 scripts/gpu_decoder.py --out traces/h100/decoder
    PYTHONPATH=build/release/python python3 scripts/gpu_decoder.py --device cpu --tiny --out /tmp/d  # rehearsal

--tiny rehearses the plumbing on a CPU: each model's config shrunk to two small layers and every
shape's length divided by 32; its figures mean nothing.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ddpsim
from ddpsim.torch import BalancedBatchSampler, StepTracer, profile, unit_jitter, write_layout
from ddpsim.torch.decoder import causal_lm_loss, decoder_from_config

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTERED = os.path.join(SOURCE, "traces", "gpu4", "registered", "decoder-shapes.json")
TINY = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 512}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="folder for the layouts, profiles, the traced run and env.json")
    p.add_argument("--registered", default=REGISTERED, help="the registration the shapes come from")
    p.add_argument("--device", default="cuda", help="cuda (the campaign) or cpu (a rehearsal, with --tiny)")
    p.add_argument("--reps", type=int, default=5, help="timed repetitions a shape")
    p.add_argument("--steps", type=int, default=60, help="steps of the traced run")
    p.add_argument("--tiny", action="store_true", help="shrunk configs and lengths: the plumbing, not the figures")
    a = p.parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {a.device}: this torch {torch.__version__} sees no CUDA device (--device cpu --tiny "
                "rehearses on a CPU)")
    if a.reps < 1 or a.steps < 1:
        p.error("--reps and --steps must be at least 1")
    if not os.path.isfile(a.registered):
        p.error(f"--registered {a.registered}: no such file")
    return a


def models(args):
    """Each registered decoder once (its shapes are the same on every GPU kind): name, config, shapes."""
    with open(args.registered, encoding="utf-8") as f:
        registration = json.load(f)
    seen = {}
    for prediction in registration["predictions"]:
        if prediction["model"] in seen:
            continue
        path = os.path.normpath(os.path.join(os.path.dirname(args.registered), prediction["hf_config"]))
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        shapes = [(s["b"], s["L"]) for s in prediction["shapes"]]
        if args.tiny:
            config = dict(config, **TINY)
            shapes = sorted({(b, max(2, L // 32)) for b, L in shapes})
        seen[prediction["model"]] = (config, shapes)
    return seen


def autocast(device):
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


def profile_model(name, config, shapes, args):
    torch.manual_seed(0)
    model = decoder_from_config(config, device=args.device)
    vocab = config["vocab_size"]
    stem = os.path.join(args.out, name.lower())
    write_layout(model, stem + "-layout.json", name=name)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def make_batch(b, L):
        ids = torch.randint(1, vocab, (b, L), device=args.device, generator=None)
        return ids, torch.ones(b, L, dtype=torch.bool, device=args.device)

    def loss_fn(m, batch):
        with autocast(args.device):
            return m.loss(*batch)

    start = time.monotonic()
    profile(model, optimizer, make_batch, loss_fn, stem + "-profile.csv", points=shapes, reps=args.reps,
            device=args.device, model_name=name, precision="bf16")
    print(f"gpu_decoder: {name}: {len(shapes)} shapes profiled in {time.monotonic() - start:.0f} s", flush=True)
    del model, optimizer
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def jitter(name, config, args):
    """simulation.unit_jitter's σ for the decoder's blocks under bf16 autocast, at 8 × 512 and
    2 × 4,096 tokens (lengths ÷ 32 and 4 layers with --tiny), into NAME-unit-jitter.json."""
    if args.tiny:
        config = dict(config, num_hidden_layers=4)
    torch.manual_seed(0)
    model = decoder_from_config(config, device=args.device)
    found = []
    for b, L in ((8, 512), (2, 4096)):
        L = max(2, L // 32) if args.tiny else L
        ids = torch.randint(1, config["vocab_size"], (b, L), device=args.device)

        def step():
            model.zero_grad(set_to_none=True)
            with autocast(args.device):
                loss = model(ids).float().square().mean()
            loss.backward()

        found.append(dict(b=b, L=L, **unit_jitter(model.model.layers, step, steps=40)))
    with open(os.path.join(args.out, name.lower() + "-unit-jitter.json"), "w", encoding="utf-8") as f:
        json.dump({"model": name, "precision": "bf16", "shapes": found}, f, indent=2)
    print(f"gpu_decoder: {name}: unit jitter σ " + ", ".join(f"{r['sigma']:.3f} at {r['b']}x{r['L']}" for r in found),
          flush=True)
    del model
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def traced_run(name, config, args):
    """A short run at world size 1 (NCCL on a GPU, Gloo on a CPU), lengths log-normal (median 600,
    σ 0.6, up to 2,048; ÷ 32 with --tiny), 8 samples a step, traced in the trace schema."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    backend = "nccl" if args.device.startswith("cuda") else "gloo"
    dist.init_process_group(backend, rank=0, world_size=1)
    try:
        rng = random.Random(0)
        top = 2048 // 32 if args.tiny else 2048
        lengths = [min(top, max(2, int(rng.lognormvariate(math.log(top * 600 / 2048), 0.6)))) for _ in range(4000)]
        torch.manual_seed(0)
        model = DDP(decoder_from_config(config, device=args.device))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        sampler = BalancedBatchSampler(lengths, world_size=1, rank=0, global_batch=8, policy="static", max_length=top)
        vocab = config["vocab_size"]
        path = os.path.join(args.out, name.lower() + "-run", "steps.csv")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with StepTracer(path, policy=sampler.policy, global_batch=8, model=name, device=args.device,
                        precision="bf16") as tracer:
            tracer.attach(model)
            for step, indices in enumerate(sampler):
                if step == args.steps:
                    break
                L = max(lengths[i] for i in indices)
                ids = torch.randint(1, vocab, (len(indices), L), device=args.device)
                mask = torch.zeros(len(indices), L, dtype=torch.bool, device=args.device)
                for row, i in enumerate(indices):
                    mask[row, :lengths[i]] = True
                with tracer.step(**sampler.shape(step)) as s:
                    with s.phase("fwd"), autocast(args.device):
                        loss = causal_lm_loss(model(ids), ids, mask)
                    with s.phase("bwd"):
                        sampler.scale_loss(loss, step).backward()
                    with s.phase("opt"):
                        optimizer.step()
                        optimizer.zero_grad()
                    s.loss = loss
        print(f"gpu_decoder: {name}: {args.steps} traced steps over {backend} -> {path}", flush=True)
    finally:
        dist.destroy_process_group()


def environment(args):
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": args.device, "tiny": args.tiny,
           "ddpsim": getattr(ddpsim, "__version__", "")}
    if torch.cuda.is_available() and args.device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name()
        env["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    with open(os.path.join(args.out, "env.json"), "w", encoding="utf-8") as f:
        json.dump(env, f, indent=2)


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    environment(args)
    found = models(args)
    for name, (config, shapes) in found.items():
        profile_model(name, config, shapes, args)
        jitter(name, config, args)
    smallest = min(found, key=lambda n: found[n][0]["hidden_size"] * found[n][0]["num_hidden_layers"])
    traced_run(smallest, found[smallest][0], args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
