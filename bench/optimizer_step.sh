#!/usr/bin/env bash
# How long ddptrain's AdamW step takes per implementation on this machine's CPU: the median of
# the trace's opt_ms column (the step, zero_grad and the copy out of DDP's buckets, as training
# times it) over one short run each, and the ratio per-param / foreach. The batch is one short
# sample, because the optimizer's time does not depend on it and the forward passes would only
# lengthen the run. Usage: bench/optimizer_step.sh [DDPTRAIN [MODEL [STEPS]]]
set -euo pipefail
ddptrain=${1:-build/release/ddptrain}
model=${2:-base}
steps=${3:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
median_opt_ms() {  # steps 0 and 1 left out: they allocate the moments and warm the allocator
  local column
  column=$(grep -v '^#' "$1" | head -1 | tr , '\n' | grep -nx opt_ms | cut -d: -f1)
  grep -v '^#' "$1" | awk -F, -v c="$column" 'NR > 3 { print $c }' | sort -g |
    awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
declare -A ms
for impl in per-param foreach; do
  "$ddptrain" --synthetic-lengths sst2 --model "$model" --global-batch 1 --max-length 32 --steps "$steps" \
    --device cpu --optimizer-impl "$impl" --log-every 100000 --out "$work/$impl" >/dev/null
  ms[$impl]=$(median_opt_ms "$work/$impl/steps.csv")
  echo "$impl: median optimizer step ${ms[$impl]} ms over steps 2..$((steps - 1)) (DistilBERT-$model)"
done
threads=$(grep -m1 '^# threads=' "$work/foreach/steps.csv" | cut -d= -f2)
awk -v a="${ms[per-param]}" -v b="${ms[foreach]}" -v t="$threads" \
  'BEGIN { printf "per-param / foreach: %.2fx (%s intra-op threads)\n", a / b, t }'
