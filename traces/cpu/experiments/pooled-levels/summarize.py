"""The pooled-levels experiment's figures from its CSVs (run.sh calls it; README.md quotes it)."""
import csv
import math
import os
import statistics

here = os.path.dirname(os.path.abspath(__file__))
rows = list(csv.DictReader(open(os.path.join(here, "results.csv"))))
spreads = {r["model"]: r for r in csv.DictReader(open(os.path.join(here, "spreads.csv")))}
repeats = list(csv.DictReader(open(os.path.join(here, "repeats.csv"))))


def figures(variant, campaigns=None):
    r = [x for x in rows if x["levels"] == variant and (campaigns is None or x["campaign"] in campaigns)]
    width = [float(x["pi_high"]) - float(x["pi_low"]) for x in r]
    told = sum(1 for x in r if float(x["pi_low"]) > 0 or float(x["pi_high"]) < 0)
    inside = sum(x["inside"] == "yes" for x in r)
    return (f"{len(r)} gains, {inside} inside, width median {statistics.median(width):.1f} pp, "
            f"mean {statistics.mean(width):.1f}, widest {max(width):.1f}; {told} told from no gain")


# The gains whose interval pooling moved: their model pooled an earlier one.
alone = {(x["campaign"], x["runs"], x["policy"]): x for x in rows if x["levels"] == "alone"}
changed = {x["campaign"] for x in rows if x["levels"] == "pooled"
           and (x["pi_low"], x["pi_high"]) != (alone[x["campaign"], x["runs"], x["policy"]]["pi_low"],
                                               alone[x["campaign"], x["runs"], x["policy"]]["pi_high"])}
held_out = {x["campaign"] for x in rows} - {"prereg22"}
for name, campaigns in (("prereg4-21", held_out), ("moved by pooling", held_out & changed), ("prereg22", {"prereg22"})):
    for variant in ("alone", "pooled"):
        print(f"{name}, {variant}: {figures(variant, campaigns)}")
two_ranks = [s for s in spreads.values() if s["machine"] == "CPU: AMD EPYC, two ranks of one core each"]
for key in ("alone_pct", "pooled_pct"):
    v = [float(s[key]) for s in two_ranks if s["pooled_df"]]
    print(f"AMD two-rank models that pooled ({len(v)}), {key}: {min(v):.1f}-{max(v):.1f}%, median {statistics.median(v):.1f}%")
logs = [math.log(float(r["mean_ratio"])) for r in repeats]
rms = math.sqrt(sum(x * x for x in logs) / len(logs))
print(f"repeated runs of one setting ({len(logs)} pairs): ratios {min(map(float, (r['mean_ratio'] for r in repeats))):.3f}-"
      f"{max(map(float, (r['mean_ratio'] for r in repeats))):.3f}, 95% half-width 1.96 x RMS of logs = {100 * math.expm1(1.96 * rms):.1f}%")
