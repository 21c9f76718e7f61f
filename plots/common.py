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


def pyplot():
    """matplotlib.pyplot on the file-only Agg backend (no display needed)."""
    try:
        import matplotlib
    except ImportError:
        fail("needs matplotlib: apt-get install python3-matplotlib (Debian's /usr/bin/python3)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


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
