#!/usr/bin/env python3
"""Scores campaign 4's registered decoder shapes (traces/gpu4/registered/decoder-shapes.json)
against a profile scripts/gpu_decoder.py measured: per (b, L), the spec-derived forward and
backward times beside the measured medians, whether each falls inside its registered interval,
and the share that does (the target: at least 80%). Prints a Markdown table; --json writes the
same figures.

    python3 scripts/score_decoder_shapes.py traces/h100/decoder/smollm-135m-profile.csv \
        --model SmolLM-135M --gpu h100-sxm
"""
import argparse
import csv
import json
import os
import statistics
import sys

REGISTERED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "traces", "gpu4",
                          "registered", "decoder-shapes.json")


def measured(path):
    """Median forward and backward ms per (b, L) of a profile trace."""
    times = {}
    with open(path, encoding="utf-8") as f:
        for n, row in enumerate(csv.DictReader(line for line in f if not line.startswith("#")), start=2):
            try:
                key = (int(row["batch_size"]), int(row["max_len"]))
                times.setdefault(key, ([], []))
                times[key][0].append(float(row["fwd_ms"]))
                times[key][1].append(float(row["bwd_ms"]))
            except (KeyError, ValueError) as e:
                sys.exit(f"{path}: row {n}: expected batch_size, max_len, fwd_ms and bwd_ms ({e})")
    return {k: (statistics.median(f), statistics.median(b)) for k, (f, b) in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile", help="NAME-profile.csv from scripts/gpu_decoder.py")
    p.add_argument("--model", required=True, help="the registered model, e.g. SmolLM-135M")
    p.add_argument("--gpu", required=True, help="the registered GPU preset, e.g. h100-sxm or h200")
    p.add_argument("--registered", default=REGISTERED)
    p.add_argument("--json", help="also write the figures to this file")
    a = p.parse_args()
    with open(a.registered, encoding="utf-8") as f:
        registration = json.load(f)
    found = [x for x in registration["predictions"] if x["model"] == a.model and x["gpu"] == a.gpu]
    if not found:
        choices = sorted({(x["model"], x["gpu"]) for x in registration["predictions"]})
        sys.exit(f"{a.registered}: no prediction for --model {a.model} --gpu {a.gpu} (registered: {choices})")
    times = measured(a.profile)
    rows, inside, scored, missing = [], 0, 0, 0
    print(f"| b | L | fwd spec (ms) | fwd measured | inside | bwd spec (ms) | bwd measured | inside |\n"
          f"| --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in found[0]["shapes"]:
        key = (s["b"], s["L"])
        if key not in times:
            print(f"| {s['b']} | {s['L']} | {s['fwd_ms']:.3f} | not measured | | {s['bwd_ms']:.3f} | not measured | |")
            missing += 1
            continue
        fwd, bwd = times[key]
        ok = [lo <= t <= hi for t, (lo, hi) in ((fwd, s["fwd_ms_interval"]), (bwd, s["bwd_ms_interval"]))]
        inside += sum(ok)
        scored += 2
        rows.append({"b": s["b"], "L": s["L"], "fwd_spec_ms": s["fwd_ms"], "fwd_ms": fwd, "fwd_inside": ok[0],
                     "bwd_spec_ms": s["bwd_ms"], "bwd_ms": bwd, "bwd_inside": ok[1]})
        print(f"| {s['b']} | {s['L']} | {s['fwd_ms']:.3f} | {fwd:.3f} | {'yes' if ok[0] else 'no'} "
              f"| {s['bwd_ms']:.3f} | {bwd:.3f} | {'yes' if ok[1] else 'no'} |")
    share = inside / scored if scored else 0.0
    print(f"\n{inside} of {scored} shape-phases inside their registered intervals ({100 * share:.0f}%; target ≥ 80%)"
          + (f"; {missing} registered shapes not in the profile" if missing else ""))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"model": a.model, "gpu": a.gpu, "inside": inside, "scored": scored, "missing": missing,
                       "shapes": rows}, f,
                      indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
