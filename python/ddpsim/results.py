"""What the simulator's verbs return from Python: the report they print, the notes they say and
the files they write, with each file's figures as dicts and DataFrames (pandas imported on use)."""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from typing import Any, Optional

from ddpsim import _core


@dataclass
class Frames:
    """A result's tables as pandas DataFrames: ``steps`` holds one row per rank and step
    (steps.csv, or pipeline_steps.csv for a pipeline job; None for compare's ``against``) and
    ``policies`` one row per policy (per column under ``against``) with its summary figures
    (summary.json)."""
    steps: Any
    policies: Any


class Outputs:
    """What a verb printed and wrote: ``report`` (the printed report), ``notes`` (what it said on
    standard error, also raised as warnings) and ``files`` (each output file's text, by name)."""

    def __init__(self, verb: str, report: str, notes: list, files: dict):
        self.verb = verb
        self.report = report
        self.notes = notes
        self.files = files

    def write(self, folder: str) -> None:
        """Writes the output files as ``--out FOLDER`` does."""
        os.makedirs(folder, exist_ok=True)
        for name, text in self.files.items():
            with open(os.path.join(folder, name), "w", encoding="utf-8") as out:
                out.write(text)

    def _frame(self, name: str):
        import pandas

        return pandas.read_csv(io.StringIO(self.files[name]), comment="#")

    def __repr__(self) -> str:
        return f"<ddpsim {self.verb}: {', '.join(self.files)}>"

    def _repr_html_(self) -> str:  # a notebook shows the report
        import html

        return f"<pre>{html.escape(self.report)}</pre>"


class Result(Outputs):
    """A simulation's outputs: ``summary`` (summary.json as a dict) and ``provenance`` (where the
    model's and the platform's figures came from) besides the report, notes and files."""

    def __init__(self, verb: str, report: str, notes: list, files: dict):
        super().__init__(verb, report, notes, files)
        self.summary = json.loads(files["summary.json"])
        self.provenance = self.summary.get("provenance", {})

    @property
    def policies(self) -> list:
        """The policies' labels, in the order simulated (the first is the baseline of the gains);
        under ``against``, the columns' ("base" first)."""
        return [self._label(p) for p in self._policy_rows()]

    def table(self) -> str:
        """The report as the command line prints it, without the line of its wall time."""
        return "".join(line for line in self.report.splitlines(keepends=True) if not line.startswith("simulated "))

    def gain(self, policy: str, figure: Optional[str] = None) -> float:
        """How much better ``policy`` does than the first policy on ``figure``, in % of the
        first's, as compare's and sweep's gains are stated (positive: better). The default
        figure is the mean step (``mean_max_step_ms``; a pipeline job's ``mean_step_time``). A
        rate's gain (``*_per_s``, ``*_throughput``, ``*_utilisation``, ``compute_share``) is the
        share gained; any other figure's (a time, a wait, padding), the share saved."""
        rows = {self._label(p): p for p in self._policy_rows()}
        if policy not in rows:
            raise _core.UsageError(f"policy {policy!r}: not in this result ({', '.join(rows)})")
        first = self._policy_rows()[0]
        if figure is None:
            figure = "mean_max_step_ms" if "mean_max_step_ms" in first else "mean_step_time"
        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        base, this = first.get(figure), rows[policy].get(figure)
        if not (number(base) and number(this)):
            raise _core.UsageError(f"figure {figure!r}: not a number of this result's policies "
                                   f"(one of {', '.join(k for k, v in first.items() if number(v))})")
        if base == 0:
            raise _core.UsageError(f"figure {figure!r}: the first policy's is 0, so no gain is a share of it")
        higher_is_better = figure.endswith(("_per_s", "_throughput", "_utilisation")) or figure == "compute_share"
        return 100.0 * (this / base - 1 if higher_is_better else 1 - this / base)

    def to_pandas(self) -> Frames:
        """The result as DataFrames (pandas is imported here, and only here)."""
        import pandas

        name = next((n for n in ("steps.csv", "pipeline_steps.csv") if n in self.files), None)
        steps = self._frame(name) if name else None  # compare with against writes no steps
        return Frames(steps=steps, policies=pandas.DataFrame(self._policy_rows()))

    def predictions(self):
        """Each policy's (each column's under ``against``) predicted mean step and gain with their
        95% prediction intervals, one row each, as a DataFrame: what ``replicates=R`` printed
        (summary["replicates"]). Step figures in ms, gains in %; a gain's columns are empty for
        the first policy, a step's where none was predicted (a pipeline job)."""
        import pandas

        replicates = self.summary.get("replicates")
        if not isinstance(replicates, dict):
            raise _core.UsageError("this result has no prediction intervals: simulate with replicates=R (R >= 2)")
        rows = []
        by = "column" if "columns" in replicates else "policy"
        for label, figures in replicates["columns" if by == "column" else "policies"].items():
            step, gain = figures.get("step", {}), figures.get("gain", {})
            row = {by: label}
            row["mean_step_ms"] = step.get("mean_ms")
            row["step_seeds_low"], row["step_seeds_high"] = step.get("seeds_interval_ms", (None, None))
            row["step_pi_low"], row["step_pi_high"] = step.get("prediction_interval_ms", (None, None))
            row["step_mostly"] = step.get("mostly")
            row["gain_pct"] = gain.get("gain_pct")
            row["gain_seeds_low"], row["gain_seeds_high"] = gain.get("seeds_interval", (None, None))
            row["gain_pi_low"], row["gain_pi_high"] = gain.get("prediction_interval", (None, None))
            row["gain_mostly"] = gain.get("mostly")
            row["gain_told_from_noise"] = gain.get("told_from_noise")
            rows.append(row)
        return pandas.DataFrame(rows)

    @staticmethod
    def _label(row: dict) -> str:
        return row["column"] if "column" in row else row["policy"]

    def _policy_rows(self) -> list:
        columns = self.summary.get("columns")
        if isinstance(columns, dict):  # compare with against: one row per column, its figures
            return [{"column": label, **{k: v for k, v in c.items() if k not in ("config", "provenance")}}
                    for label, c in columns.items()]
        policies = self.summary.get("policies", [])
        if isinstance(policies, dict):  # keyed by label
            return [{"policy": label, **figures} for label, figures in policies.items()]
        return [dict(p) for p in policies]

    def __repr__(self) -> str:
        return f"<ddpsim {self.verb} result: {', '.join(self.policies)}>"


