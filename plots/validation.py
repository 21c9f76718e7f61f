#!/usr/bin/env python3
"""Draws predicted against measured step times from `ddpsim validate --out DIR`.

usage: plots/validation.py DIR... [--out FOLDER] [--all-steps]

Reads DIR/validation.csv (per policy and step: measured_max_step_ms, predicted_max_step_ms,
error_pct, and steady: 0 for a warm-up step validate left out of the steady state) and
DIR/validation.json (per policy: measured_gain_pct and predicted_gain_pct when validate had a
--baseline, with their 95% intervals measured_gain_ci95 and predicted_gain_ci95 where given;
under all_steps the same over every step). Writes into FOLDER (default: the one DIR given),
each titled with the model validated:

  steps.png       measured and predicted max step time over the steps, one panel per policy,
                  warm-up steps shaded where validate left some out; 800 x (100 + 200 x
                  policies) pixels
  scatter.png     predicted against measured per step, with the y = x line; 450x450
  error_hist.png  histogram of the per-step error of the prediction, in %; 800x350
  gains.png       each policy's gain over the baseline, measured and predicted, each bar with
                  its 95% interval where validation.json gives one; 800x350, drawn only when
                  validation.json has gains (validate --baseline)

The scatter, histogram and gains show the steady state, as validate's headline figures do; with
--all-steps they show every step, and steps.png's y axis covers the warm-up peaks too (by
default it is scaled to the steady steps). Several DIRs (say one validate per policy against
one baseline) are drawn together: a policy already read from an earlier DIR (the baseline) is
not read again; --out is then required. The paths written are printed.

examples:
  plots/validation.py runs/validation        # after: ddpsim validate ... --out runs/validation
  plots/validation.py traces/cpu/validation/2ranks/*/ --out figs
"""
import json
import math
import os

import common

COLUMNS = ("policy", "step", "measured_max_step_ms", "predicted_max_step_ms", "error_pct", "steady")


def read_steps(path, policies):
    """Adds {policy: [(step, measured, predicted, error %, steady)]} from path to policies,
    leaving out the policies it already holds."""
    _, rows = common.read_csv(path, COLUMNS)
    known, seen = set(policies), set()
    for line, row in rows:
        policy = row["policy"]
        if policy in known:
            continue
        steady = row["steady"].strip()
        if steady not in ("0", "1"):
            common.fail(f"{path}:{line}: column steady: '{steady}' is not 0 or 1")
        step = common.count(path, line, "step", row["step"])
        values = [common.number(path, line, c, row[c]) for c in COLUMNS[2:5]]
        if (policy, step) in seen:
            common.fail(f"{path}:{line}: a second row for policy {policy}, step {step}")
        seen.add((policy, step))
        policies.setdefault(policy, []).append((step, *values, steady == "1"))


