#!/usr/bin/env python3
"""Draws a sweep's results.csv (`ddpsim sweep --out DIR`) as a heatmap or as lines.

usage: plots/sweep.py RESULTS_CSV [--out FOLDER] heatmap --x KEY --y KEY [--facet KEY]
           [--metric COL | --gain POLICY] [--policy P] [--where KEY=VALUE]... [--name FILE]
       plots/sweep.py RESULTS_CSV [--out FOLDER] lines --x KEY [--metric COL] [--policies a,b,...]
           [--by KEY] [--over KEY] [--where KEY=VALUE]... [--logx] [--name FILE]

results.csv holds one row per grid cell and policy: `cell`, one column per swept key (named by
its dotted config path, e.g. training.world_size), `policy`, then the metrics: those of
summary.json, and gain_pct / p95_gain_pct, the reduction of the mean / P95 max step time
against the cell's first policy in % (positive: faster; per sample where gain_per is
"sample": a policy that changes the samples per step). A KEY is a swept key's full name or
its last part (world_size); a COL is a metric column (default mean_max_step_ms). Axis values
are sorted numerically when all are numbers, else kept in the order they first appear.

  heatmap  the metric of one policy (--policy, default the file's first) over two swept keys,
           or with --gain POLICY that policy's gain_pct; one panel per value of --facet, each
           cell annotated with its value, one colour scale for all panels. 350 pixels high,
           max(600, 120 + 240 x panels) wide.
  lines    the metric against one swept key, one line per policy, or with --by KEY one line per
           value of that swept key (for the one policy --policies names). 800x350 pixels. With
           --over KEY (replicates: a swept training.seed), each point is the mean over that
           key's values, its error bar their 2.5-97.5% range.

Every other swept key that takes several values must be fixed with --where KEY=VALUE
(repeatable); when one is not, the script lists the free keys and their values. The figure is
written to FOLDER (default: the CSV's folder) as heatmap-METRIC-POLICY.png or
lines-METRIC-KEY.png (lines-METRIC-KEY-by-KEY.png with --by), or --name, and its path printed.

examples:
  plots/sweep.py runs/s/results.csv heatmap --x world_size --y global_batch --facet topology \\
      --gain minmax
  plots/sweep.py runs/s/results.csv heatmap --x world_size --y topology --where global_batch=64 \\
      --metric p95_max_step_ms --policy kk
  plots/sweep.py runs/s/results.csv lines --x world_size --where global_batch=32 \\
      --where topology=pcie --logx
  plots/sweep.py runs/s/results.csv lines --x global_batch --metric gain_pct --over training.seed
  plots/sweep.py runs/s/results.csv lines --x world_size --metric gain_pct --policies minmax \\
      --by data_parallel --over seed --where length_std=600
"""
import argparse
import math
import os

import common


def as_number(text):
    try:
        return float(text)
    except ValueError:
        return None


