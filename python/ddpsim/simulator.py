"""The simulator from Python: ``ddpsim.run`` and ``ddpsim.compare`` run the ``ddpsim run`` and
``ddpsim compare`` verbs in this process, through the library the command line is built from,
and return what they print and write — the same bytes — as a :class:`Result`.

    r = ddpsim.compare({"training": {"world_size": 8}}, policies="static,minmax", steps=200)
    r.gain("minmax")                 # -12.3: its mean max step against the first policy, in %
    frames = r.to_pandas()           # frames.steps (rank-steps), frames.policies (one row each)
    print(r.table())                 # the command line's report
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Optional, Union

from ddpsim import _core

ConfigLike = Union[None, str, os.PathLike, dict]
Progress = Callable[[str, int, int], None]


@dataclass
class Frames:
    """A result's tables as pandas DataFrames: ``steps`` holds one row per rank and step
    (steps.csv, or pipeline_steps.csv for a pipeline job) and ``policies`` one row per policy
    with its summary figures (summary.json)."""
    steps: Any
    policies: Any


class Result:
    """What a simulation printed and wrote: ``summary`` (summary.json as a dict), ``provenance``
    (where the model's and the platform's figures came from), ``report`` (the printed report),
    ``notes`` (what it said on standard error) and ``files`` (each output file's text, by name)."""

    def __init__(self, verb: str, report: str, notes: list, files: dict):
        self.verb = verb
        self.report = report
        self.notes = notes
        self.files = files
        self.summary = json.loads(files["summary.json"])
        self.provenance = self.summary.get("provenance", {})

    @property
    def policies(self) -> list:
        """The policies' labels, in the order simulated (the first is the baseline of the gains)."""
        return [p["policy"] for p in self._policy_rows()]

    def table(self) -> str:
        """The report as the command line prints it, without the line of its wall time."""
        return "".join(line for line in self.report.splitlines(keepends=True) if not line.startswith("simulated "))

    def gain(self, policy: str, figure: str = "mean_max_step_ms") -> float:
        """``policy``'s change of ``figure`` against the first policy, in % (negative: faster)."""
        rows = {p["policy"]: p for p in self._policy_rows()}
        if policy not in rows:
            raise _core.UsageError(f"policy {policy!r}: not in this result ({', '.join(rows)})")
        base, this = self._policy_rows()[0][figure], rows[policy][figure]
        return 100.0 * (this - base) / base

    def to_pandas(self) -> Frames:
        """The result as DataFrames (pandas is imported here, and only here)."""
        import pandas

        name = "steps.csv" if "steps.csv" in self.files else "pipeline_steps.csv"
        steps = pandas.read_csv(io.StringIO(self.files[name]), comment="#")
        return Frames(steps=steps, policies=pandas.DataFrame(self._policy_rows()))

    def write(self, folder: str) -> None:
        """Writes the output files as ``--out FOLDER`` does."""
        os.makedirs(folder, exist_ok=True)
        for name, text in self.files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as out:
                out.write(text)

    def _policy_rows(self) -> list:
        policies = self.summary.get("policies", [])
        if isinstance(policies, dict):  # keyed by label
            return [{"policy": label, **figures} for label, figures in policies.items()]
        return [dict(p) for p in policies]

    def __repr__(self) -> str:
        return f"<ddpsim {self.verb} result: {', '.join(self.policies)}>"

    def _repr_html_(self) -> str:  # a notebook shows the report
        import html

        return f"<pre>{html.escape(self.table())}</pre>"


def _tqdm_progress() -> Optional[Progress]:
    """A tqdm bar per phase of long work where tqdm is installed, else nothing."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    bars: dict = {}

    def update(what: str, done: int, total: int) -> None:
        bar = bars.get(what)
        if bar is None:
            bar = bars[what] = tqdm(total=total, desc=what, leave=False)
        bar.update(done - bar.n)
        if done >= total:
            bar.close()

    return update


def _arguments(config: ConfigLike, policies, steps, replicates, overrides: dict) -> list:
    args = []
    if isinstance(config, dict):
        args += ["--config-json", json.dumps(config)]
    elif config is not None:
        if not isinstance(config, (str, os.PathLike)):
            raise _core.UsageError(f"config: expected a file path, a dict or None (the embedded default), "
                                   f"got {type(config).__name__}")
        args.append(os.fspath(config))
    for key, value in overrides.items():
        text = value if isinstance(value, str) else json.dumps(value)
        args += ["--set", f"{key}={text}"]
    if policies is not None:
        args += ["--policies", policies if isinstance(policies, str) else ",".join(policies)]
    if steps is not None:
        args += ["--steps", str(steps)]
    if replicates != 1:
        args += ["--replicates", str(replicates)]
    return args


def _simulate(verb: str, config: ConfigLike, policies, steps, replicates: int, progress, overrides: dict) -> Result:
    if progress is None and sys.stderr is not None and (sys.stderr.isatty() or "ipykernel" in sys.modules):
        progress = _tqdm_progress()
    elif progress is False:
        progress = None
    with tempfile.TemporaryDirectory(prefix="ddpsim-") as folder:
        args = _arguments(config, policies, steps, replicates, overrides) + ["--out", folder]
        code, report, errors = _core.run_verb(verb, args, progress)
        if code != 0:  # the verbs throw their refusals: a code is a failure they printed
            raise _core.InputError(errors.strip() or f"ddpsim {verb} exited with {code}")
        files = {}
        for name in sorted(os.listdir(folder)):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                files[name] = f.read()
    notes = [line for line in errors.splitlines() if line.strip()]
    for note in notes:
        warnings.warn(note, stacklevel=3)
    report = "".join(line for line in report.splitlines(keepends=True) if not line.startswith("wrote "))
    return Result(verb, report, notes, files)


def run(config: ConfigLike = None, *, policies=None, steps: Optional[int] = None, replicates: int = 1,
        progress: Union[None, bool, Progress] = None, **overrides) -> Result:
    """``ddpsim run``: simulates the config's policies (a file path, a dict of config sections,
    or None for the embedded default), each ``--set``-style override applied in turn
    (``ddpsim.run(**{"training.world_size": 8})``). ``policies`` replaces the config's (a list
    or "a,b"), ``steps`` sets training.steps and ``replicates=R`` adds the seeds' ranges and the
    gains' prediction intervals (summary["replicates"]). ``progress(what, done, total)`` hears
    long work (default: a tqdm bar on a terminal or in a notebook where tqdm is installed; False:
    none); Ctrl-C stops the work cleanly. Refusals raise InputError / UsageError with the
    command line's messages."""
    return _simulate("run", config, policies, steps, replicates, progress, overrides)


def compare(config: ConfigLike = None, *, policies=None, steps: Optional[int] = None, replicates: int = 1,
            progress: Union[None, bool, Progress] = None, **overrides) -> Result:
    """``ddpsim compare``: as :func:`run`, each policy's report beside the first's with the change."""
    return _simulate("compare", config, policies, steps, replicates, progress, overrides)