class SweepResult(Outputs):
    """A sweep's ``results.csv`` as ``rows`` (one dict per cell and policy, numbers as floats
    where they are numbers) and ``to_pandas()``; ``folder`` holds its cells when one was given."""

    def __init__(self, report: str, notes: list, files: dict, folder: Optional[str]):
        super().__init__("sweep", report, notes, files)
        self.folder = folder
        import csv

        def value(text: str):
            try:
                return float(text)
            except ValueError:
                return text

        self.rows = [{k: value(v) for k, v in row.items()}
                     for row in csv.DictReader(io.StringIO(files["results.csv"]))]

    def to_pandas(self):
        return self._frame("results.csv")


class Validation(Outputs):
    """validate's outputs: ``validation`` (validation.json as a dict) and ``to_pandas()`` of
    validation.csv (one row per policy and step: measured against predicted)."""

    def __init__(self, report: str, notes: list, files: dict):
        super().__init__("validate", report, notes, files)
        self.validation = json.loads(files["validation.json"])

    def to_pandas(self):
        return self._frame("validation.csv")

    def registered(self, steady: bool = False):
        """A registered prediction's score (``validate(..., registered=...)``) as a DataFrame, one
        row per policy, the baseline first: each mean max step against its registered prediction
        interval, the tail (P95 over mean, which the process's level cancels out of), and each
        gain against its interval. Over every step, as registered; ``steady=True``: after the
        runs' warm-up."""
        import pandas

        score = self.validation.get("registered")
        if score is None:
            raise _core.UsageError("registered(): this validation scored no registered prediction (give "
                                   "validate registered=\"prediction.json\")")
        if steady:
            score = score.get("steady_state", score)  # a column's score holds every step alone
        rows = [dict(self._registered_row(score["baseline"]), policy=score["baseline"]["policy"])]
        for policy, s in score["policies"].items():
            row = dict(self._registered_row(s), policy=policy)
            row.update(registered_gain_pct=s["registered_gain_pct"],
                       gain_lo=s["registered_prediction_interval"][0], gain_hi=s["registered_prediction_interval"][1],
                       measured_gain_pct=s["measured_gain_pct"], measured_gain_lo=s["measured_gain_ci95"][0],
                       measured_gain_hi=s["measured_gain_ci95"][1], gain_inside=s["measured_in_prediction_interval"],
                       gain_told_from_noise=s["measured_gain_resolved"])
            rows.append(row)
        return pandas.DataFrame(rows).set_index("policy")

    @staticmethod
    def _registered_row(s: dict) -> dict:
        nan = float("nan")
        interval = s.get("registered_mean_pi95", [nan, nan])
        return {"registered_mean_ms": s["registered_mean_ms"], "mean_lo": interval[0], "mean_hi": interval[1],
                "measured_mean_ms": s["measured_mean_ms"],
                "mean_inside": s.get("measured_mean_in_prediction_interval"),
                "registered_p95_over_mean": s.get("registered_p95_over_mean", nan),
                "measured_p95_over_mean": s.get("measured_p95_over_mean", nan),
                "tail_error_pct": s.get("tail_error_pct", nan)}
