"""scripts/zero1_pytorch.py, the registered ZeRO-1 runs' trainer: a few traced steps under
PyTorch's ZeroRedundancyOptimizer over 2 Gloo ranks record zero1 and its partition by whole
parameters, which ddpsim replays as such; packed runs record Σ s² and replay packed, and profile
a grid alongside; policies trained a step each in turn train as alone and validate as one
process's; bad options exit 2 naming the option."""

import os
import sys
import tempfile
import unittest

import common

common.need_torch()

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SOURCE, "scripts", "zero1_pytorch.py")
MODEL = os.path.join(SOURCE, "traces", "cpu", "prereg18", "model-2ranks-training.json")


def train_three_steps(out: str, policy: str, *options: str) -> tuple[str, str]:
    """Three steps of `policy` on two Gloo ranks at B = 4: the trace's path and text. The folder is
    named as ddptrain names it, ':' and '=' as '-'."""
    common.run([sys.executable, SCRIPT, "--tie-embeddings", "train", *options, "--steps", "3", "--policies", policy,
                "--global-batch", "4", "--out", out])
    trace = os.path.join(out, policy.replace(":", "-").replace("=", "-"), "steps.csv")
    with open(trace) as f:
        return trace, f.read()


def trace_rows(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """A trace's header and its rows, each a column-to-text map as written."""
    lines = text.splitlines()
    header = next(line.split(",") for line in lines if line.startswith("step,"))
    return header, [dict(zip(header, line.split(","))) for line in lines if line[:1].isdigit()]


def losses(text: str) -> list[str]:
    return [row["loss"] for row in trace_rows(text)[1]]


class Zero1Script(unittest.TestCase):
    def test_a_traced_zero1_run_replays_as_zero1_by_parameters(self):
        with tempfile.TemporaryDirectory() as out:
            trace, text = train_three_steps(out, "static", "--optimizer", "zero1", "--broadcast-buffers", "off")
            for line in ("# data_parallel=zero1\n", "# zero_partition=parameters\n", "# model=llama-11m-tied\n",
                         "# world_size=2\n", "# backend=gloo\n",
                         "# ddp_buffers=128 bytes, not broadcast (broadcast_buffers=False)\n"):
                self.assertIn(line, text)
            self.assertEqual(len(trace_rows(text)[1]), 3 * 2)
            report = common.run([common.tool("ddpsim"), "replay", trace, "--model", MODEL])
            self.assertIn("optimizer state sharded by whole parameters, 27.1% to 72.9% of them a rank", report)
            self.assertNotIn("# ddp_pre_forward=", text)  # nothing broadcast, nothing to time

    def test_a_packed_run_traces_sq_tokens_and_replays_packed(self):
        with tempfile.TemporaryDirectory() as out:
            trace, text = train_three_steps(out, "minmax:cost=workload", "--attention", "packed", "--profile-alongside",
                                            "--batches", "2", "--profile-lengths", "8,12", "--reps", "1")
            lines = text.splitlines()
            self.assertIn("# attention=packed", lines)
            # DDP's default: the rotary frequencies broadcast at each forward, that wait timed apart
            self.assertIn("# ddp_buffers=128 bytes broadcast from rank 0 at each forward (broadcast_buffers=True)", lines)
            # each rank keeps freed memory, as ddptrain does (keep_freed_memory)
            self.assertIn("# malloc=freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)",
                          lines)
            self.assertRegex(text, r"\n# ddp_pre_forward=mean \d+\.\d\d ms a rank-step \(by rank: \d+\.\d\d, \d+\.\d\d\), "
                                   r"inside fwd_ms: DDP's work before the module's forward")
            header, rows = trace_rows(text)
            self.assertEqual(header[-1], "sq_tokens")
            self.assertEqual(len(rows), 3 * 2)
            for row in rows:  # no padding, and Σ s² between (Σ s)²/b and (Σ s)·longest
                real, b, L, pairs = (int(row[k]) for k in ("real_tokens", "batch_size", "max_len", "sq_tokens"))
                self.assertEqual(row["padded_tokens"], row["real_tokens"])
                self.assertTrue(real * real <= b * pairs and pairs <= real * L, row)
            report = common.run([common.tool("ddpsim"), "replay", trace, "--model", "rtx3090-distilbert"])
            self.assertIn("minmax:cost=workload", report)
            said = common.run([common.tool("ddpsim"), "replay", trace, "--model", MODEL], expect=1)
            self.assertIn("uses a measured grid", said)
            # --profile-alongside: a grid step after each training step, in the same processes
            with open(os.path.join(out, "profile", "profile.csv")) as f:
                profiled = f.read()
            self.assertIn("# profile=alongside training, one profiled step at a time: 3 steps over 2 points", profiled)
            self.assertIn("# attention=packed\n", profiled)
            self.assertEqual(profiled.count(",profile,"), 3 * 2)
            self.assertTrue(os.path.isfile(os.path.join(out, "profile", "layout.json")))

    def test_interleaved_policies_train_as_alone_and_validate_in_turn(self):
        with tempfile.TemporaryDirectory() as out:
            run = [sys.executable, SCRIPT, "--tie-embeddings", "train", "--steps", "3", "--global-batch", "4",
                   "--policies", "static,minmax:cost=workload"]
            said = common.run(run + ["--interleaved", "--out", os.path.join(out, "turns")])
            self.assertRegex(said, r"optimizer, the same work in every policy's model, median after step 0: "
                                   r"static \d+\.\d, minmax:cost=workload \d+\.\d ms \(\d+\.\d% apart\)")
            common.run(run + ["--out", os.path.join(out, "alone")])
            traces = {}
            for mode in ("turns", "alone"):
                for folder in ("static", "minmax-cost-workload"):
                    path = os.path.join(out, mode, folder, "steps.csv")
                    with open(path) as f:
                        traces[mode, folder] = path, f.read()
            for folder in ("static", "minmax-cost-workload"):  # a step each in turn changes no sample, no loss
                self.assertEqual(losses(traces["turns", folder][1]), losses(traces["alone", folder][1]))
                self.assertIn("# interleaved=static,minmax:cost=workload\n", traces["turns", folder][1])
                self.assertNotIn("# interleaved=", traces["alone", folder][1])
            # each trace times its own wait at DDP's buffer broadcast, and still counts as one process's
            measured, baseline = traces["turns", "minmax-cost-workload"][0], traces["turns", "static"][0]
            report = common.run([common.tool("ddpsim"), "validate", "--measured", measured, "--baseline", baseline,
                                 "--model", MODEL])
            self.assertIn("policies trained in turn, all from step", report)
            measured, baseline = traces["alone", "minmax-cost-workload"][0], traces["alone", "static"][0]
            report = common.run([common.tool("ddpsim"), "validate", "--measured", measured, "--baseline", baseline,
                                 "--model", MODEL])
            self.assertNotIn("policies trained in turn", report)

    def test_bad_options_exit_2_naming_them(self):
        with tempfile.TemporaryDirectory() as out:
            said = common.run([sys.executable, SCRIPT, "train", "--nproc", "999", "--out", out], expect=2)
            self.assertIn("--nproc 999: from 1 to this machine's", said)
            said = common.run([sys.executable, SCRIPT, "train", "--lengths", os.path.join(out, "none.json"),
                               "--out", out], expect=2)
            self.assertIn("none.json: no such file", said)
            said = common.run([sys.executable, SCRIPT, "train", "--policies", "static,kk,static", "--out", out], expect=2)
            self.assertIn("--policies static,kk,static: static would write static/, as static does", said)
            said = common.run([sys.executable, SCRIPT, "train", "--policies", "static,nope", "--out", out], expect=2)
            self.assertIn('unknown policy "nope"', said)
            self.assertEqual(os.listdir(out), [])


if __name__ == "__main__":
    unittest.main()
