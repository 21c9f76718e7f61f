"""The simulator from Python against the binary, each timed whole with its files written, in
turns, median of the repetitions: ddpsim.compare() of the embedded default config (800 steps,
the default policies), and ddpsim.sweep() of a 100-cell grid with 2 workers.

    PYTHONPATH=build/release/python python3 bench/python_simulator.py [--binary build/release/ddpsim] [--reps 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import ddpsim

# 100 cells: 4 world sizes × 25 seeds, B = 64, 200 steps, two policies.
SWEEP = {"set": {"training.steps": 200, "training.global_batch": 64}, "policies": ["static", "minmax"],
         "axes": {"training.world_size": [2, 4, 8, 16], "training.seed": list(range(25))}}


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=os.path.join("build", "release", "ddpsim"))
    parser.add_argument("--reps", type=int, default=5)
    options = parser.parse_args()
    times = {k: [] for k in ("binary compare", "python compare", "binary sweep", "python sweep")}
    for _ in range(options.reps):
        with tempfile.TemporaryDirectory() as out:
            spec = os.path.join(out, "sweep.json")
            with open(spec, "w") as f:
                json.dump(SWEEP, f)
            quiet = {"check": True, "stdout": subprocess.DEVNULL}
            times["binary compare"].append(timed(lambda: subprocess.run(
                [options.binary, "compare", "--out", os.path.join(out, "c")], **quiet)))
            times["python compare"].append(timed(lambda: ddpsim.compare(progress=False)))
            times["binary sweep"].append(timed(lambda: subprocess.run(
                [options.binary, "sweep", spec, "--jobs", "2", "--out", os.path.join(out, "s")], **quiet)))
            times["python sweep"].append(timed(lambda: ddpsim.sweep(SWEEP, jobs=2, progress=False)))
    m = {k: statistics.median(v) for k, v in times.items()}
    print(f"median of {options.reps}:")
    for what in ("compare", "sweep"):
        print(f"  {what:8s} binary {m['binary ' + what]:.3f} s, Python {m['python ' + what]:.3f} s, "
              f"ratio {m['python ' + what] / m['binary ' + what]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
