"""docs/notebooks/will-balancing-help.ipynb executed headless (nbclient, Debian's ipykernel), as
a user runs it: every cell without error, its figures drawn and its numbers printed (their
presence, not their values), and nothing written beside the notebook."""

import os
import sys
import unittest

import nbclient
import nbformat

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDER = os.path.join(SOURCE, "docs", "notebooks")


class Notebook(unittest.TestCase):
    def test_will_balancing_help(self):
        before = sorted(os.listdir(FOLDER))
        nb = nbformat.read(os.path.join(FOLDER, "will-balancing-help.ipynb"), as_version=4)
        os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # the kernel's debugger note
        # The kernel starts in the notebook's folder: the package's path must not be relative.
        os.environ["PYTHONPATH"] = os.pathsep.join(
            os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
        nbclient.NotebookClient(nb, kernel_name="python3", timeout=600,
                                resources={"metadata": {"path": FOLDER}}).execute()
        outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
        self.assertFalse([o for o in outputs if o.output_type == "error"])
        images = [o for o in outputs if "image/png" in o.get("data", {})]
        self.assertGreaterEqual(len(images), 3)  # per-step times, the sweep's heatmap, the validated gains
        text = "\n".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in outputs)
        for expected in ("ddpsim 0.", "prediction interval", "mean_max_step_ms", "data.std",
                         "held-out MAPE", "measured", "<ddpsim compare result: static, minmax, kk, sorted>"):
            self.assertIn(expected, text)
        self.assertEqual(sorted(os.listdir(FOLDER)), before)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
