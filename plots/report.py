#!/usr/bin/env python3
"""Turns a run, compare, sweep or validation folder into one self-contained HTML page.

usage: plots/report.py DIR [--out FILE.html]

DIR is the --out folder of one of:
  ddpsim run / compare   summary.json and steps.csv: a table of every policy's figures, the
                         figures of plots/run.py
  ddpsim sweep           results.csv and sweep.json: per policy, the cells, its mean, smallest
                         and largest gain over the cells' first policy; with one or two swept
                         keys, the gains drawn by plots/sweep.py
  ddpsim validate        validation.json and validation.csv: measured against predicted per
                         policy, gains with their 95% intervals, the figures of
                         plots/validation.py

The page also holds the config (or the sweep's grid), the trace's metadata and the model's
provenance (where it came from: spec-derived, or calibrated from which traces). Figures are
drawn afresh and embedded as base64 PNGs, styles are inline: the page loads nothing from
outside and can be mailed or archived as one file. It is written to FILE (default:
DIR/report.html) through a temporary renamed into place, and its path printed.

examples:
  plots/report.py runs/default                # after: ddpsim compare --out runs/default
  plots/report.py traces/cpu/validation/2ranks/kk --out kk.html
"""
import base64
import html
import json
import os
import subprocess
import sys
import tempfile

import common

HERE = os.path.dirname(os.path.abspath(__file__))
STYLE = """body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th:first-child,td:first-child{text-align:left}th{background:#f2f2f2}
figure{display:inline-block;margin:0.5em}img{max-width:100%;border:1px solid #eee}
.wide{overflow-x:auto}pre{background:#f7f7f7;padding:0.8em;overflow:auto;font-size:12px}.missing{color:#b00}"""
# Marks a figure that did not decode, so that a broken page shows it instead of hiding it.
SCRIPT = """window.addEventListener('load',function(){var n=0;for(var i of document.images){
if(i.complete&&i.naturalWidth>0)n++;else i.insertAdjacentHTML('afterend','<p class=missing>figure not shown</p>');}
document.body.dataset.figuresShown=n;document.body.dataset.figures=document.images.length;});"""


def read_json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except OSError as e:
        common.fail(f"{path}: {e.strerror}")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        common.fail(f"{path}: not JSON ({e})")


def kind_of(folder):
    for kind, files in (("validation", ("validation.json", "validation.csv")),
                        ("sweep", ("results.csv", "sweep.json")),
                        ("run", ("summary.json", "steps.csv"))):
        if all(os.path.isfile(os.path.join(folder, f)) for f in files):
            return kind
    common.fail(f"{folder}: holds none of summary.json + steps.csv (run, compare), results.csv + sweep.json "
                "(sweep) or validation.json + validation.csv (validate)")


