#!/usr/bin/env python3
"""Plots the study's token-level figures from a `ddpsim balance --out DIR` run: per-step
maximum padded tokens over ranks, and per-step cross-rank std of padded tokens, one line per
policy. Needs python3-matplotlib (Debian package).

usage: plots/balance.py DIR/steps.csv [--out FIGURE.png] [--policies static,minmax:...]
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict


def read_steps(path):
    """policy -> step -> list of padded tokens per rank, from a trace CSV (columns by name)."""
    per_policy = defaultdict(lambda: defaultdict(list))
    with open(path, newline="") as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        missing = {"step", "policy", "padded_tokens"} - set(rows.fieldnames or [])
        if missing:
            sys.exit(f"{path}: missing column(s) {', '.join(sorted(missing))}")
        for line, row in enumerate(rows, start=2):
            try:
                per_policy[row["policy"]][int(row["step"])].append(int(row["padded_tokens"]))
            except ValueError as e:
                sys.exit(f"{path}:{line}: {e}")
    return per_policy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("steps_csv")
    parser.add_argument("--out", default="balance.png")
    parser.add_argument("--policies", help="comma-separated subset, in legend order")
    args = parser.parse_args()

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = read_steps(args.steps_csv)
    policies = args.policies.split(",") if args.policies else list(data)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    for policy in policies:
        if policy not in data:
            sys.exit(f"{args.steps_csv}: no rows for policy {policy} (have: {', '.join(data)})")
        steps = sorted(data[policy])
        top.plot(steps, [max(data[policy][s]) for s in steps], label=policy, linewidth=0.8)
        bottom.plot(steps, [statistics.pstdev(data[policy][s]) for s in steps], label=policy, linewidth=0.8)
    top.set_ylabel("max padded tokens over ranks")
    bottom.set_ylabel("std of padded tokens across ranks")
    bottom.set_xlabel("step")
    top.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
