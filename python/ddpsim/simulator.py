"""The simulator from Python: ``ddpsim.run`` and ``ddpsim.compare`` run the ``ddpsim run`` and
``ddpsim compare`` verbs in this process, through the library the command line is built from,
and return what they print and write — the same bytes — as a :class:`Result`.

    r = ddpsim.compare({"training": {"world_size": 8}}, policies="static,minmax", steps=200)
    r.gain("minmax")                 # 12.3: the % of the first policy's mean max step it saves
    frames = r.to_pandas()           # frames.steps (rank-steps), frames.policies (one row each)
    print(r.table())                 # the command line's report
"""

from __future__ import annotations

import json
import numbers
import os
import sys
import tempfile
import warnings
from typing import Callable, Optional, Union

from ddpsim import _core
from ddpsim.results import Frames, Outputs, Result, SweepResult, Validation

__all__ = ["run", "compare", "sweep", "validate", "calibrate", "Result", "SweepResult", "Validation", "Outputs",
           "Frames"]

ConfigLike = Union[None, str, os.PathLike, dict]
Progress = Callable[[str, int, int], None]


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


class _NotConfig(TypeError):
    pass


def _json(value, what: str) -> str:
    """A Python value as the JSON a config holds; NumPy's numbers and arrays as Python's, a path
    as its text."""
    def plain(v):
        if hasattr(v, "tolist"):  # a NumPy scalar or array
            return v.tolist()
        if isinstance(v, os.PathLike):
            return os.fspath(v)
        raise _NotConfig(f"{type(v).__name__} is not a config value (expected a number, a string, a bool, None, "
                         f"a list or a dict)")

    try:
        return json.dumps(value, allow_nan=False, default=plain)
    except (TypeError, ValueError) as e:
        why = e if isinstance(e, TypeError) else "a NaN or an infinity, which no config key takes"
        raise _core.UsageError(f"{what}: {why}") from None


def _set_text(value, what: str) -> str:
    """--set's text for a Python value: a string as written where --set reads it back as that
    string ("fsdp"), quoted where --set would read something else ("8", "true", "")."""
    if isinstance(value, str) and value:
        try:
            parsed = json.loads(value)
        except ValueError:  # a plain string, or JSON gone wrong, which --set names
            return value
        else:
            if isinstance(parsed, (dict, list, str)):  # JSON for the command line, not a Python value
                raise _core.UsageError(f"{what}: {value!r} is JSON text; pass the value itself, as Python "
                                       f"(a dict, a list, or the string unquoted)")
    return _json(value, what)


