"""Figures of results, inline: the figures ``plots/*.py`` draw from files, drawn by the same
code (shipped inside the package as ``ddpsim/_plots``) from a result of :func:`ddpsim.run`,
:func:`ddpsim.compare`, :func:`ddpsim.validate` or :func:`ddpsim.sweep`. Each function returns
matplotlib figures, which a notebook shows; ``fig.savefig(...)`` writes one.

    figs = ddpsim.plots.steps(ddpsim.compare(policies="static,minmax"))
    figs["step_time.png"]            # the per-step maximum step time of each policy
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import re
import sys
import tempfile
from typing import Optional

from ddpsim import _core

_SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_plots")


def _script(name: str):
    """One of the plots/ scripts as a module, drawing on the caller's matplotlib backend."""
    if not os.path.isdir(_SCRIPTS):
        raise _core.UsageError(f"{_SCRIPTS}: the plotting scripts are not installed beside the package "
                               "(build it with CMake, or pip install ./python)")
    os.environ.setdefault("DDPSIM_PLOTS_REEXEC", "1")  # never re-run the notebook under another python3
    if _SCRIPTS not in sys.path:
        sys.path.insert(0, _SCRIPTS)
    common = importlib.import_module("common")
    common.KEEP_BACKEND, common.PROG = True, "ddpsim.plots"
    return importlib.import_module(name)


def _arguments_named(message: str, given: Optional[dict] = None) -> str:
    """A script's message in this package's words: its option "--by KEY" followed by the value
    the call gave is "by=KEY"; any other "--by" is the argument's name, "by"."""
    def named(m: re.Match) -> str:
        name, value = m.group(1).replace("-", "_"), m.group(2)
        if value is not None and str((given or {}).get(name)) == value:
            return f"{name}={value}"
        return name + (" " + value if value is not None else "")

    return re.sub(r"(?<![\w-])--([a-z](?:[a-z-]*[a-z])?)\b(?: ([^\s,;:()]+))?", named, message)


@contextlib.contextmanager
def _refusals(folder: str, given: Optional[dict] = None):
    """The scripts end with a one-line message (sys.exit): here it is an InputError, naming the
    result's files rather than the temporary folder they were written to, and the function's
    arguments (``given``: their values) rather than the script's options."""
    try:
        yield
    except SystemExit as e:
        message = str(e.code) if e.code not in (None, 0) else "the figure could not be drawn"
        message = message.removeprefix("ddpsim.plots: ").replace(folder + os.sep, "")
        raise _core.InputError(_arguments_named(message, given)) from None


def _shown(figures: dict) -> dict:
    """Each figure (laid out by its script) detached from pyplot, so that a notebook shows it
    once: where it is displayed, not again at the end of the cell."""
    import matplotlib.pyplot as plt

    for fig in figures.values():
        plt.close(fig)
    return figures


def steps(result, policies: Optional[list] = None, smooth: int = 20) -> dict:
    """The per-step figures of a run or compare result (plots/run.py): step_time.png,
    step_time_cdf.png, padded_tokens_std.png and std.png where their columns have values."""
    run = _script("run")
    with tempfile.TemporaryDirectory(prefix="ddpsim-plots-") as folder, _refusals(folder):
        result.write(folder)
        wanted = ",".join(policies) if isinstance(policies, (list, tuple)) else policies
        return _shown(run.figures([os.path.join(folder, "steps.csv")], wanted, max(1, int(smooth))))


def validation(result, all_steps: bool = False) -> dict:
    """A validation's figures (plots/validation.py): steps.png, scatter.png, error_hist.png and,
    with a baseline, gains.png."""
    script = _script("validation")
    with tempfile.TemporaryDirectory(prefix="ddpsim-plots-") as folder, _refusals(folder):
        result.write(folder)
        return _shown(script.figures([folder], all_steps))


def sweep(result, x: str, *, kind: str = "lines", metric: Optional[str] = None, y: Optional[str] = None,
          facet: Optional[str] = None, policy: Optional[str] = None, gain: Optional[str] = None,
          policies: Optional[list] = None, logx: bool = False, over: Optional[str] = None,
          by: Optional[str] = None, where: Optional[dict] = None, name: str = "from Python"):
    """A sweep's figure (plots/sweep.py): ``kind="lines"``, a metric against swept key ``x``, a
    line per policy, or per value of swept key ``by`` for one policy (``policies=[P]``)
    (``over="training.seed"``: the mean and range over replicates); or
    ``kind="heatmap"``, a metric over ``x`` and ``y`` (panels by ``facet``; ``gain=POLICY``: its
    gain). ``where`` fixes other swept keys ({"training.world_size": 8})."""
    script = _script("sweep")
    if kind not in ("lines", "heatmap"):
        raise _core.UsageError(f"kind: \"lines\" or \"heatmap\", got {kind!r}")
    args = argparse.Namespace(x=x, y=y, facet=facet, policy=policy, gain=gain, metric=metric, logx=logx, over=over, by=by,
                              policies=",".join(policies) if isinstance(policies, (list, tuple)) else policies,
                              where=[f"{k}={v}" for k, v in (where or {}).items()], name=None)

    class Refuse:  # what the script's parser would say, as the package says it
        @staticmethod
        def error(message):
            raise _core.UsageError(_arguments_named(message, vars(args)))

    with tempfile.TemporaryDirectory(prefix="ddpsim-plots-") as folder, _refusals(folder, vars(args)):
        result.write(folder)
        res = script.Results(os.path.join(folder, "results.csv"))
        res.name = name  # the title's sweep name, not the temporary folder's
        plt = script.common.pyplot()
        fig, _ = script.heatmap(plt, res, args, Refuse) if kind == "heatmap" else script.lines(plt, res, args)
        return _shown({"figure": fig})["figure"]