def read_gains(path, gains, all_steps):
    """Adds {policy: (measured %, predicted %)} from path's validation.json to gains."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        common.fail(f"{path}: {e.strerror}")
    except UnicodeDecodeError as e:
        common.fail(f"{path}: not UTF-8 text (byte {e.start})")
    except json.JSONDecodeError as e:
        common.fail(f"{path}:{e.lineno}:{e.colno}: {e.msg}")
    if not isinstance(doc, dict) or not isinstance(doc.get("policies"), dict):
        common.fail(f"{path}: no \"policies\" object")
    for policy, figures in doc["policies"].items():
        if all_steps:
            figures = figures.get("all_steps") if isinstance(figures, dict) else None
        if not isinstance(figures, dict) or "measured_gain_pct" not in figures:
            continue
        pair = tuple(figures.get(k) for k in ("measured_gain_pct", "predicted_gain_pct"))
        if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in pair):
            common.fail(f"{path}: policies.{policy}: measured_gain_pct and predicted_gain_pct must be numbers")
        intervals = []
        for key, value in zip(("measured_gain_ci95", "predicted_gain_ci95"), pair):
            ci = figures.get(key)
            if ci is None:
                intervals.append(None)
            elif (isinstance(ci, list) and len(ci) == 2 and all(isinstance(v, (int, float)) and math.isfinite(v)
                                                                for v in ci) and ci[0] <= ci[1]):
                intervals.append((ci[0], ci[1]))
            else:
                common.fail(f"{path}: policies.{policy}.{key}: expected [low, high], got {json.dumps(ci)}")
        label = policy + (" (per sample)" if figures.get("gain_per_sample") is True else "")  # token_budget's kind
        gains.setdefault(label, (*pair, *intervals))


def model_name(path):
    """The validated model's name, from validation.json's "model" (a file path or a name)."""
    try:
        with open(path, encoding="utf-8") as f:
            model = json.load(f).get("model")
    except (OSError, ValueError, AttributeError):
        return ""
    return os.path.splitext(os.path.basename(model))[0] if isinstance(model, str) else ""


def warmup_spans(points):
    """[(first, last)] step ranges of consecutive warm-up (not steady) steps."""
    spans = []
    for step, *_, steady in points:
        if steady:
            continue
        if spans and spans[-1][1] == step - 1:
            spans[-1][1] = step
        else:
            spans.append([step, step])
    return spans


def steps_figure(plt, policies, all_steps):
    fig, axes = plt.subplots(len(policies), 1, figsize=(8, 1 + 2 * len(policies)), sharex=True, squeeze=False)
    for ax, (policy, points) in zip(axes[:, 0], policies.items()):
        steps = [p[0] for p in points]
        ax.plot(steps, [p[1] for p in points], label="measured", color="C0", linewidth=0.8)
        ax.plot(steps, [p[2] for p in points], label="predicted", color="C1", linewidth=0.8)
        for first, last in warmup_spans(points):
            ax.axvspan(first - 0.5, last + 0.5, color="gray", alpha=0.2, linewidth=0)
        steady = [v for p in points if p[4] for v in p[1:3]]
        if not all_steps and steady and len(steady) < 2 * len(points):
            low, high = min(steady), max(steady)
            ax.set_ylim(low - 0.05 * (high - low), high + 0.15 * (high - low))
        ax.set_title(policy, fontsize=8)
        ax.set_ylabel("max step time (ms)", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    common.legend_outside(axes[0, 0])
    shaded = any(warmup_spans(points) for points in policies.values())
    axes[-1, 0].set_xlabel("step (warm-up shaded)" if shaded else "step", fontsize=8)
    return fig


def scatter_figure(plt, chosen):
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    values = []
    for i, (policy, points) in enumerate(chosen.items()):
        mape = sum(abs(p[3]) for p in points) / len(points)
        ax.scatter([p[1] for p in points], [p[2] for p in points], s=6, alpha=0.5, color=f"C{i}",
                   linewidths=0, label=f"{policy} (MAPE {mape:.1f}%)")
        values += [v for p in points for v in p[1:3]]
    low, high = min(values), max(values)
    ax.plot([low, high], [low, high], color="black", linewidth=0.8, linestyle="--", label="y = x")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_aspect("equal")
    ax.set_xlabel("measured max step time (ms)", fontsize=8)
    ax.set_ylabel("predicted max step time (ms)", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6, loc="upper left", framealpha=0.9)
    return fig


def error_figure(plt, chosen):
    import numpy
    fig, ax = plt.subplots(figsize=(8, 3.5))
    edges = numpy.histogram_bin_edges([p[3] for points in chosen.values() for p in points], bins=40)
    for i, (policy, points) in enumerate(chosen.items()):
        errors = [p[3] for p in points]
        ax.hist(errors, bins=edges, histtype="step", linewidth=1.2, color=f"C{i}",
                label=f"{policy} (mean {sum(errors) / len(errors):+.1f}%)")
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel("per-step error of the prediction (%): predicted / measured - 1", fontsize=8)
    ax.set_ylabel("steps", fontsize=8)
    ax.tick_params(labelsize=8)
    ax.grid(alpha=0.3)
    common.legend_outside(ax)
    return fig


def gains_figure(plt, gains):
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.38
    for offset, (which, k, color) in zip((-width / 2, width / 2), (("measured", 0, "C0"), ("predicted", 1, "C1"))):
        heights = [g[k] for g in gains.values()]
        intervals = [g[2 + k] for g in gains.values()]
        below = [h - ci[0] if ci else 0 for h, ci in zip(heights, intervals)]
        above = [ci[1] - h if ci else 0 for h, ci in zip(heights, intervals)]
        errors = [below, above] if any(intervals) else None
        bars = ax.bar([i + offset for i in range(len(gains))], heights, width, label=which, color=color,
                      yerr=errors, error_kw={"elinewidth": 0.8, "capsize": 2, "ecolor": "black"})
        ax.bar_label(bars, [f"{h:+.1f}" for h in heights], fontsize=7, padding=1, label_type="center",
                     color="white")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(gains)), list(gains), fontsize=7, rotation=15 if len(gains) > 3 else 0)
    has_ci = any(g[2] or g[3] for g in gains.values())
    ax.set_ylabel("gain over the baseline (%)" + ("\nbars: 95% interval" if has_ci else ""), fontsize=8)
    ax.tick_params(axis="y", labelsize=8)
    ax.margins(y=0.15)
    ax.grid(axis="y", alpha=0.3)
    common.legend_outside(ax)
    return fig


def figures(dirs, all_steps=False):
    """{file name: figure} of the validation folders `dirs` (ddpsim.plots.validation draws a result with it)."""
    policies, gains = {}, {}
    model = model_name(os.path.join(dirs[0], "validation.json"))
    for folder in dirs:
        read_steps(os.path.join(folder, "validation.csv"), policies)
        read_gains(os.path.join(folder, "validation.json"), gains, all_steps)
    chosen = {policy: [p for p in points if all_steps or p[4]] for policy, points in policies.items()}
    chosen = {policy: points for policy, points in chosen.items() if points}
    if not chosen:
        common.fail(f"{dirs[0]}/validation.csv: no steady step (try --all-steps)")
    plt = common.pyplot()
    figs = {"steps.png": steps_figure(plt, policies, all_steps),
               "scatter.png": scatter_figure(plt, chosen),
               "error_hist.png": error_figure(plt, chosen)}
    setup = f"model {model}" if model else ""
    common.title(figs["steps.png"], "Max step time, measured and predicted", setup)
    common.title(figs["scatter.png"], "Predicted against measured, per step", setup)
    common.title(figs["error_hist.png"], "Per-step error of the prediction", setup)
    if gains:
        figs["gains.png"] = gains_figure(plt, gains)
        common.title(figs["gains.png"], "Gain over the baseline, measured and predicted", setup)
    else:
        common.note("validation.json has no gains (validate ran without --baseline): gains.png is skipped")
    for fig in figs.values():
        fig.tight_layout()
    return figs


def main():
    parser = common.make_parser(__doc__)
    parser.add_argument("dirs", nargs="+", metavar="DIR", help="a folder written by ddpsim validate --out")
    parser.add_argument("--out", metavar="FOLDER", help="where the figures go (default: DIR)")
    parser.add_argument("--all-steps", action="store_true", help="every step, warm-up included (default: steady state)")
    args = parser.parse_args()
    out = common.output_folder(parser, args.out, args.dirs)

    common.save_figures(out, figures(args.dirs, args.all_steps))


if __name__ == "__main__":
    main()