class Results:
    """The rows of a results.csv, with its swept keys, metrics and policies."""

    def __init__(self, path):
        header, self.rows = common.read_csv(path, ("cell", "policy"))
        first, last = header.index("cell"), header.index("policy")
        if last < first:
            common.fail(f"{path}: column policy comes before cell; the swept keys lie between them")
        self.path = path
        # the sweep's folder names it in titles (results.csv sits in DIR of `ddpsim sweep --out DIR`)
        self.name = os.path.basename(os.path.dirname(os.path.abspath(path)))
        self.keys = header[first + 1:last]
        self.metrics = header[last + 1:]
        self.policies = list(dict.fromkeys(row["policy"] for _, row in self.rows))

    def key(self, name):
        """The swept key called name, in full or by the part after its last dot."""
        if name in self.keys:
            return name
        matches = [k for k in self.keys if k.endswith("." + name)]
        if len(matches) != 1:
            common.fail(f"{self.path}: {'ambiguous' if matches else 'no'} swept key '{name}' "
                        f"(swept: {', '.join(self.keys) or 'none'})")
        return matches[0]

    def metric(self, name):
        if name not in self.metrics:
            common.fail(f"{self.path}: no column '{name}' (metrics: {', '.join(self.metrics)})")
        return name

    def policy(self, name):
        if name not in self.policies:
            common.fail(f"{self.path}: no rows for policy '{name}' (policies: {', '.join(self.policies)})")
        return name

    def values(self, key, rows):
        """The distinct values of key in rows: in numeric order when all are numbers."""
        values = list(dict.fromkeys(row[key] for _, row in rows))
        if all(as_number(v) is not None for v in values):
            values.sort(key=as_number)
        return values

    def where(self, conditions):
        """{key: value} from KEY=VALUE texts, every value checked to occur in the file."""
        fixed = {}
        for condition in conditions:
            name, _, value = condition.partition("=")
            key = self.key(name)
            present = self.values(key, self.rows)
            match = [v for v in present if v == value or (as_number(v) is not None and as_number(v) == as_number(value))]
            if not match:
                common.fail(f"{self.path}: no row with {key}={value} ({key}: {', '.join(present)})")
            fixed[key] = match[0]
        return fixed

    def select(self, fixed, policies):
        return [(line, row) for line, row in self.rows
                if row["policy"] in policies and all(row[k] == v for k, v in fixed.items())]

    def check_unique(self, rows, dims, fixed):
        """Fails unless rows hold at most one row per combination of dims' values, naming the
        swept keys left free when that is why."""
        first_line = {}
        for line, row in rows:
            combination = tuple(row[d] for d in dims)
            if combination not in first_line:
                first_line[combination] = line
                continue
            free = [k for k in self.keys if k not in dims and k not in fixed and len(self.values(k, rows)) > 1]
            if free:
                common.fail(f"{self.path}: several rows per ({', '.join(dims)}); fix the other swept keys with "
                            f"--where: " + "; ".join(f"{k}={'|'.join(self.values(k, rows))}" for k in free))
            common.fail(f"{self.path}:{line}: a second row for {', '.join(f'{d}={v}' for d, v in zip(dims, combination))}"
                        f" (first at line {first_line[combination]})")

    def value(self, line, row, metric):
        value = common.number(self.path, line, metric, row[metric], missing_ok=True)
        return math.nan if value is None else value


def label(value):
    if math.isnan(value):
        return "-"
    digits = 0 if abs(value) >= 100 else 1 if abs(value) >= 10 else 2
    return f"{value:.{digits}f}"


def conditions_text(fixed):
    return ", ".join(f"{k}={v}" for k, v in fixed.items())