def draw(script, args):
    """{file name: PNG bytes} that plots/SCRIPT draws with ARGS into a temporary folder."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, os.path.join(HERE, script), *args, "--out", tmp],
                              capture_output=True, text=True)
        if done.returncode != 0:
            common.note(f"{script} drew nothing: {done.stderr.strip()}")
            return {}
        out = {}  # in the order the script wrote them, which is the order its --help lists them
        for line in done.stdout.splitlines():
            path = line.removeprefix("wrote ")
            if line.startswith("wrote ") and path.endswith(".png"):
                with open(path, "rb") as f:
                    out[os.path.basename(path)] = f.read()
        return out


def fmt(value):
    if isinstance(value, float):
        return f"{value:.4g}" if abs(value) < 1e5 else f"{value:.0f}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, (int, float)) for v in value):
        return f"[{value[0]:.3g}, {value[1]:.3g}]"
    return "" if value is None else str(value)


def table(columns, rows):
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>" for row in rows)
    return f"<div class=wide><table><tr>{head}</tr>{body}</table></div>"


def run_page(folder):
    summary = read_json(os.path.join(folder, "summary.json"))
    policies = summary.get("policies") or {}
    keys = ["mean_max_step_ms", "p95_max_step_ms", "mean_samples_per_s", "mean_max_compute_ms",
            "mean_std_compute_ms", "mean_comm_wait_ms", "mean_max_padded_tokens", "mean_max_peak_mem_mib"]
    keys = [k for k in keys if any(isinstance(p, dict) and k in p for p in policies.values())]
    rows = [[name] + [p.get(k) for k in keys] for name, p in policies.items() if isinstance(p, dict)]
    figures = draw("run.py", [os.path.join(folder, "steps.csv")])
    meta = common.metadata(os.path.join(folder, "steps.csv"))
    return ("Run", table(["policy"] + keys, rows), figures, summary.get("config"),
            {"trace metadata": meta, **(summary.get("provenance") or {})}, common.setup_title(meta))


def validation_page(folder):
    doc = read_json(os.path.join(folder, "validation.json"))
    keys = ["steps", "measured_mean_max_step_ms", "predicted_mean_max_step_ms", "mean_error_pct",
            "measured_p95_max_step_ms", "predicted_p95_max_step_ms", "p95_error_pct", "measured_gain_pct",
            "measured_gain_ci95", "predicted_gain_pct", "predicted_gain_ci95"]
    rows = []
    for name, p in (doc.get("policies") or {}).items():
        if isinstance(p, dict):
            rows.append([name] + [p.get(k) for k in keys])
    baseline = doc.get("baseline")
    if isinstance(baseline, dict) and isinstance(baseline.get("figures"), dict):
        rows.insert(0, [f"{baseline.get('policy', 'baseline')} (baseline)"] +
                    [baseline["figures"].get(k) for k in keys])
    model = doc.get("model")
    provenance = {"model": model, "measured": doc.get("measured")}
    if isinstance(model, str) and os.path.isfile(model):  # a path relative to where validate ran
        spec = read_json(model)
        if isinstance(spec, dict):
            provenance.update({k: spec[k] for k in ("source", "calibration", "platform") if k in spec})
    figures = draw("validation.py", [folder])
    config = {k: doc[k] for k in ("measured", "model") if k in doc}
    return ("Validation", table(["policy"] + keys, rows), figures, config, provenance,
            f"model {os.path.basename(model)}" if isinstance(model, str) else "")


def sweep_page(folder):
    path = os.path.join(folder, "results.csv")
    header, rows = common.read_csv(path, ("cell", "policy"))
    swept = header[header.index("cell") + 1:header.index("policy")]
    gains = {}
    for line, row in rows:
        if row.get("gain_pct", "") != "":
            gains.setdefault(row["policy"], []).append((common.number(path, line, "gain_pct", row["gain_pct"]),
                                                        row["cell"]))
    summary = [[policy, len(g), sum(v for v, _ in g) / len(g), min(g)[0], min(g)[1], max(g)[0], max(g)[1]]
               for policy, g in gains.items()]
    policies = list(gains)
    figures = {}
    varying = [k for k in swept if len({row[k] for _, row in rows}) > 1]
    if len(varying) == 1:
        figures = draw("sweep.py", [path, "lines", "--x", varying[0], "--metric", "gain_pct"])
    elif len(varying) == 2 and len(policies) > 1:
        figures = draw("sweep.py", [path, "heatmap", "--x", varying[0], "--y", varying[1], "--gain", policies[1]])
    else:
        common.note(f"{len(varying)} swept keys vary: no figure (plots/sweep.py draws one with --where)")
    grid = read_json(os.path.join(folder, "sweep.json"))
    return ("Sweep", table(["policy", "cells", "mean gain_pct", "smallest", "in cell", "largest", "in cell"],
                           summary), figures, grid, {"swept keys": swept}, f"sweep {os.path.basename(folder)}")


def page(folder, kind):
    title, results, figures, config, provenance, setup = {"run": run_page, "validation": validation_page,
                                                          "sweep": sweep_page}[kind](folder)
    images = "".join(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
                     f'{base64.b64encode(data).decode()}"><figcaption>{html.escape(name)}</figcaption></figure>'
                     for name, data in figures.items())
    heading = f"{title}: {setup}" if setup else title
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(heading)}</title>"
            f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>"
            f"<h1>{html.escape(heading)}</h1><p>{html.escape(os.path.abspath(folder))}</p>"
            f"<h2>Results</h2>{results}"
            f"<h2>Figures</h2>{images or '<p>none drawn</p>'}"
            f"<h2>Config</h2><pre>{html.escape(json.dumps(config, indent=2))}</pre>"
            f"<h2>Provenance</h2><pre>{html.escape(json.dumps(provenance, indent=2))}</pre>"
            "</body></html>\n")


def main():
    parser = common.make_parser(__doc__)
    parser.add_argument("folder", metavar="DIR", help="a run, compare, sweep or validation output folder")
    parser.add_argument("--out", metavar="FILE.html", help="the page to write (default: DIR/report.html)")
    args = parser.parse_args()
    if not os.path.isdir(args.folder):
        common.fail(f"{args.folder}: not a folder")
    out = args.out or os.path.join(args.folder, "report.html")
    if os.path.isdir(out):
        common.fail(f"{out}: is a folder, expected an HTML file name")
    text = page(args.folder, kind_of(args.folder))
    folder = os.path.dirname(out) or "."
    try:
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix="report.tmp.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, out)
    except OSError as e:
        common.fail(f"{e.filename or out}: {e.strerror}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
