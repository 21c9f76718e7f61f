"""Helpers shared by the plots/ scripts (not a script): reading the documented CSV outputs with
errors that name file, line and column, and writing figures atomically, all or none.

Every error ends the script with one line on stderr and exit status 1 (argparse already exits 2
on bad usage); notes about data left out go to stderr and do not stop the script.
"""
import argparse
import csv
import math
import os
import re
import sys
import tempfile

PROG = os.path.basename(sys.argv[0])
DPI = 100  # a figure of W x H inches is 100 W x 100 H pixels

_UMASK = os.umask(0)
os.umask(_UMASK)
_INPUTS = set()  # real paths of the files read, which no figure may overwrite


def fail(message):
    sys.exit(f"{PROG}: {message}")


def note(message):
    print(f"{PROG}: note: {message}", file=sys.stderr)


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def make_parser(doc):
    """A parser whose --help is the script's docstring; the docstring's own usage line is left
    out, argparse prints one."""
    text = re.sub(r"^usage:.*\n(?:[ \t]+\S.*\n)*\n?", "", doc.strip() + "\n", flags=re.M)
    return Parser(description=text, formatter_class=argparse.RawDescriptionHelpFormatter)


SYSTEM_PYTHON = "/usr/bin/python3"  # where Debian's python3-matplotlib is importable


def _has_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _use_system_python():
    """Under another python3 (pyenv, conda, a venv) that lacks matplotlib, runs the script again
    under the system's python3 when that one has it, before anything is read or written."""
    if _has_matplotlib() or os.environ.get("DDPSIM_PLOTS_REEXEC") or not os.path.exists(SYSTEM_PYTHON):
        return
    if os.path.realpath(sys.executable) == os.path.realpath(SYSTEM_PYTHON):
        return
    probe = os.system(f"{SYSTEM_PYTHON} -c 'import matplotlib' >/dev/null 2>&1")
    if probe == 0:
        os.environ["DDPSIM_PLOTS_REEXEC"] = "1"
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, sys.argv[0]] + sys.argv[1:])


_use_system_python()


KEEP_BACKEND = False  # ddpsim.plots draws for a notebook, whose backend is the user's


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    if not _has_matplotlib():
        fail(f"needs matplotlib, which {sys.executable} cannot import: apt-get install python3-matplotlib "
             f"(Debian's python3), or pip install matplotlib (this python3)")
    import matplotlib
    if not KEEP_BACKEND:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def metadata(path):
    """The '# key=value' lines at the top of a trace CSV, as a dict ({} when it has none)."""
    meta = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.startswith("#"):
                    break
                key, eq, value = line[1:].strip().partition("=")
                if eq:
                    meta.setdefault(key.strip(), value.strip())
    except (OSError, UnicodeDecodeError):
        pass  # read_csv reports what is wrong with the file
    return meta


def setup_title(meta):
    """One line naming a run's setup from its trace metadata: the model, the device or platform,
    G and B ("rtx3090-distilbert on pcie, G=4, B=48"); "" when the trace says none of them."""
    where = meta.get("platform") or meta.get("device")
    model = meta.get("model", "").removeprefix("built-in ")
    if model and os.sep in model:
        model = os.path.splitext(os.path.basename(model))[0]
    ranks = meta.get("world_size")
    if meta.get("emulated_ranks", "0") not in ("", "0"):
        ranks = f"{meta['emulated_ranks']} emulated"
    parts = [" on ".join(p for p in (model, where) if p)]
    parts += [f"G={ranks}"] if ranks else []
    parts += [f"B={meta['global_batch']}"] if meta.get("global_batch") else []
    return ", ".join(p for p in parts if p)


def title(fig, what, setup):
    """The figure's title: what it shows, then the setup it shows it for."""
    fig.suptitle(f"{what}\n{setup}" if setup else what, fontsize=9)


def legend_outside(ax, **kwargs):
    """The legend to the right of the axes, off the data."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=7, **kwargs)


UNITS = (("_pct", "%"), ("_ms", "ms"), ("_per_s", "per s"), ("_mib", "MiB"), ("_us", "µs"))


def metric_label(metric, abstract=False):
    """A results.csv or summary column as an axis label with its unit: gain_pct -> 'gain_pct (%)'.
    A pipeline job's times are in ms, or in time units when its policy column is `abstract`."""
    for suffix, unit in UNITS:
        if metric.endswith(suffix):
            return f"{metric} ({unit})"
    if metric.endswith("_time"):
        return f"{metric} ({'time units' if abstract else 'ms'})"
    if metric.endswith(("_share", "_utilisation")) or metric.startswith("bubble"):
        return f"{metric} (fraction)"
    return metric


