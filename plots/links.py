#!/usr/bin/env python3
"""Draws a pipeline job's link utilisation over time from `ddpsim run CONFIG --link-series
FILE.csv` (a config with a parallel section): one panel per policy (or `abstract`), a line per
flow class (fwd_prop, bwd_prop, grad_sync), each bin's utilisation as a step.

usage: plots/links.py LINKS_CSV [--out FIGURE.png] [--policies a,b,...]

The CSV has columns policy, start_ms and end_ms (start_unit and end_unit in abstract mode), then
one per flow class: the bytes the class moved in the bin / (bin x GPUs x one link's rate), so a
class whose every link is busy all bin long reads 1. The panels share one utilisation scale,
and the time axis spans the busy part: from the first bin where some class moves bytes to the
last. The figure is 1000 pixels wide and 250 per
panel (at least 350), written to FIGURE.png (default: links.png beside the CSV) through a
temporary renamed into place; its path is printed. Bad input is one line naming the file, line
and column, and nothing is written.

examples:
  ddpsim run configs/pipeline-study.json --set parallel.channels.model=shared \\
      --link-series runs/links.csv
  plots/links.py runs/links.csv
  plots/links.py runs/llama/links.csv --policies static,kk --out figs/links.png
"""
import os

import common

CLASSES = ("fwd_prop", "bwd_prop", "grad_sync")


def main():
    parser = common.make_parser(__doc__)
    parser.add_argument("csv", help="the CSV of ddpsim run --link-series")
    parser.add_argument("--out", help="the PNG to write (default: links.png beside the CSV)")
    parser.add_argument("--policies", help="comma-separated subset, in panel order")
    args = parser.parse_args()
    path = args.csv
    out = args.out or os.path.join(os.path.dirname(path), "links.png")
    if not out.endswith(".png"):
        parser.error(f"--out {out}: expected a .png file name")

    header, rows = common.read_csv(path, ("policy",) + CLASSES)
    unit = "ms" if "start_ms" in header else "unit"
    start, end = f"start_{unit}", f"end_{unit}"
    for column in (start, end):
        if column not in header:
            common.fail(f"{path}: missing column {column} (columns: {', '.join(header)})")
    series = {}  # policy -> [(start, end, {class: utilisation})]
    for line, row in rows:
        a = common.number(path, line, start, row[start])
        b = common.number(path, line, end, row[end])
        if not b > a:
            common.fail(f"{path}:{line}: column {end}: {b:g} is not after {start} {a:g}")
        values = {c: common.number(path, line, c, row[c]) for c in CLASSES}
        for c, v in values.items():
            if v < 0:
                common.fail(f"{path}:{line}: column {c}: {v:g} is negative")
        bins = series.setdefault(row["policy"], [])
        if bins and a < bins[-1][1] - 1e-9 * max(1.0, abs(a)):
            common.fail(f"{path}:{line}: column {start}: {a:g} is before the previous bin's end {bins[-1][1]:g} "
                        f"(bins of a policy are in time order, without overlap)")
        bins.append((a, b, values))
    policies = args.policies.split(",") if args.policies else list(series)
    for policy in policies:
        if policy not in series:
            common.fail(f"{path}: no rows for policy {policy} (have: {', '.join(series)})")

    plt = common.pyplot()
    height = max(3.5, 2.5 * len(policies))
    fig, axes = plt.subplots(len(policies), 1, figsize=(10, height), sharex=True, sharey=True, squeeze=False)
    busy = [(a, b) for p in policies for a, b, v in series[p] if any(x > 0 for x in v.values())]
    for ax, policy in zip(axes[:, 0], policies):
        bins = series[policy]
        edges = [a for a, _, _ in bins] + [bins[-1][1]]
        for c in CLASSES:
            ax.stairs([v[c] for _, _, v in bins], edges, label=c, linewidth=1)
        ax.set_title(policy, fontsize=9)
        ax.set_ylabel("link utilisation (fraction)")
        ax.set_ylim(bottom=0)
    if busy:
        axes[0, 0].set_xlim(min(a for a, _ in busy), max(b for _, b in busy))
    common.legend_outside(axes[0, 0])
    common.title(fig, "Link utilisation per flow class", os.path.basename(path))
    axes[-1, 0].set_xlabel(f"time from the first step shown ({'ms' if unit == 'ms' else 'units'})")
    fig.tight_layout()
    folder, name = os.path.split(out)
    common.save_figures(folder or ".", {name: fig})


if __name__ == "__main__":
    main()
