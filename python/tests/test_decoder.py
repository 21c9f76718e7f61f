"""The plain-PyTorch decoder of ddpsim.torch.decoder: its parameters are those ddpsim's spec
derivation reads from the same Hugging Face config (names, sizes, registration order, so DDP's
buckets match), for every shipped decoder config; a tiny one trains over 2 Gloo ranks with the
sampler and the tracer, its trace replays, and profile() profiles it; packed, each sample is
computed as if alone, and a packed profile calibrates the model that replays a packed run."""

import os
import sys
import tempfile
import unittest

import common

common.need_torch()

import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import ddpsim  # noqa: E402
from ddpsim.torch import BalancedBatchSampler, StepTracer, profile, write_layout  # noqa: E402
from ddpsim.torch.decoder import (causal_lm_loss, decoder_from_config, packed_batch, packed_lm_loss,  # noqa: E402
                                  random_batch)

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = {"model_type": "qwen3", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 500,
        "tie_word_embeddings": True}
LENGTHS = ddpsim.synthetic_lengths("sst2", 2000, 64, 0)


def batch(lengths, indices):
    return random_batch(lengths, indices, TINY["vocab_size"])


def train_worker(rank, world_size, out, attention="padded"):
    torch.manual_seed(0)
    model = DDP(decoder_from_config(TINY))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    packed = attention == "packed"
    sampler = BalancedBatchSampler(LENGTHS, world_size=world_size, rank=rank, global_batch=8,
                                   policy="minmax:cost=workload" if packed else "minmax", max_length=64,
                                   attention=attention)
    with StepTracer(os.path.join(out, "steps.csv"), policy=sampler.policy, global_batch=8, model="tiny-qwen3",
                    attention=attention) as t:
        t.attach(model)
        for step, indices in enumerate(sampler):
            if step == 12:
                break
            if packed:
                ids, sizes = packed_batch(LENGTHS, indices, TINY["vocab_size"])
                loss = lambda: packed_lm_loss(model(ids, sizes), ids, sizes)  # noqa: E731
            else:
                ids, mask = batch(LENGTHS, indices)
                loss = lambda: causal_lm_loss(model(ids), ids, mask)  # noqa: E731
            common.traced_step(t, sampler, step, optimizer, loss)


def packed_worker(rank, world_size, out):
    train_worker(rank, world_size, out, "packed")


