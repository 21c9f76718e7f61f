"""ddpsim.compare() from Python against the binary on the embedded default config (800 steps,
the default policies): each timed whole, files written, in turns, median of the repetitions.

    PYTHONPATH=build/release/python python3 bench/python_compare.py [--binary build/release/ddpsim] [--reps 5]
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import ddpsim


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join("build", "release", "ddpsim"))
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args()
    times = {"binary": [], "python": []}
    for _ in range(options.reps):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            subprocess.run([options.binary, "compare", "--out", out], check=True, stdout=subprocess.DEVNULL)
            times["binary"].append(time.perf_counter() - start)
        start = time.perf_counter()
        ddpsim.compare(progress=False)
        times["python"].append(time.perf_counter() - start)
    binary, python = (statistics.median(times[k]) for k in ("binary", "python"))
    print(f"ddpsim compare (default config), median of {options.reps}: binary {binary:.3f} s, "
          f"ddpsim.compare() {python:.3f} s, ratio {python / binary:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