def heatmap(plt, res, args, parser):
    x, y = res.key(args.x), res.key(args.y)
    facet = res.key(args.facet) if args.facet else None
    axes_keys = [k for k in (facet, y, x) if k]
    if len(set(axes_keys)) < len(axes_keys):
        parser.error("--x, --y and --facet must name different swept keys")
    if args.gain and (args.metric or args.policy):
        parser.error("--gain POLICY is the metric gain_pct of POLICY: give it without --metric and --policy")
    metric = res.metric("gain_pct" if args.gain else args.metric or "mean_max_step_ms")
    policy = res.policy(args.gain or args.policy or res.policies[0])
    fixed = res.where(args.where)
    rows = res.select(fixed, [policy])
    res.check_unique(rows, axes_keys + ["policy"], fixed)

    xs, ys = res.values(x, rows), res.values(y, rows)
    facets = res.values(facet, rows) if facet else [None]
    grids = {f: [[math.nan] * len(xs) for _ in ys] for f in facets}
    for line, row in rows:
        grids[row[facet] if facet else None][ys.index(row[y])][xs.index(row[x])] = res.value(line, row, metric)
    finite = [v for grid in grids.values() for cells in grid for v in cells if not math.isnan(v)]
    if not finite:
        common.fail(f"{res.path}: column {metric} is empty in every row drawn")

    import matplotlib
    gain = metric.endswith("gain_pct")
    if gain:  # symmetric around 0, so that the sign reads from the colour
        high = max(abs(v) for v in finite) or 1.0
        norm = matplotlib.colors.Normalize(-high, high)
    else:
        low, high = min(finite), max(finite)
        norm = matplotlib.colors.Normalize(low, high if high > low else low + 1)
    cmap = matplotlib.colormaps["RdBu" if gain else "viridis"].with_extremes(bad="#eeeeee")

    fig, panels = plt.subplots(1, len(facets), figsize=(max(600, 120 + 240 * len(facets)) / common.DPI, 3.5),
                               squeeze=False, layout="constrained")
    for ax, f in zip(panels[0], facets):
        image = ax.imshow(grids[f], cmap=cmap, norm=norm, origin="lower", aspect="auto")
        ax.set_xticks(range(len(xs)), xs, fontsize=8)
        ax.set_yticks(range(len(ys)), ys, fontsize=8)
        ax.set_xlabel(x, fontsize=8)
        if f is not None:
            ax.set_title(f"{facet}={f}", fontsize=8)
        for i, cells in enumerate(grids[f]):
            for j, v in enumerate(cells):
                r, g, b, _ = cmap(norm(v)) if not math.isnan(v) else (1, 1, 1, 1)
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5
                ax.text(j, i, label(v), ha="center", va="center", fontsize=7, color="white" if dark else "black")
    panels[0][0].set_ylabel(y, fontsize=8)
    bar = fig.colorbar(image, ax=panels[0].tolist(), shrink=0.9)
    bar.ax.tick_params(labelsize=7)
    bar.set_label(f"{policy}'s gain over {res.policies[0]} (%)" if gain
                  else common.metric_label(metric, abstract=policy == "abstract"), fontsize=8)
    title = f"{metric} of {policy}" + (f" over {res.policies[0]}" if gain else "")
    fig.suptitle(f"{title}: sweep {res.name}" + (f"\n{conditions_text(fixed)}" if fixed else ""), fontsize=9)
    return fig, f"heatmap-{metric}-{common.file_part(policy)}.png"


