#!/usr/bin/env python3
"""Draws the study's per-step figures from a simulated run or a measured trace.

usage: plots/run.py DIR_OR_STEPS_CSV... [--out FOLDER] [--policies a,b,...] [--smooth N | --raw]

Reads steps.csv in the trace schema (`ddpsim run --out DIR`, `ddpsim compare`, a ddptrain
trace folder): '#' metadata lines, then one row per policy, step and rank; the columns used are
policy, step, rank, step_ms, fwd_ms, bwd_ms, padded_tokens and peak_mem_mib. Writes into FOLDER
(default: the folder of the one trace given), one line per policy in each, titled with the setup
the trace's metadata names (model, device or platform, G, B), the legend right of the data:

  step_time.png          per-step maximum step time over ranks (what a synchronous step waits for)
  step_time_cdf.png      CDF of that per-step maximum, with the P95 level marked
  padded_tokens_std.png  per-step standard deviation of padded tokens across ranks
  std.png                per-step standard deviation across ranks of compute (forward +
                         backward: step time itself is the same on every rank, since each
                         waits for the slowest at the allreduce) and of peak memory

Per-step lines are the moving mean of --smooth steps (20 by default; --raw: every step as it
is). Standard deviations are population ones across ranks, as in summary.json. A column that is
empty in every row (peak memory on CPU, every timing in a `ddpsim balance` trace) skips its
figure or panel with a note on stderr; a step where some rank lacks the value is left out of
that column's figures. Several traces (say one ddptrain run per policy) are drawn together, each
policy from one trace only; --out is then required. Figures are 800x350 pixels, std.png
800x500 when it has both panels. The paths written are printed; nothing is written on an error.

examples:
  plots/run.py runs/a                         # after: ddpsim run --out runs/a
  plots/run.py runs/a --policies static,kk --smooth 20 --out figs
  plots/run.py traces/cpu/2ranks/static traces/cpu/2ranks/sorted --out figs
"""
import os
import statistics

import common

COLUMNS = ("policy", "step", "rank", "step_ms", "fwd_ms", "bwd_ms", "padded_tokens", "peak_mem_mib")
MEASURED = ("step_ms", "fwd_ms", "bwd_ms", "padded_tokens", "peak_mem_mib")
DRAWN = ("step_ms", "compute_ms", "padded_tokens", "peak_mem_mib")


def steps_csv(arg):
    return os.path.join(arg, "steps.csv") if os.path.isdir(arg) else arg


def read_traces(paths):
    """policy -> step -> rank -> {measured column: value, or None where not measured}."""
    traces, source = {}, {}
    for path in paths:
        _, rows = common.read_csv(path, COLUMNS)
        for line, row in rows:
            policy = row["policy"]
            if source.setdefault(policy, path) != path:
                common.fail(f"{path}:{line}: policy {policy} is also in {source[policy]}")
            step = common.count(path, line, "step", row["step"])
            rank = common.count(path, line, "rank", row["rank"])
            ranks = traces.setdefault(policy, {}).setdefault(step, {})
            if rank in ranks:
                common.fail(f"{path}:{line}: a second row for policy {policy}, step {step}, rank {rank}")
            values = {c: common.number(path, line, c, row[c], missing_ok=True) for c in MEASURED}
            fwd, bwd = values.pop("fwd_ms"), values.pop("bwd_ms")
            values["compute_ms"] = None if fwd is None or bwd is None else fwd + bwd
            ranks[rank] = values
    return traces


def choose_policies(traces, wanted, paths):
    if not wanted:
        return list(traces)
    policies = [p.strip() for p in wanted.split(",") if p.strip()]
    for policy in policies:
        if policy not in traces:
            common.fail(f"{', '.join(paths)}: no rows for policy {policy} (policies: {', '.join(traces)})")
    return policies


def per_step(steps, column, reduce):
    """(steps, values): reduce(column over ranks) at each step where every rank has the column."""
    xs, ys = [], []
    for step in sorted(steps):
        values = [ranks[column] for ranks in steps[step].values()]
        if None not in values:
            xs.append(step)
            ys.append(reduce(values))
    return xs, ys


def usable(traces, policies, column):
    """Whether column has values to draw; notes what is left out."""
    total = sum(len(traces[p]) for p in policies)
    full = sum(len(per_step(traces[p], column, len)[0]) for p in policies)
    if full == 0:
        common.note(f"{column} is empty in every row (not measured): its figures are skipped")
    elif full < total:
        common.note(f"{column}: {total - full} of {total} steps lack a value on some rank and are left out")
    return full > 0


def moving_mean(ys, n):
    out, total = [], 0.0
    for i, y in enumerate(ys):
        total += y - (ys[i - n] if i >= n else 0.0)
        out.append(total / min(i + 1, n))
    return out


def same_as(ys, drawn):
    """The policy an identical series was drawn for already (None: none): it is drawn dashed and
    named so, or one line would hide the other."""
    for policy, other in drawn:
        if len(other) == len(ys) and all(abs(a - b) <= 1e-9 * max(1.0, abs(a)) for a, b in zip(ys, other)):
            return policy
    return None


