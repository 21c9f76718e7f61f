#!/usr/bin/env python3
"""Draws the study's token-level figures from a `ddpsim balance --out DIR` run (or any trace):
per step, the maximum padded tokens over ranks (top) and their population standard deviation
across ranks (bottom), one line per policy.

usage: plots/balance.py DIR_OR_STEPS_CSV [--out FIGURE.png] [--policies a,b,...]

The figure is 1000x700 pixels, written to FIGURE.png (default: balance.png beside the trace)
through a temporary renamed into place; its path is printed. Bad input is one line naming the
file, line and column, and nothing is written.

examples:
  plots/balance.py runs/b                     # after: ddpsim balance --out runs/b
  plots/balance.py runs/b/steps.csv --policies static,minmax --out figs/balance.png
"""
import os
import statistics
from collections import defaultdict

import common


def main():
    parser = common.make_parser(__doc__)
    parser.add_argument("trace", help="a run folder or its steps.csv")
    parser.add_argument("--out", help="the PNG to write (default: balance.png beside the trace)")
    parser.add_argument("--policies", help="comma-separated subset, in legend order")
    args = parser.parse_args()
    path = os.path.join(args.trace, "steps.csv") if os.path.isdir(args.trace) else args.trace
    out = args.out or os.path.join(os.path.dirname(path), "balance.png")

    tokens = defaultdict(lambda: defaultdict(list))  # policy -> step -> padded tokens per rank
    _, rows = common.read_csv(path, ("policy", "step", "padded_tokens"))
    for line, row in rows:
        step = common.count(path, line, "step", row["step"])
        tokens[row["policy"]][step].append(common.count(path, line, "padded_tokens", row["padded_tokens"]))
    policies = args.policies.split(",") if args.policies else list(tokens)
    for policy in policies:
        if policy not in tokens:
            common.fail(f"{path}: no rows for policy {policy} (have: {', '.join(tokens)})")

    plt = common.pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for policy in policies:
        steps = sorted(tokens[policy])
        top.plot(steps, [max(tokens[policy][s]) for s in steps], label=policy, linewidth=0.8)
        bottom.plot(steps, [statistics.pstdev(tokens[policy][s]) for s in steps], label=policy, linewidth=0.8)
    top.set_ylabel("max padded tokens over ranks (tokens)")
    bottom.set_ylabel("std of padded tokens across ranks (tokens)")
    bottom.set_xlabel("step")
    common.legend_outside(top)
    common.title(fig, "Padded tokens per rank and step", common.setup_title(common.metadata(path)))
    fig.tight_layout()
    folder, name = os.path.split(out)
    common.save_figures(folder or ".", {name: fig})


if __name__ == "__main__":
    main()
