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
.wide{overflow-x:auto}.verdict li{margin:0.3em 0}h3{font-size:1em}pre{background:#f7f7f7;padding:0.8em;overflow:auto;font-size:12px}.missing{color:#b00}"""
# Marks a figure that did not decode, so that a broken page shows it instead of hiding it.
SCRIPT = """window.addEventListener('load',function(){var n=0;for(var i of document.images){
if(i.complete&&i.naturalWidth>0)n++;else i.insertAdjacentHTML('afterend','<p class=missing>figure not shown</p>');}
document.body.dataset.figuresShown=n;document.body.dataset.figures=document.images.length;
var wide=0;for(var w of document.querySelectorAll('.wide'))if(w.scrollWidth>w.clientWidth+1)wide++;
document.body.dataset.tablesScrolling=wide;});"""


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
            why = f"{script} drew nothing: {done.stderr.strip()}"
            common.note(why)
            return {"": why}  # the page says why there is no figure
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


# Column heads that wrap to the page's width (the keys are summary.json's).
RUN_LABELS = {"mean_max_step_ms": "max step, mean ms", "p95_max_step_ms": "max step, P95 ms",
              "mean_samples_per_s": "samples/s, mean", "mean_max_compute_ms": "max compute, mean ms",
              "mean_std_compute_ms": "std of compute, mean ms", "mean_comm_wait_ms": "comm wait, mean ms",
              "mean_max_padded_tokens": "max padded tokens, mean", "mean_max_peak_mem_mib": "max peak memory, mean MiB"}


def run_page(folder):
    summary = read_json(os.path.join(folder, "summary.json"))
    policies = summary.get("policies") or {}
    keys = ["mean_max_step_ms", "p95_max_step_ms", "mean_samples_per_s", "mean_max_compute_ms",
            "mean_std_compute_ms", "mean_comm_wait_ms", "mean_max_padded_tokens", "mean_max_peak_mem_mib"]
    keys = [k for k in keys if any(isinstance(p, dict) and k in p for p in policies.values())]
    rows = [[name] + [p.get(k) for k in keys] for name, p in policies.items() if isinstance(p, dict)]
    figures = draw("run.py", [os.path.join(folder, "steps.csv")])
    meta = common.metadata(os.path.join(folder, "steps.csv"))
    return ("Run", table(["policy"] + [RUN_LABELS[k] for k in keys], rows), figures, summary.get("config"),
            {"trace metadata": meta, **(summary.get("provenance") or {})}, common.setup_title(meta))


def _signed(value, digits=2):
    """A signed figure without a "-0.00" for what rounds to zero."""
    if not isinstance(value, (int, float)):
        return "?"
    return f"{0.0 if abs(value) < 0.5 * 10 ** -digits else value:+.{digits}f}"


def _interval(pair, digits=2):
    return f"[{_signed(pair[0], digits)}, {_signed(pair[1], digits)}]" if isinstance(pair, list) and len(pair) == 2 else ""


def verdict(name, p):
    """One policy's verdict, as validate prints it: the measured gain against the predicted one."""
    if "measured_gain_pct" not in p:
        return f"{name}: mean {_signed(p.get('mean_error_pct'), 1)}%, P95 {_signed(p.get('p95_error_pct'), 1)}% off the measurement"
    measured, predicted = p.get("measured_gain_pct"), p.get("predicted_gain_pct")
    unit = " per sample" if p.get("gain_per_sample") else ""  # a policy that trains another number of samples
    text = (f"{name}: gain{unit} measured {_signed(measured)}% {_interval(p.get('measured_gain_ci95'))}, "
            f"predicted {_signed(predicted)}%")
    if "predicted_gain_pi95" in p:
        text += f" (prediction interval {_interval(p['predicted_gain_pi95'], 1)}, mostly {p.get('predicted_gain_pi_mostly')})"
    if p.get("gain_resolved") is False:
        text += ": the measured gain cannot be told from noise (its interval holds 0)"
    else:
        text += (": the prediction lies inside the measured interval" if p.get("predicted_gain_in_measured_ci")
                 else ": the prediction lies outside the measured interval")
    if "measured_gain_in_prediction_interval" in p:
        text += ("; the measured gain inside the prediction interval" if p["measured_gain_in_prediction_interval"]
                 else "; the measured gain outside the prediction interval")
    return text


def validation_page(folder):
    doc = read_json(os.path.join(folder, "validation.json"))
    policies = {n: p for n, p in (doc.get("policies") or {}).items() if isinstance(p, dict)}
    baseline = doc.get("baseline") if isinstance(doc.get("baseline"), dict) else {}
    figures_of = dict(policies)
    if isinstance(baseline.get("figures"), dict):
        figures_of = {f"{baseline.get('policy', 'baseline')} (baseline)": baseline["figures"], **policies}

    def step_row(name, p):
        return [name, p.get("steps"),
                f"{fmt(p.get('measured_mean_max_step_ms'))} → {fmt(p.get('predicted_mean_max_step_ms'))} "
                f"({_signed(p.get('mean_error_pct'), 1)}%)",
                f"{fmt(p.get('measured_p95_max_step_ms'))} → {fmt(p.get('predicted_p95_max_step_ms'))} "
                f"({_signed(p.get('p95_error_pct'), 1)}%)"]

    steps = table(["policy", "steps", "mean max step ms, measured → predicted", "P95, measured → predicted"],
                  [step_row(n, p) for n, p in figures_of.items()])
    phase_names = []
    for p in figures_of.values():
        for phase in (p.get("phases") or {}):
            if phase not in phase_names:
                phase_names.append(phase)

    def phase_cell(f):
        if not isinstance(f, dict):
            return ""
        error = (f"{_signed(f['error_pct'], 1)}%" if "error_pct" in f else f"{_signed(f.get('error_ms'), 1)} ms")
        return f"{fmt(f.get('measured_ms'))} → {fmt(f.get('predicted_ms'))} ({error})"

    phases = table(["policy"] + [f"{phase} ms" for phase in phase_names],
                   [[n] + [phase_cell((p.get("phases") or {}).get(phase)) for phase in phase_names]
                    for n, p in figures_of.items()]) if phase_names else ""
    verdicts = "".join(f"<li>{html.escape(verdict(n, p))}</li>" for n, p in policies.items())
    model = doc.get("model")
    provenance = {"model": model, "measured": doc.get("measured")}
    if isinstance(model, str) and os.path.isfile(model):  # a path relative to where validate ran
        spec = read_json(model)
        if isinstance(spec, dict):
            provenance.update({k: spec[k] for k in ("source", "calibration", "platform") if k in spec})
    figures = draw("validation.py", [folder])
    config = {k: doc[k] for k in ("measured", "model") if k in doc}
    measured = (doc.get("measured") or {}).get("file", "") if isinstance(doc.get("measured"), dict) else ""
    run = os.path.basename(os.path.dirname(measured)) or os.path.basename(measured) or os.path.basename(folder)
    results = (f"<ul class=verdict>{verdicts}</ul>{steps}"
               + (f"<h3>Phases, mean ms per rank-step (where an error comes from)</h3>{phases}" if phases else ""))
    return ("Validation", results, figures, config, provenance,
            f"{run} against {os.path.basename(model)}" if isinstance(model, str) else run)


def sweep_page(folder):
    path = os.path.join(folder, "results.csv")
    header, rows = common.read_csv(path, ("cell", "policy"))
    swept = header[header.index("cell") + 1:header.index("policy")]
    gains = {}
    for line, row in rows:
        if row.get("gain_pct", "") != "":
            gains.setdefault(row["policy"], []).append((common.number(path, line, "gain_pct", row["gain_pct"]),
                                                        row["cell"]))
    values = {row["cell"]: ", ".join(f"{k}={row[k]}" for k in swept) for _, row in rows}
    summary = [[policy, len(g), sum(v for v, _ in g) / len(g), min(g)[0], values[min(g)[1]], max(g)[0],
                values[max(g)[1]]] for policy, g in gains.items()]
    policies = list(gains)
    figures = {}
    varying = [k for k in swept if len({row[k] for _, row in rows}) > 1]
    if len(varying) == 1:
        figures = draw("sweep.py", [path, "lines", "--x", varying[0], "--metric", "gain_pct"])
    elif len(varying) == 2 and len(policies) > 1:
        figures = draw("sweep.py", [path, "heatmap", "--x", varying[0], "--y", varying[1], "--gain", policies[1]])
    else:
        why = f"{len(varying)} swept keys vary: no figure (plots/sweep.py draws one with --where)"
        common.note(why)
        figures = {"": why}
    grid = read_json(os.path.join(folder, "sweep.json"))
    return ("Sweep", table(["policy", "cells", "mean gain_pct", "smallest", "in cell", "largest", "in cell"],
                           summary), figures, grid, {"swept keys": swept}, f"sweep {os.path.basename(folder)}")


def page(folder, kind):
    title, results, figures, config, provenance, setup = {"run": run_page, "validation": validation_page,
                                                          "sweep": sweep_page}[kind](folder)
    why_none = figures.pop("", None) if isinstance(figures.get(""), str) else None  # a reason, not a figure
    images = "".join(f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,'
                     f'{base64.b64encode(data).decode()}"><figcaption>{html.escape(name)}</figcaption></figure>'
                     for name, data in figures.items())
    heading = f"{title}: {setup}" if setup else title
    return (f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8><title>{html.escape(heading)}</title>"
            f"<style>{STYLE}</style><script>{SCRIPT}</script></head><body>"
            f"<h1>{html.escape(heading)}</h1><p>{html.escape(os.path.abspath(folder))}</p>"
            f"<h2>Results</h2>{results}"
            f"<h2>Figures</h2>{images or '<p>none drawn' + (': ' + html.escape(why_none) if why_none else '') + '</p>'}"
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
    # A folder name that is not UTF-8 shows with U+FFFD where its bytes were, rather than failing
    # to encode half-way through the page.
    text = page(args.folder, kind_of(args.folder)).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    folder = os.path.dirname(out) or "."
    temp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, temp = tempfile.mkstemp(prefix="report.tmp.", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(temp, 0o644)
        os.replace(temp, out)
    except OSError as e:
        if temp and os.path.exists(temp):
            os.unlink(temp)  # nothing partial left behind
        common.fail(f"{e.filename or out}: {e.strerror}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
