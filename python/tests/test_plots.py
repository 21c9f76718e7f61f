"""ddpsim.plots draws what plots/*.py draw from the same result's files: the same PNG bytes
(both on Agg, same size and dpi), and a refusal as an InputError naming the result's file."""

import io
import os
import subprocess
import sys
import tempfile
import unittest

import matplotlib

matplotlib.use("Agg")

import ddpsim  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100, metadata={"Software": None})  # as plots/common.py saves
    return out.getvalue()


def script(name, *args) -> str:
    """Runs plots/NAME.py; returns the folder its figures went to."""
    out = tempfile.mkdtemp()
    subprocess.run([sys.executable, os.path.join(SOURCE, "plots", name + ".py"), *args, "--out", out], check=True,
                   capture_output=True)
    return out


class SameFigures(unittest.TestCase):
    def check(self, figures, folder):
        for name, fig in figures.items():
            with open(os.path.join(folder, name), "rb") as f:
                self.assertEqual(png(fig), f.read(), name)

    def test_steps_validation_and_sweep(self):
        r = ddpsim.compare(steps=60, policies="static,minmax", progress=False)
        with tempfile.TemporaryDirectory() as folder:
            r.write(folder)
            figures = ddpsim.plots.steps(r)
            self.assertEqual(sorted(figures), ["padded_tokens_std.png", "std.png", "step_time.png",
                                               "step_time_cdf.png"])
            self.check(figures, script("run", folder))
        runs = os.path.join(SOURCE, "traces", "cpu", "prereg2", "runs")
        v = ddpsim.validate(os.path.join(runs, "sorted", "steps.csv"), os.path.join(
            SOURCE, "traces", "cpu", "prereg", "model-1core.json"), baseline=os.path.join(runs, "static", "steps.csv"),
            set={"platform.link_GBps": 10}, progress=False)
        with tempfile.TemporaryDirectory() as folder:
            v.write(folder)
            figures = ddpsim.plots.validation(v)
            self.assertIn("gains.png", figures)
            self.check(figures, script("validation", folder))
        s = ddpsim.sweep({"set": {"training.steps": 30}, "axes": {"training.world_size": [2, 4]},
                          "policies": ["static", "minmax"]}, progress=False)
        fig = ddpsim.plots.sweep(s, "training.world_size")
        self.assertEqual(len(fig.axes), 1)
        with self.assertRaisesRegex(ddpsim.InputError, r"^results.csv: no swept key 'bogus'"):
            ddpsim.plots.sweep(s, "bogus")
        with self.assertRaisesRegex(ddpsim.UsageError, "kind: \"lines\" or \"heatmap\""):
            ddpsim.plots.sweep(s, "training.world_size", kind="pie")
        # A line per value of a swept key, for one policy.
        grid = ddpsim.sweep({"set": {"training.steps": 20}, "policies": ["static", "minmax"],
                             "axes": {"training.world_size": [2, 4], "training.data_parallel": ["ddp", "zero2"]}},
                            progress=False)
        fig = ddpsim.plots.sweep(grid, "training.world_size", metric="gain_pct", policies=["minmax"],
                                 by="training.data_parallel")
        self.assertEqual([t.get_text() for t in fig.axes[0].get_legend().get_texts()], ["ddp", "zero2"])
        # The script's message, in the function's arguments (by=, policies=), not its options.
        with self.assertRaisesRegex(ddpsim.InputError, r"^results.csv: by=training.data_parallel draws a line per "
                                    r"value of training.data_parallel for one policy: name it with policies \("):
            ddpsim.plots.sweep(grid, "training.world_size", by="training.data_parallel")


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
