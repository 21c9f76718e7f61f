"""The package on a GPU: StepTracer times a decoder's phases with CUDA events, and profile()
profiles it on the device at given (b, L) points (scripts/validate_gpu.sh's decoder stage runs
this file where no ddpsim is built; its profiles are calibrated back here). Skips (77) where
torch sees no CUDA device: this is the one test that needs a GPU."""

import csv
import os
import sys
import tempfile
import unittest

import common

common.need_torch()

import torch  # noqa: E402

if not torch.cuda.is_available():
    print(f"skip: torch {torch.__version__} sees no CUDA device")
    sys.exit(common.SKIP)

from ddpsim.torch import StepTracer, profile, write_layout  # noqa: E402
from ddpsim.torch.decoder import decoder_from_config  # noqa: E402

TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2, "vocab_size": 1000}


def batch(b, L):
    ids = torch.randint(1, TINY["vocab_size"], (b, L), device="cuda")
    return ids, torch.ones(b, L, dtype=torch.bool, device="cuda")


def loss_of(model, x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return model.loss(*x)


def rows(path):
    with open(path) as f:
        meta = [line for line in f if line.startswith("#")]
    with open(path) as f:
        return meta, list(csv.DictReader(line for line in f if not line.startswith("#")))


class Cuda(unittest.TestCase):
    def test_tracer_times_phases_with_cuda_events(self):
        torch.manual_seed(0)
        model = decoder_from_config(TINY, device="cuda")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "steps.csv")
            with StepTracer(path, policy="static", global_batch=4, model="tiny", device="cuda",
                            precision="bf16") as tracer:
                for step in range(6):
                    x = batch(4, 128)
                    with tracer.step(batch_size=4, max_len=128) as s:
                        with s.phase("fwd"):
                            loss = loss_of(model, x)
                        with s.phase("bwd"):
                            loss.backward()
                        with s.phase("opt"):
                            optimizer.step()
                            optimizer.zero_grad()
                        s.loss = loss
            meta, steps = rows(path)
        self.assertIn(f"# device={torch.cuda.get_device_name()}\n", meta)  # the GPU's name, not "cpu"
        self.assertIn("# precision=bf16\n", meta)
        self.assertEqual(len(steps), 6)
        for r in steps:
            fwd, bwd, step = float(r["fwd_ms"]), float(r["bwd_ms"]), float(r["step_ms"])
            self.assertGreater(fwd, 0)
            self.assertGreater(bwd, 0)
            self.assertGreaterEqual(step, fwd + bwd)

    def test_profile_on_the_device(self):
        torch.manual_seed(0)
        model = decoder_from_config(TINY, device="cuda")
        with tempfile.TemporaryDirectory() as out:
            write_layout(model, os.path.join(out, "layout.json"), name="tiny-llama")
            points = [(1, 128), (2, 128), (4, 128), (1, 512), (2, 512), (4, 512), (1, 1024), (2, 1024)]
            profile(model, torch.optim.AdamW(model.parameters(), lr=1e-4), batch, loss_of,
                    os.path.join(out, "profile.csv"), points=points, reps=3, device="cuda", model_name="tiny-llama",
                    precision="bf16", log=None)
            meta, timed = rows(os.path.join(out, "profile.csv"))
        self.assertIn(f"# device={torch.cuda.get_device_name()}\n", meta)
        self.assertEqual({(int(r["batch_size"]), int(r["max_len"])) for r in timed}, set(points))
        self.assertEqual(len(timed), 3 * len(points))
        # More tokens take longer: the longest shape's forward against the shortest's.
        fwd = {}
        for r in timed:
            fwd.setdefault((int(r["batch_size"]), int(r["max_len"])), []).append(float(r["fwd_ms"]))
        self.assertGreater(min(fwd[(2, 1024)]), 0)
        self.assertGreater(sorted(fwd[(2, 1024)])[1], sorted(fwd[(1, 128)])[1])

if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