class Decoder(unittest.TestCase):
    def test_parameters_are_the_spec_derivation_s(self):
        for name in ("llama-3-8b", "qwen2-7b", "mistral-7b-v0.1", "qwen3-0.6b", "qwen3-8b", "smollm-135m",
                     "llama-3.2-1b"):
            path = os.path.join(SOURCE, "models", "hf", name + ".json")
            model = decoder_from_config(path, device="meta")  # billions of parameters, no memory
            mine = [(n, p.numel()) for n, p in model.named_parameters()]
            self.assertEqual(mine, [tuple(t) for t in ddpsim._core.hf_layout(path)], name)

    def test_the_registered_shapes_are_what_this_build_derives(self):
        import json
        folder = os.path.join(SOURCE, "traces", "gpu4", "registered")
        with open(os.path.join(folder, "decoder-shapes.json")) as f:
            registered = json.load(f)
        for p in registered["predictions"]:
            shapes = [(r["b"], r["L"]) for r in p["shapes"]]
            now = ddpsim._core.model_times(os.path.join(folder, p["spec"]), shapes)
            self.assertEqual(now["tensors"], p["tensors"])
            for r, (fwd, bwd) in zip(p["shapes"], now["times"]):
                self.assertAlmostEqual(r["fwd_ms"], fwd, places=9)
                self.assertAlmostEqual(r["bwd_ms"], bwd, places=9)
                self.assertLess(r["fwd_ms_interval"][0], fwd)
                self.assertLess(fwd, r["fwd_ms_interval"][1])
        with self.assertRaisesRegex(ddpsim.InputError, r"shape \(0, 8\): a batch and a length of at least 1"):
            ddpsim._core.model_times("h100-distilbert", [(0, 8)])

    def test_the_loss_falls_and_a_window_masks(self):
        torch.manual_seed(0)
        model = decoder_from_config(TINY)
        ids, mask = batch(LENGTHS, list(range(8)))
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
        first = model.loss(ids, mask).item()
        for _ in range(20):
            model.loss(ids, mask).backward()
            optimizer.step()
            optimizer.zero_grad()
        self.assertLess(model.loss(ids, mask).item(), first)
        # A window of 4 over 2 layers: position 10 sees back to position 4 at most, so changing the
        # first token leaves it alone; with full attention it does not.
        changed = ids.clone()
        changed[:, 0] = (ids[:, 0] + 1) % TINY["vocab_size"]
        for window, reaches in ((4, False), (None, True)):
            torch.manual_seed(0)
            m = decoder_from_config(dict(TINY, model_type="mistral", sliding_window=window))
            with torch.no_grad():
                moved = not torch.allclose(m(ids)[:, 10], m(changed)[:, 10])
            self.assertEqual(moved, reaches, f"sliding_window {window}")
        with self.assertRaisesRegex(ddpsim.InputError, "model_type 'bert': the decoder is built for"):
            decoder_from_config({"model_type": "bert"})

    def test_trains_over_gloo_with_the_tracer_and_profiles(self):
        with tempfile.TemporaryDirectory() as out:
            common.spawn(train_worker, 2, out)
            common.run([common.tool("ddpsim"), "replay", os.path.join(out, "steps.csv"), "--model",
                        "rtx3090-distilbert"])
            model = decoder_from_config(TINY)
            write_layout(model, os.path.join(out, "layout.json"), name="tiny-qwen3")
            profile(model, torch.optim.AdamW(model.parameters(), lr=1e-3),
                    lambda b, L: batch([L] * b, list(range(b))), lambda m, x: m.loss(*x),
                    os.path.join(out, "profile.csv"), batches=[1, 4], lengths=[16, 64], reps=2, warmup=1)
            report = common.run([common.tool("ddpsim"), "calibrate", os.path.join(out, "profile.csv"), "--base",
                                 os.path.join(out, "layout.json"), "--folds", "2", "--out",
                                 os.path.join(out, "model.json")])
            self.assertIn("held-out MAPE", report)

    def test_a_packed_sample_is_computed_as_if_alone(self):
        torch.manual_seed(0)
        model = decoder_from_config(dict(TINY, model_type="mistral", sliding_window=6))
        indices = [3, 0, 7, 1]
        ids, mask = batch(LENGTHS, indices)
        row, sizes = packed_batch(LENGTHS, indices, TINY["vocab_size"])
        self.assertEqual(sizes, [LENGTHS[i] for i in indices])
        self.assertEqual(row.shape, (1, sum(sizes)))
        with torch.no_grad():
            padded, packed = model(ids), model(row, sizes)
        start = 0
        for k, n in enumerate(sizes):  # each sample's logits, its positions from 0 and its keys its own
            self.assertTrue(torch.allclose(packed[0, start:start + n], padded[k, :n], atol=1e-5), f"sample {k}")
            start += n
        with torch.no_grad():
            # Alike to fp32's precision: a loss of ~61 differs in its 7th digit with the BLAS kernels
            # (OpenBLAS's Prescott ones summed it 7.6e-6 apart).
            alone = model.loss(ids, mask).item()
            self.assertAlmostEqual(model.loss(row, lengths=sizes).item(), alone, delta=1e-6 * abs(alone))
        for bad in ([sizes[0]], sizes[:-1] + [sizes[-1] + 1], [0] + sizes):
            with self.assertRaisesRegex(ddpsim.InputError, "a packed batch is one row"):
                model(row, bad)

    def test_a_packed_profile_calibrates_the_model_that_replays_a_packed_run(self):
        with tempfile.TemporaryDirectory() as out:
            common.spawn(packed_worker, 2, out)
            trace = os.path.join(out, "steps.csv")
            with open(trace) as f:
                text = f.read()
            self.assertIn("# attention=packed\n", text)
            header = next(line for line in text.splitlines() if line.startswith("step,"))
            self.assertTrue(header.endswith(",sq_tokens"), header)
            torch.manual_seed(0)
            model = decoder_from_config(TINY)
            write_layout(model, os.path.join(out, "layout.json"), name="tiny-qwen3")
            profile(model, torch.optim.AdamW(model.parameters(), lr=1e-3),
                    lambda b, L: packed_batch([L] * b, list(range(b)), TINY["vocab_size"]),
                    lambda m, x: m.loss(x[0], lengths=x[1]), os.path.join(out, "profile.csv"),
                    batches=[1, 2, 4], lengths=[8, 32, 64], reps=2, warmup=1, attention="packed", log=None)
            report = common.run([common.tool("ddpsim"), "calibrate", os.path.join(out, "profile.csv"), "--base",
                                 os.path.join(out, "layout.json"), "--folds", "3", "--out",
                                 os.path.join(out, "model.json")])
            self.assertIn("distinct (Σs, Σs²) points", report)  # the packed form: a + β·Σs + γ·Σs²
            self.assertIn("no grid form for packed sequences", report)
            replay = common.run([common.tool("ddpsim"), "replay", trace, "--model", os.path.join(out, "model.json")])
            self.assertIn("minmax:cost=workload", replay)
            said = common.run([common.tool("ddpsim"), "replay", trace, "--model", os.path.join(out, "model.json"),
                               "--set", "training.attention=padded"], expect=1)
            self.assertIn("recorded packed sequences (column sq_tokens)", said)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