def read_csv(path, required=()):
    """(header, rows) of a CSV file whose '#' lines are metadata; each row is (line number in
    the file, {column: text}). Fails on a missing file or column, a short or long row, no rows."""
    line_of = []  # the file line number of each line handed to the csv reader
    if os.path.exists(path) and not os.path.isfile(path):
        fail(f"{path}: not a regular file (a folder, device or pipe)")
    _INPUTS.add(os.path.realpath(path))

    def data_lines(f):
        for number, text in enumerate(f, start=1):
            if not text.startswith("#"):
                line_of.append(number)
                yield text

    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(data_lines(f))
            header = next(reader, None)
            if not header:
                fail(f"{path}: no CSV header")
            header_line = line_of[-1]
            repeated = sorted({c for c in header if header.count(c) > 1})
            if repeated:
                fail(f"{path}:{header_line}: column(s) named twice: {', '.join(repeated)}")
            missing = [c for c in required if c not in header]
            if missing:
                fail(f"{path}:{header_line}: missing column(s) {', '.join(missing)} (columns: {', '.join(header)})")
            rows = []
            for fields in reader:
                if not fields:
                    continue
                if len(fields) != len(header):
                    fail(f"{path}:{line_of[-1]}: {len(fields)} fields, the header has {len(header)}")
                rows.append((line_of[-1], dict(zip(header, fields))))
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 text (byte {e.start})")
    except csv.Error as e:
        fail(f"{path}:{line_of[-1] if line_of else 1}: {e}")
    if not rows:
        fail(f"{path}: no data rows")
    return header, rows


def number(path, line, column, text, missing_ok=False):
    """The finite number in a field; None for an empty or NaN field (a missing measurement)
    where missing_ok."""
    text = text.strip()
    if text == "" or text.lower() == "nan":
        if missing_ok:
            return None
        fail(f"{path}:{line}: column {column}: {'empty' if text == '' else repr(text)}, expected a number")
    try:
        value = float(text)
    except ValueError:
        fail(f"{path}:{line}: column {column}: '{text}' is not a number")
    if math.isinf(value):
        fail(f"{path}:{line}: column {column}: '{text}' is not a finite number")
    return value


def count(path, line, column, text):
    """The non-negative integer in a field (a step, a rank)."""
    try:
        value = int(text.strip())
    except ValueError:
        fail(f"{path}:{line}: column {column}: '{text}' is not an integer")
    if value < 0:
        fail(f"{path}:{line}: column {column}: {value} is negative")
    return value


def file_part(text):
    """text made safe for a file name (policy names hold ':' and '=')."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def output_folder(parser, out, inputs):
    """--out, or the folder of the one input given; a usage error when several were given."""
    if out is not None:
        return out
    if len(inputs) > 1:
        parser.error("--out FOLDER is required with several inputs")
    return inputs[0]


def save_figures(folder, figures):
    """Writes each {file name: figure} as a PNG in folder (created if needed), each through a
    temporary beside its target, renamed into place only once all are written; prints the paths."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        fail(f"{folder}: not a folder")
    for name in figures:
        target = os.path.join(folder, name)
        if os.path.isdir(target):
            fail(f"{target}: is a folder, expected a PNG file name")
        if os.path.lexists(target) and not os.path.isfile(target):
            fail(f"{target}: exists and is not a regular file (a device or pipe)")
        if os.path.realpath(target) in _INPUTS:
            fail(f"{target}: is also an input")
    temps = []
    try:
        os.makedirs(folder, exist_ok=True)
        for name, fig in figures.items():
            fd, temp = tempfile.mkstemp(prefix=f"{name}.tmp.", dir=folder)
            temps.append(temp)
            with os.fdopen(fd, "wb") as f:
                fig.savefig(f, format="png", dpi=DPI, metadata={"Software": None})
            os.chmod(temp, 0o666 & ~_UMASK)  # mkstemp makes it private
        for name, temp in zip(figures, temps):
            os.replace(temp, os.path.join(folder, name))
        for name in figures:
            print(f"wrote {os.path.join(folder, name)}")
    except BaseException as e:
        for temp in temps:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
        if isinstance(e, OSError):
            fail(f"{e.filename or folder}: {e.strerror}")
        raise