def draw_per_step(ax, traces, policies, column, reduce, ylabel, smooth):
    drawn = []
    for i, policy in enumerate(policies):
        xs, ys = per_step(traces[policy], column, reduce)
        ys = moving_mean(ys, smooth)
        twin = same_as(ys, drawn)
        ax.plot(xs, ys, label=policy if twin is None else f"{policy} (= {twin})", color=f"C{i}", linewidth=0.8,
                linestyle="-" if twin is None else (0, (4, 3)))
        drawn.append((policy, ys))
    ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # from zero: a 0.4% difference should look like one
    ax.set_ylabel(ylabel if smooth == 1 else f"{ylabel}\n(mean of {smooth} steps)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    common.legend_outside(ax)


def figures(paths, wanted=None, smooth=20):
    """{file name: figure} of the traces at `paths` (ddpsim.plots.steps draws a result with it)."""
    traces = read_traces(paths)
    policies = choose_policies(traces, wanted, paths)
    have = {c: usable(traces, policies, c) for c in DRAWN}
    setup = common.setup_title(common.metadata(paths[0]))
    plt = common.pyplot()
    figs = {}
    if have["step_ms"]:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        draw_per_step(ax, traces, policies, "step_ms", max, "max step time over ranks (ms)", smooth)
        ax.set_xlabel("step", fontsize=8)
        common.title(fig, "Step time: the slowest rank, per step", setup)
        figs["step_time.png"] = fig

        fig, ax = plt.subplots(figsize=(8, 3.5))
        drawn = []
        for i, policy in enumerate(policies):
            values = sorted(per_step(traces[policy], "step_ms", max)[1])
            twin = same_as(values, drawn)
            ax.step(values, [(k + 1) / len(values) for k in range(len(values))], where="post",
                    label=policy if twin is None else f"{policy} (= {twin})", color=f"C{i}", linewidth=1.0,
                    linestyle="-" if twin is None else (0, (4, 3)))
            drawn.append((policy, values))
        ax.axhline(0.95, color="gray", linestyle=":", linewidth=0.8)
        ax.text(0.01, 0.95, "P95", transform=ax.get_yaxis_transform(), fontsize=7, color="gray", va="bottom")
        ax.set_xlabel("max step time over ranks (ms)", fontsize=8)
        ax.set_ylabel("fraction of steps", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        common.legend_outside(ax)
        common.title(fig, "Distribution of the per-step step time", setup)
        figs["step_time_cdf.png"] = fig
    if have["padded_tokens"]:
        fig, ax = plt.subplots(figsize=(8, 3.5))
        draw_per_step(ax, traces, policies, "padded_tokens", statistics.pstdev,
                      "std of padded tokens\nacross ranks (tokens)", smooth)
        ax.set_xlabel("step", fontsize=8)
        common.title(fig, "Padding imbalance across ranks, per step", setup)
        figs["padded_tokens_std.png"] = fig
    panels = [(column, label) for column, label in (("compute_ms", "std of compute (ms)"),
                                                    ("peak_mem_mib", "std of peak memory (MiB)")) if have[column]]
    if panels:
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 5 if len(panels) == 2 else 3.5),
                                 sharex=True, squeeze=False)
        for ax, (column, label) in zip(axes[:, 0], panels):
            draw_per_step(ax, traces, policies, column, statistics.pstdev, label, smooth)
        for ax in axes[1:, 0]:
            ax.get_legend().remove()
        axes[-1, 0].set_xlabel("step", fontsize=8)
        common.title(fig, "Imbalance across ranks, per step", setup)
        figs["std.png"] = fig
    if not figs:
        common.fail(f"{paths[0]}: nothing to draw: step_ms, fwd_ms + bwd_ms, padded_tokens and peak_mem_mib "
                    "are empty")
    for fig in figs.values():
        fig.tight_layout()
    return figs


def main():
    parser = common.make_parser(__doc__)
    parser.add_argument("traces", nargs="+", metavar="DIR_OR_STEPS_CSV",
                        help="a run or trace folder holding steps.csv, or the CSV itself")
    parser.add_argument("--out", metavar="FOLDER", help="where the figures go (default: the trace's folder)")
    parser.add_argument("--policies", metavar="a,b,...", help="a subset of the policies, in legend order")
    parser.add_argument("--smooth", type=int, default=20, metavar="N",
                        help="draw per-step lines as the moving mean of N steps (default 20)")
    parser.add_argument("--raw", action="store_true", help="draw every step's value as it is (no smoothing)")
    args = parser.parse_args()
    if args.smooth < 1:
        parser.error("--smooth must be at least 1")
    if args.raw:
        args.smooth = 1
    paths = [steps_csv(t) for t in args.traces]
    out = common.output_folder(parser, args.out, [os.path.dirname(p) or "." for p in paths])

    common.save_figures(out, figures(paths, args.policies, args.smooth))


if __name__ == "__main__":
    main()