def _integer(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _core.UsageError(f"{what}: expected an integer, got {type(value).__name__} {value!r}")
    return int(value)


def _policy_list(policies) -> str:
    if isinstance(policies, str):
        return policies
    names = None if isinstance(policies, (dict, bytes)) or not hasattr(policies, "__iter__") else list(policies)
    if names is None or not all(isinstance(p, str) for p in names):
        raise _core.UsageError(f"policies: expected policy names, as a list or \"a,b\", got {policies!r}")
    return ",".join(names)


def _against(against) -> list:
    """--against's arguments for {label: {key: value}}: a column of the config per label."""
    if not isinstance(against, dict) or not against or not all(isinstance(k, str) and isinstance(v, dict) and v
                                                               for k, v in against.items()):
        raise _core.UsageError(f"against: expected {{label: {{key: value, ...}}, ...}}, a column each, got {against!r}")
    for label in against:
        if not label or ":" in label or "=" in label or label == "base":
            raise _core.UsageError(f"against: label {label!r}: expected a name without ':' or '=', other than "
                                   f"'base' (the config's own column)")
    args = []
    for label, sets in against.items():
        for key, value in sets.items():
            args += ["--against", f"{label}:{key}={_set_text(value, f'against[{label!r}][{key!r}]')}"]
    return args


def _arguments(config: ConfigLike, policies, steps, replicates, overrides: dict) -> list:
    args = []
    if isinstance(config, dict):
        args += ["--config-json", _json(config, "config dict")]
    elif config is not None:
        if not isinstance(config, (str, os.PathLike)):
            raise _core.UsageError(f"config: expected a file path, a dict or None (the embedded default), "
                                   f"got {type(config).__name__}")
        args.append(os.fspath(config))
    for key, value in overrides.items():
        args += ["--set", f"{key}={_set_text(value, key)}"]
    if policies is not None:
        args += ["--policies", _policy_list(policies)]
    if steps is not None:
        args += ["--steps", str(_integer(steps, "steps"))]
    if _integer(replicates, "replicates") != 1:
        args += ["--replicates", str(int(replicates))]
    return args


def _progress(progress):
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise _core.UsageError(f"progress: expected a callable(what, done, total), True, False or None, "
                               f"got {type(progress).__name__}")
    if progress is True or (progress is None and sys.stderr is not None and
                            (sys.stderr.isatty() or "ipykernel" in sys.modules)):
        return _tqdm_progress()
    return None if progress is False else progress


def _files(folder: str) -> dict:
    files = {}
    for name in sorted(os.listdir(folder)):
        if os.path.isfile(os.path.join(folder, name)):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                files[name] = f.read()
    return files


def _verb(verb: str, args: list, progress, named: Callable[[str], str] = lambda text: text) -> tuple:
    """Runs the verb; returns its report (less the "wrote" line) and its notes, warned.
    ``named`` rewrites a temporary file's path in them as the user knows the input."""
    code, report, errors = _core.run_verb(verb, args, _progress(progress))
    report, errors = named(report), named(errors)
    if code != 0:  # the verbs throw their refusals: a code is a failure they printed
        raise _core.InputError(errors.strip() or f"ddpsim {verb} exited with {code}")
    notes = [line for line in errors.splitlines() if line.strip()]
    for note in notes:
        warnings.warn(note, stacklevel=4)
    return "".join(line for line in report.splitlines(keepends=True) if not line.startswith("wrote ")), notes


def _options(options: dict) -> list:
    """Keyword arguments as the command line's options: ``folds=3`` is ``--folds 3``, a list
    repeats its values after one option, True is a bare flag."""
    args = []
    for key, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        text = lambda v: os.fspath(v) if isinstance(v, os.PathLike) else str(v)  # noqa: E731
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            args += [flag, *map(text, value)]
        else:
            args += [flag, text(value)]
    return args


def _simulate(verb: str, config: ConfigLike, policies, steps, replicates: int, progress, overrides: dict,
              extra: Optional[list] = None) -> Result:
    with tempfile.TemporaryDirectory(prefix="ddpsim-") as folder:
        args = _arguments(config, policies, steps, replicates, overrides) + (extra or []) + ["--out", folder]
        report, notes = _verb(verb, args, progress)
        return Result(verb, report, notes, _files(folder))


def run(config: ConfigLike = None, *, policies=None, steps: Optional[int] = None, replicates: int = 1,
        progress: Union[None, bool, Progress] = None, **overrides) -> Result:
    """``ddpsim run``: simulates the config's policies (a file path, a dict of config sections,
    or None for the embedded default), each ``--set``-style override applied in turn
    (``ddpsim.run(**{"training.world_size": 8})``). ``policies`` replaces the config's (a list
    or "a,b"), ``steps`` sets training.steps and ``replicates=R`` adds the seeds' ranges and the
    gains' prediction intervals (summary["replicates"]). ``progress(what, done, total)`` hears
    long work (default: a tqdm bar on a terminal or in a notebook where tqdm is installed; True:
    such a bar wherever the output goes; False: none); Ctrl-C stops the work cleanly. Refusals raise InputError / UsageError with the
    command line's messages."""
    return _simulate("run", config, policies, steps, replicates, progress, overrides)


def compare(config: ConfigLike = None, *, policies=None, steps: Optional[int] = None, replicates: int = 1,
            progress: Union[None, bool, Progress] = None, against: Optional[dict] = None, **overrides) -> Result:
    """``ddpsim compare``: as :func:`run`, each policy's report beside the first's with the change.
    ``against={"zero1": {"training.data_parallel": "zero1"}, ...}`` (``--against``) sets the
    config beside variants of itself instead, under its one policy: the result's rows are then
    the columns ("base" first), and ``gain("zero1")`` is that column's against the config's."""
    extra = [] if against is None else _against(against)
    return _simulate("compare", config, policies, steps, replicates, progress, overrides, extra)


def sweep(spec: Union[str, os.PathLike, dict], out: Optional[str] = None, *, jobs: Optional[int] = None,
          progress: Union[None, bool, Progress] = None) -> SweepResult:
    """``ddpsim sweep SPEC --out OUT``: every cell of the grid in worker processes (``jobs``;
    default: the usable cores). ``spec`` is a sweep file or a dict of one; a dict's relative
    "base" is taken from the current folder, and other paths in it should be absolute. With
    ``out``, the cells are kept there and a later call with the same ``out`` resumes where an
    interrupted one (Ctrl-C) stopped, as the binary's rerun does; without it, a temporary folder."""
    with tempfile.TemporaryDirectory(prefix="ddpsim-") as scratch:
        if isinstance(spec, dict):
            spec = dict(spec)
            if isinstance(spec.get("base"), (str, os.PathLike)):
                spec["base"] = os.path.abspath(spec["base"])
            path = os.path.join(scratch, "sweep-spec.json")
            with open(path, "w") as f:
                f.write(_json(spec, "sweep dict"))
        elif isinstance(spec, (str, os.PathLike)):
            path = os.fspath(spec)
        else:
            raise _core.UsageError(f"spec: expected a sweep file's path or a dict, got {type(spec).__name__}")
        folder = os.fspath(out) if out is not None else os.path.join(scratch, "sweep")
        jobs = None if jobs is None else _integer(jobs, "jobs")
        named = (lambda text: text.replace(path, "sweep dict")) if path.startswith(scratch) else (lambda text: text)
        try:
            report, notes = _verb("sweep", [path, "--out", folder] + _options({"jobs": jobs}), progress, named)
        except (_core.InputError, _core.UsageError) as e:  # a dict's messages name it as compare's do
            raise type(e)(named(str(e))) from None
        return SweepResult(report, notes, _files(folder), folder if out is not None else None)


def validate(measured: str, model: Optional[str] = None, baseline: Optional[str] = None,
             config: Optional[str] = None, *, progress: Union[None, bool, Progress] = None,
             **options) -> Validation:
    """``ddpsim validate``: the model's predictions for the measured trace (and its gain over
    ``baseline``) against what was measured. ``options`` are validate's own (``warmup=20``);
    ``set={"platform.link_GBps": 10}`` gives --set's. A prediction registered before its run is
    scored with ``registered="prediction.json"`` in place of ``model`` (it names its own)."""
    registered = options.get("registered")
    if model is None and registered is None:
        raise _core.UsageError("validate: give model (a built-in name or a model JSON), or registered= (a "
                               "prediction.json from compare(register=...))")
    if model is not None and registered is not None:
        raise _core.UsageError("validate: registered= names the model its prediction was made with: leave model out")
    sets = options.pop("set", {}) or {}
    if not isinstance(sets, dict):
        raise _core.UsageError(f"set: expected a dict of --set's keys and values, got {type(sets).__name__}")
    args = ([config] if config else []) + _options({"measured": measured, "model": model, "baseline": baseline,
                                                    **options})
    for key, value in sets.items():
        args += ["--set", f"{key}={_set_text(value, key)}"]
    with tempfile.TemporaryDirectory(prefix="ddpsim-") as folder:
        report, notes = _verb("validate", args + ["--out", folder], progress)
        return Validation(report, notes, _files(folder))


def calibrate(profiles, out: Optional[str] = None, *, progress: Union[None, bool, Progress] = None,
              **options) -> Outputs:
    """``ddpsim calibrate PROFILE... --out OUT``: a performance model fitted to profiled traces;
    ``options`` are calibrate's own (``base="layout.json"``, ``training=["run.csv"]``,
    ``training_levels="one"``, ``training_warmup=0``, ``pool_run_levels=["earlier.json"]``, ``form="roofline"``,
    ``gpu="..."``). Returns the outputs, the model as ``.model`` (a dict);
    with ``out``, the model file is written there too."""
    profiles = [profiles] if isinstance(profiles, (str, os.PathLike)) else list(profiles)
    with tempfile.TemporaryDirectory(prefix="ddpsim-") as folder:
        target = os.path.join(folder, "model.json")
        report, notes = _verb("calibrate", [*map(os.fspath, profiles), "--out", target] + _options(options), progress)
        outputs = Outputs("calibrate", report, notes, _files(folder))
    outputs.model = json.loads(outputs.files["model.json"])
    if out is not None:
        with open(out, "w", encoding="utf-8") as f:
            f.write(outputs.files["model.json"])
    return outputs
