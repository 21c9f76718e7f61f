"""Interference from Python: two Gloo ranks profile the small transformer of the tests, and
profile() adds backward beside allreduces both ways to the allreduce rows, as ddptrain --profile
does; ddpsim calibrate fits comm_slowdown from them as from ddptrain's. The same profile with
interference=False, or on one rank, has none. This CPU's timings are shared with other work: the
factors are checked against calibrate's own range only, not against a value."""

import contextlib
import csv
import io
import json
import os
import tempfile
import unittest

import common

common.need_torch()

import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from common import full_batch, loss_of  # noqa: E402

import ddpsim  # noqa: E402
from ddpsim.torch import profile, write_layout  # noqa: E402

G, REPS, BATCHES, LENGTHS = 2, 4, [1, 4, 12], [8, 32, 64]
BUCKET = "262152"  # the small transformer's gradients: one DDP bucket of 65,538 floats


def profile_worker(rank, world_size, out):
    """The grid twice on the same ranks: with the interference (the default), then without (and
    ZeRO's gather timed as DeepSpeed's all-gather, not the default broadcasts)."""
    model = DDP(common.small_transformer())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if rank == 0:
        write_layout(model, os.path.join(out, "layout.json"), name="small-transformer")
    for name, interference in (("with.csv", True), ("without.csv", False)):
        profile(model, optimizer, full_batch, loss_of, os.path.join(out, name), batches=BATCHES, lengths=LENGTHS,
                reps=REPS, warmup=2, allreduce_bytes=[64 << 10, 1 << 20], model_name="small-transformer",
                interference=interference, zero_gather="broadcast" if interference else "all_gather",
                log=print if rank == 0 else (lambda line: None))


def read(path):
    with open(path) as f:
        text = f.read()
    rows = list(csv.DictReader(line for line in text.splitlines() if not line.startswith("#")))
    return text, rows


class Interference(unittest.TestCase):
    def test_two_ranks(self):
        ddpsim_cli = common.tool("ddpsim")
        with tempfile.TemporaryDirectory() as out:
            common.spawn(profile_worker, G, out, pin=True)
            text, rows = read(os.path.join(out, "with.csv"))
            self.assertIn("; on 2 ranks at once; then allreduce, interference and all-gather\n", text)
            self.assertIn(f"# ddp_buckets={BUCKET}\n", text)
            comm = [r for r in rows if r["policy"] == "allreduce"]
            self.assertEqual([int(r["step"]) for r in comm], list(range(len(comm))))
            # Backward alone and beside back-to-back allreduces of the bucket, at the largest batch
            # and the median and longest lengths: every alone row kept, a beside row only where the
            # allreduces outlasted backward.
            backward = [r for r in comm if r["concurrent_allreduce_bytes"]]
            self.assertEqual({(r["batch_size"], r["max_len"]) for r in backward}, {("12", "32"), ("12", "64")})
            for L in ("32", "64"):
                alone = [r for r in backward if r["max_len"] == L and r["concurrent_allreduce_bytes"] == "0"]
                beside = [r for r in backward if r["max_len"] == L and r["concurrent_allreduce_bytes"] == BUCKET]
                self.assertEqual(len(alone), REPS * G)
                self.assertLessEqual(len(beside), REPS * G)
            self.assertTrue(all(float(r["bwd_ms"]) > 0 and r["fwd_ms"] == "" and r["allreduce_ms"] == ""
                                for r in backward))
            # Allreduces of the bucket beside backward carry its shape and bwd_ms; the ladder and
            # those alone carry neither.
            beside_backward = [r for r in comm if r["allreduce_ms"] and r["bwd_ms"]]
            self.assertTrue(all(r["allreduce_bytes"] == BUCKET and r["batch_size"] == "12" for r in beside_backward))
            self.assertTrue(all(r["batch_size"] == "0" for r in comm if r["allreduce_ms"] and not r["bwd_ms"]))

            report = common.run([ddpsim_cli, "calibrate", os.path.join(out, "with.csv"), "--base",
                                 os.path.join(out, "layout.json"), "--gpu", "CPU, two Gloo ranks", "--out",
                                 os.path.join(out, "model.json")])
            print(report)
            self.assertIn("interference: backward runs", report)
            with open(os.path.join(out, "model.json")) as f:
                model = json.load(f)
            fitted = model["calibration"]["fit"]["interference"]
            self.assertTrue(fitted["backward_beside_allreduce"])
            self.assertEqual(model["comm_slowdown"], fitted["comm_slowdown"])
            for factor in ("comm_slowdown", "allreduce_slowdown"):
                self.assertGreaterEqual(model[factor], 1)
                self.assertLessEqual(model[factor], 100)
            print(f"fitted comm_slowdown {model['comm_slowdown']:.4f}, allreduce_slowdown "
                  f"{model['allreduce_slowdown']:.4f}")

            text, rows = read(os.path.join(out, "without.csv"))
            self.assertIn("; on 2 ranks at once; then allreduce and all-gather\n", text)
            self.assertIn("# allgather_as=dist.all_gather of each rank's shard", text)
            self.assertNotIn("concurrent_allreduce_bytes", text)
            self.assertTrue(all(r["bwd_ms"] == "" for r in rows if r["policy"] == "allreduce"))
            report = common.run([ddpsim_cli, "calibrate", os.path.join(out, "without.csv"), "--base",
                                 os.path.join(out, "layout.json"), "--out", os.path.join(out, "plain.json")])
            self.assertNotIn("interference", report)
            with open(os.path.join(out, "plain.json")) as f:
                plain = json.load(f)
            self.assertEqual((plain["comm_slowdown"], plain["allreduce_slowdown"]), (1, 1))

    def test_one_rank_has_none(self):
        """Without a process group there is no allreduce to interfere: no such rows."""
        with tempfile.TemporaryDirectory() as out:
            model = common.small_transformer()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            path = os.path.join(out, "profile.csv")
            profile(model, optimizer, full_batch, loss_of, path, batches=[1, 4], lengths=[8, 32], reps=1, warmup=0)
            text, rows = read(path)
            self.assertEqual({r["policy"] for r in rows}, {"profile"})
            self.assertNotIn("concurrent_allreduce_bytes", text)
            self.assertNotIn("interference", text)
            with self.assertRaisesRegex(ddpsim.UsageError, "interference_batch: expected an integer of at least 1, got 0"):
                profile(model, optimizer, full_batch, loss_of, path, batches=[1], lengths=[8], interference_batch=0)

    def test_progress_by_default(self):
        """A profile says how far it has come on stderr unless told to be silent."""
        with tempfile.TemporaryDirectory() as out:
            model = common.small_transformer()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            path = os.path.join(out, "profile.csv")
            for kwargs, lines in (({}, 2), ({"log": None}, 0)):
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    profile(model, optimizer, full_batch, loss_of, path, batches=[1, 2], lengths=[8], reps=1,
                            warmup=0, **kwargs)
                progress = [line for line in err.getvalue().splitlines() if line.startswith("profile: ")]
                self.assertEqual(len(progress), lines, err.getvalue())
                if lines:
                    self.assertRegex(progress[-1], r"\(2/2\), \d+ s, about 0 s left$")


if __name__ == "__main__":
    unittest.main()
