#!/usr/bin/env python3
"""Writes a registered prediction (traces/<gpu>/prereg/prediction.json) from a seeds sweep.

A prediction made before the run it predicts is the only kind that tests the simulator rather
than its fit. The sweep runs the registered config under N seeds (N sample streams and noise
draws, as N real runs of the same length would differ); the prediction is seed 0's figure (the
seed the GPU run uses) with the 2.5-97.5% range over the seeds as its run-to-run interval. The
model's own error (it was fitted on other shapes) is not in that interval: the file says so.

  ddpsim sweep traces/h100/prereg/sweep-seeds.json --out /tmp/seeds
  python3 scripts/register_prediction.py traces/h100/prereg /tmp/seeds/results.csv
"""
import csv
import hashlib
import json
import os
import statistics
import sys


def quantile(xs, q):
    xs = sorted(xs)
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[-1])
    folder, results = sys.argv[1], sys.argv[2]
    config_path = os.path.join(folder, "config.json")
    with open(config_path) as f:
        config = json.load(f)
    model_path = os.path.normpath(os.path.join(folder, config["model"]))
    lengths_path = os.path.normpath(os.path.join(folder, config["data"]["path"]))
    with open(model_path, "rb") as f:
        model_sha = hashlib.sha256(f.read()).hexdigest()
    with open(lengths_path) as f:
        samples = json.load(f)["samples"]
    rows = list(csv.DictReader(open(results)))
    policies = config["policies"]
    predicted = {}
    for policy in policies:
        mine = [r for r in rows if r["policy"] == policy]
        seed0 = next(r for r in mine if r["training.seed"] == "0")
        entry = {}
        for key, name in (("mean_max_step_ms", "mean_ms"), ("p95_max_step_ms", "p95_ms"),
                          ("gain_pct", "gain_pct"), ("p95_gain_pct", "p95_gain_pct")):
            xs = [float(r[key]) for r in mine]
            entry[name] = {"seed0": round(float(seed0[key]), 3),
                           "interval95": [round(quantile(xs, 0.025), 3), round(quantile(xs, 0.975), 3)],
                           "mean_over_seeds": round(statistics.fmean(xs), 3)}
        predicted[policy] = entry
    t = config["training"]
    doc = {
        "what": "registered before the GPU run: DistilBERT-base, one H100, 4 emulated ranks, the policies "
                "trained in turn; the run section is what scripts/validate_gpu.sh's prereg stage runs",
        "config": config,
        "model": {"path": model_path, "sha256": model_sha,
                  "note": "fitted on shapes b <= 48, L <= 66 (the first campaign's profile); beyond them the "
                          "grid grows as its analytic form does, so the prediction is an extrapolation"},
        "interval": f"2.5-97.5% over {len(rows) // len(policies)} seeds ({t['steps']} steps each): run-to-run "
                    "variation of sample streams and noise, not the model's own error",
        "predicted": predicted,
        "run": {
            "lengths": lengths_path, "samples": samples, "global_batch": t["global_batch"],
            "max_length": t["max_length"], "steps": t["steps"], "policies": ",".join(policies),
            "emulate_link_GBps": config["platform"]["link_GBps"], "optimizer_impl": "per-param",
            "profile_batches": "1,4,8,16,24,32,48,64", "profile_lengths": "16,32,64,96,128,192,256",
        },
    }
    with open(os.path.join(folder, "prediction.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
