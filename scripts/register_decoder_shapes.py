#!/usr/bin/env python3
"""Registers, before any run, what the spec derivation predicts for the fourth GPU campaign's
decoders: SmolLM-135M and Llama-3.2-1B (models/hf/), bf16 with fused attention (PyTorch's SDPA
on a GPU), on each GPU the campaign may be lent (an H100 SXM or an H200), forward and backward
at 14 (b, L) shapes of 256 to 8,192 tokens a rank-step. Each time carries the interval the
spec's own uncertainty terms give it (eval/uncertainty.cpp): the efficiency ×1.5 either way,
and a launch floor of 0.03 ms (forward) and 0.06 ms (backward) per parameter tensor, which a
spec has none of: [t / 1.5, max(1.5 t, floor)]. Writes FOLDER/specs/*.json (the spec files,
for ddpsim) and FOLDER/decoder-shapes.json; refuses to overwrite a registration.

    PYTHONPATH=build/release/python python3 scripts/register_decoder_shapes.py traces/gpu4/registered
"""

import argparse
import datetime
import json
import os
import subprocess
import sys

import ddpsim

DECODERS = {"smollm-135m": "SmolLM-135M", "llama-3.2-1b": "Llama-3.2-1B"}
GPUS = ("h100-sxm", "h200")
SHAPES = [(1, 256), (2, 256), (1, 512), (4, 256), (2, 1024), (8, 256), (1, 2048), (4, 1024), (2, 2048),
          (1, 4096), (8, 1024), (2, 4096), (4, 2048), (1, 8192)]
EFFICIENCY_RANGE, FLOOR_MS = 1.5, (0.03, 0.06)  # as eval/uncertainty.cpp states them


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", help="where the registration goes (e.g. traces/gpu4/registered)")
    folder = parser.parse_args().folder
    target = os.path.join(folder, "decoder-shapes.json")
    if os.path.exists(target):
        sys.exit(f"{target}: a registration is never rewritten once its runs may have been made")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    specs = os.path.join(folder, "specs")
    os.makedirs(specs, exist_ok=True)
    predictions = []
    for name, title in DECODERS.items():
        for gpu in GPUS:
            spec_path = os.path.join(specs, f"{name}-{gpu}.json")
            config = os.path.relpath(os.path.join(root, "models", "hf", name + ".json"), specs)
            with open(spec_path, "w") as f:
                json.dump({"hf_config": config, "gpu": gpu, "dtype": "bf16", "fused_attention": True,
                           "name": f"{name}-{gpu}"}, f, indent=2)
                f.write("\n")
            model = ddpsim._core.model_times(spec_path, SHAPES)
            rows = []
            for (b, L), (fwd, bwd) in zip(SHAPES, model["times"]):
                row = {"b": b, "L": L, "tokens": b * L}
                for phase, t, floor in (("fwd", fwd, FLOOR_MS[0]), ("bwd", bwd, FLOOR_MS[1])):
                    row[f"{phase}_ms"] = t
                    row[f"{phase}_ms_interval"] = [t / EFFICIENCY_RANGE,
                                                   max(t * EFFICIENCY_RANGE, floor * model["tensors"])]
                rows.append(row)
            predictions.append({"model": title, "hf_config": os.path.relpath(os.path.join(root, "models", "hf",
                                                                                          name + ".json"), folder),
                                "gpu": gpu, "spec": os.path.relpath(spec_path, folder), "source": model["source"],
                                "tensors": model["tensors"], "shapes": rows})
    commit = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"registered": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "ddpsim": ddpsim.__version__, "commit": commit,
           "what": "spec-derived forward and backward time per (b, L), bf16, fused attention, registered before "
                   "any run of these decoders; interval [t/1.5, max(1.5 t, floor per tensor × tensors)]",
           "target": "inside its interval for at least 80% of shapes (issue 46)",
           "predictions": predictions}
    with open(target + ".tmp", "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    os.replace(target + ".tmp", target)
    print(f"wrote {target}: {len(predictions)} models × {len(SHAPES)} shapes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