def quantile(values, q):
    values = sorted(values)
    position = q * (len(values) - 1)
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def lines(plt, res, args):
    x = res.key(args.x)
    metric = res.metric(args.metric or "mean_max_step_ms")
    policies = [res.policy(p.strip()) for p in args.policies.split(",")] if args.policies else res.policies
    fixed = res.where(args.where)
    over = res.key(args.over) if args.over else None
    by = res.key(args.by) if args.by else None
    for flag, key in (("--over", over), ("--by", by)):
        if key and key in (x, *fixed):
            common.fail(f"{res.path}: {flag} {key} is also " + ("--x" if key == x else "fixed by --where"))
    if by and by == over:
        common.fail(f"{res.path}: --by {by} is also --over (a line per value, or the mean over them: one of the two)")
    if by and len(policies) != 1:
        common.fail(f"{res.path}: --by {by} draws a line per value of {by} for one policy: name it with --policies "
                    f"(one of {', '.join(res.policies)})")
    rows = res.select(fixed, policies)
    res.check_unique(rows, [x, "policy"] + [k for k in (by, over) if k], fixed)
    xs = res.values(x, rows)
    numeric = all(as_number(v) is not None for v in xs)
    if args.logx and not (numeric and all(as_number(v) > 0 for v in xs)):
        common.fail(f"{res.path}: --logx needs positive numbers in {x} (values: {', '.join(xs)})")
    positions = [as_number(v) for v in xs] if numeric else list(range(len(xs)))

    # Each line: its legend label and the rows it draws.
    series = ([(v, lambda row, v=v: row[by] == v) for v in res.values(by, rows)] if by
              else [(p, lambda row, p=p: row["policy"] == p) for p in policies])
    fig, ax = plt.subplots(figsize=(8, 3.5))
    for i, (name, selected) in enumerate(series):
        at = {}
        for line, row in rows:
            if selected(row):
                at.setdefault(row[x], []).append(res.value(line, row, metric))
        ys = [at.get(v, [math.nan]) for v in xs]
        means = [sum(y) / len(y) for y in ys]
        if over:
            # 2.5-97.5% of the replicates around their mean, as error bars.
            low = [m - quantile(y, 0.025) for m, y in zip(means, ys)]
            high = [quantile(y, 0.975) - m for m, y in zip(means, ys)]
            ax.errorbar(positions, means, yerr=[low, high], marker="o", markersize=4, linewidth=1.2, capsize=3,
                        label=name, color=f"C{i}")
        else:
            ax.plot(positions, means, marker="o", markersize=4, linewidth=1.2, label=name, color=f"C{i}")
    if args.logx:
        ax.set_xscale("log")
        ax.minorticks_off()
    ax.set_xticks(positions, xs, fontsize=8)
    ax.set_xlabel(x, fontsize=8)
    ax.set_ylabel(common.metric_label(metric, abstract=policies == ["abstract"]), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    title = conditions_text(fixed) if fixed else ""
    if by:
        title += ("; " if title else "") + f"{policies[0]}, a line per {by}"
    if over:
        title += ("; " if title else "") + f"mean and 2.5-97.5% over {len(res.values(over, rows))} values of {over}"
    common.title(fig, f"{metric} against {x}: sweep {res.name}", title)
    ax.grid(alpha=0.3)
    common.legend_outside(ax)
    fig.tight_layout()
    return fig, f"lines-{metric}-{common.file_part(x)}" + (f"-by-{common.file_part(by)}" if by else "") + ".png"


def main():
    parser = common.make_parser(__doc__)
    parser.add_argument("results", metavar="RESULTS_CSV", help="a sweep's results.csv")
    parser.add_argument("--out", metavar="FOLDER", help="where the figure goes (default: the CSV's folder)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="heatmap|lines")
    shared = argparse.ArgumentParser(add_help=False)
    shared.add_argument("--out", metavar="FOLDER", default=argparse.SUPPRESS, help="where the figure goes (here or before the command)")
    shared.add_argument("--metric", metavar="COL", help="a metric column (default mean_max_step_ms)")
    shared.add_argument("--where", metavar="KEY=VALUE", action="append", default=[],
                        help="fix a swept key (repeatable)")
    shared.add_argument("--name", metavar="FILE", help="the figure's file name in FOLDER")
    more = "The input format and the figures: sweep.py --help."
    hm = commands.add_parser("heatmap", parents=[shared], help="a metric over two swept keys, panels by a third",
                             description=more)
    hm.add_argument("--x", required=True, metavar="KEY", help="the swept key along the columns")
    hm.add_argument("--y", required=True, metavar="KEY", help="the swept key along the rows")
    hm.add_argument("--facet", metavar="KEY", help="one panel per value of this swept key")
    hm.add_argument("--policy", metavar="P", help="the policy whose metric is drawn (default: the first)")
    hm.add_argument("--gain", metavar="POLICY", help="draw POLICY's gain_pct over the cell's first policy")
    ln = commands.add_parser("lines", parents=[shared], help="a metric against one swept key, a line per policy",
                             description=more)
    ln.add_argument("--x", required=True, metavar="KEY", help="the swept key along the x axis")
    ln.add_argument("--policies", metavar="a,b,...", help="a subset of the policies, in legend order")
    ln.add_argument("--by", metavar="KEY", help="a line per value of this swept key (one policy: --policies P)")
    ln.add_argument("--logx", action="store_true", help="a logarithmic x axis (world sizes, batch sizes)")
    ln.add_argument("--over", metavar="KEY", help="replicates: the mean over this swept key (training.seed) and "
                    "its 2.5-97.5%% range as error bars")
    args = parser.parse_args()
    for condition in args.where:
        if "=" not in condition:
            parser.error(f"--where {condition}: expected KEY=VALUE")
    if args.name is not None and (not args.name or os.sep in args.name):
        parser.error(f"--name {args.name}: a file name without folder (the folder is --out)")
    out = common.output_folder(parser, args.out, [os.path.dirname(args.results) or "."])

    res = Results(args.results)
    plt = common.pyplot()
    fig, name = heatmap(plt, res, args, parser) if args.command == "heatmap" else lines(plt, res, args)
    common.save_figures(out, {args.name or name: fig})


if __name__ == "__main__":
    main()
