#!/usr/bin/env python3
"""Writes a long-tailed token-length histogram in the format of `ddpsim lengths`.

The registered GPU prediction (docs: traces/h100/prereg) needs a length distribution whose
tail is long enough that padding, not kernel launches, decides an H100's step time. The counts
are the log-normal's probability mass per integer length, scaled to SAMPLES and rounded; the
mass beyond max_length is truncated onto max_length, as a tokenizer would. No random draw, so
the file is the same on every machine.

  python3 scripts/make_lognormal_lengths.py --median 48 --sigma 0.7 --max-length 256 \
      --samples 20000 --out traces/lognormal-48-0.7-256-lengths.json
"""
import argparse
import json
import math
import sys


def cdf(x, mu, sigma):
    return 0.5 * (1.0 + math.erf((math.log(x) - mu) / (sigma * math.sqrt(2.0))))


def histogram(median, sigma, min_length, max_length, samples):
    mu = math.log(median)
    counts = []
    for length in range(min_length, max_length + 1):
        lo = 0.0 if length == min_length else cdf(length - 0.5, mu, sigma)
        hi = 1.0 if length == max_length else cdf(length + 0.5, mu, sigma)
        n = round(samples * (hi - lo))
        if n > 0:
            counts.append([length, n])
    return counts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--median", type=float, required=True, help="median length in tokens")
    p.add_argument("--sigma", type=float, required=True, help="log-normal shape (std of ln length)")
    p.add_argument("--min-length", type=int, default=3, help="shortest length ([CLS] and [SEP] alone are 2)")
    p.add_argument("--max-length", type=int, required=True, help="truncation length; the tail lands here")
    p.add_argument("--samples", type=int, default=20000)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    if not (0 < a.sigma <= 3 and 2 <= a.min_length <= a.median <= a.max_length and 1 <= a.samples <= 10**8):
        sys.exit("make_lognormal_lengths: need 0 < sigma <= 3, 2 <= min-length <= median <= max-length, "
                 "1 <= samples <= 1e8")
    counts = histogram(a.median, a.sigma, a.min_length, a.max_length, a.samples)
    total = sum(n for _, n in counts)
    doc = {
        "source": f"log-normal, median {a.median:g}, sigma {a.sigma:g}, truncated to "
                  f"[{a.min_length}, {a.max_length}] (scripts/make_lognormal_lengths.py)",
        "tokenizer": "none: lengths in tokens, [CLS]/[SEP] counted",
        "max_length": a.max_length,
        "samples": total,
        "mean_length": round(sum(l * n for l, n in counts) / total, 3),
        "min_length": counts[0][0],
        "max_length_seen": counts[-1][0],
        "counts": counts,
    }
    with open(a.out, "w") as f:
        f.write(json.dumps({k: v for k, v in doc.items() if k != "counts"}, indent=2)[:-2])
        f.write(',\n  "counts": [\n' + ",\n".join(f"    [{l}, {n}]" for l, n in counts) + "\n  ]\n}\n")


if __name__ == "__main__":
    main()
