# plots/: each figure script draws what its --help promises from real outputs (a simulated run,
# a measured ddptrain trace, a sweep's results.csv, a validation) as PNGs of the documented
# pixel size, the same bytes when drawn again; bad input is one line naming the file, line or
# column, exit 1 (2 for usage), and nothing written.
source "$(dirname "$0")/lib.sh"
# Debian's matplotlib belongs to /usr/bin/python3, which another python3 on PATH may hide.
PY=${PYTHON:-python3}
"$PY" -c 'import matplotlib' 2>/dev/null || PY=/usr/bin/python3
"$PY" -c 'import matplotlib' 2>/dev/null || { echo "no matplotlib (apt-get install python3-matplotlib): skip"; exit 77; }
export MPLBACKEND=Agg
plots=$SRC/plots

# expect_png FILE WIDTHxHEIGHT: FILE is a PNG of that size (read from its IHDR chunk).
expect_png() {
  local size
  size=$("$PY" - "$1" 2>/dev/null <<'EOF'
import struct, sys
head = open(sys.argv[1], "rb").read(24)
if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
    print("%dx%d" % struct.unpack(">II", head[16:24]))
EOF
  )
  [[ $size == "$2" ]] || fail "$1: expected a $2 PNG, found ${size:-no PNG}"
}

# expect_wrote N: the last command printed N "wrote PATH" lines.
expect_wrote() {
  [[ $(grep -c '^wrote ' "$WORK/out") == "$1" ]] || fail "expected $1 figures written, got: $(cat "$WORK/out")"
}

# A simulated run: every figure, both panels of std.png, no note; drawn again, the same bytes.
expect_ok "$DDPSIM" run --steps 30 --policies static,minmax --out "$WORK/run"
expect_ok "$PY" "$plots/run.py" "$WORK/run"
expect_wrote 4
for f in step_time step_time_cdf padded_tokens_std; do expect_png "$WORK/run/$f.png" 800x350; done
expect_png "$WORK/run/std.png" 800x500
[[ -s $WORK/err ]] && fail "run.py noted something about a complete simulated trace: $(cat "$WORK/err")"
expect_ok "$PY" "$plots/run.py" "$WORK/run/steps.csv" --out "$WORK/again/figures"
for f in step_time step_time_cdf padded_tokens_std std; do
  cmp -s "$WORK/run/$f.png" "$WORK/again/figures/$f.png" || fail "$f.png differs when drawn again"
done

# Measured CPU traces, one ddptrain run per policy, drawn together: no peak memory there.
expect_ok "$PY" "$plots/run.py" "$SRC/traces/cpu/2ranks/static" "$SRC/traces/cpu/2ranks/sorted" \
  --out "$WORK/real" --smooth 10
expect_wrote 4
expect_png "$WORK/real/step_time.png" 800x350
expect_png "$WORK/real/std.png" 800x350
grep -q "peak_mem_mib is empty in every row" "$WORK/err" || fail "no note on the unmeasured peak memory: $(cat "$WORK/err")"

# A sweep's results.csv (the hand-written fixture follows the format exactly).
fixture=$SRC/tests/plots/results.csv
expect_ok "$PY" "$plots/sweep.py" "$fixture" --out "$WORK/sweep" heatmap --x training.world_size \
  --y training.global_batch --facet platform.topology --gain minmax
expect_png "$WORK/sweep/heatmap-gain_pct-minmax.png" 600x350
expect_ok "$PY" "$plots/sweep.py" "$fixture" heatmap --x global_batch --y topology --facet world_size \
  --metric p95_max_step_ms --policy kk --out "$WORK/sweep" --name kk.png
expect_png "$WORK/sweep/kk.png" 840x350
expect_ok "$PY" "$plots/sweep.py" "$fixture" --out "$WORK/sweep" lines --x world_size \
  --where global_batch=32 --where topology=pcie --logx
expect_png "$WORK/sweep/lines-mean_max_step_ms-training.world_size.png" 800x350
# plots/balance.py on a `ddpsim balance` run: max and std of padded tokens per step.
"$DDPSIM" balance --steps 30 --policies static,minmax --out "$WORK/bal" >/dev/null 2>"$WORK/err" ||
  fail "ddpsim balance failed: $(cat "$WORK/err")"
expect_ok "$PY" "$plots/balance.py" "$WORK/bal"
expect_png "$WORK/bal/balance.png" 1000x700
expect_ok "$PY" "$plots/balance.py" "$WORK/bal/steps.csv" --policies minmax --out "$WORK/bal/fig/b.png"
expect_png "$WORK/bal/fig/b.png" 1000x700
expect_exit 1 "no rows for policy kk \(have: static, minmax\)" "$PY" "$plots/balance.py" "$WORK/bal" --policies kk \
  --out "$WORK/bal/none.png"
[[ ! -e $WORK/bal/none.png ]] || fail "balance.py wrote a figure after an error"
# plots/links.py on a pipeline run's link series: a panel per policy, the same bytes again.
"$DDPSIM" run --steps 3 --policies static,kk --set training.world_size=4 --set training.global_batch=32 \
  --set 'parallel={"stages": 2, "micro_batches": 4, "channels": {"model": "shared"}}' \
  --link-series "$WORK/links/links.csv" >/dev/null 2>"$WORK/err" || fail "ddpsim run --link-series failed: $(cat "$WORK/err")"
expect_ok "$PY" "$plots/links.py" "$WORK/links/links.csv"
expect_png "$WORK/links/links.png" 1000x500
expect_ok "$PY" "$plots/links.py" "$WORK/links/links.csv" --policies kk --out "$WORK/links/again/kk.png"
expect_png "$WORK/links/again/kk.png" 1000x350
expect_ok "$PY" "$plots/links.py" "$WORK/links/links.csv" --out "$WORK/links/again/links.png"
cmp -s "$WORK/links/links.png" "$WORK/links/again/links.png" || fail "links.png differs when drawn again"
sed -E '2s/^static,0,[^,]*,/static,0,0,/' "$WORK/links/links.csv" >"$WORK/links/empty_bin.csv"
expect_exit 1 "empty_bin.csv:2: column end_ms: 0 is not after start_ms 0" "$PY" "$plots/links.py" \
  "$WORK/links/empty_bin.csv" --out "$WORK/links/none.png"
cut -d, -f1-4 "$WORK/links/links.csv" >"$WORK/links/cut.csv"
expect_exit 1 "cut.csv:1: missing column\(s\) bwd_prop, grad_sync" "$PY" "$plots/links.py" "$WORK/links/cut.csv" \
  --out "$WORK/links/none.png"
expect_exit 2 "--out $WORK/links/links.csv: expected a .png file name" "$PY" "$plots/links.py" "$WORK/links/links.csv" \
  --out "$WORK/links/links.csv"
mkfifo "$WORK/links/fifo"
expect_exit 1 "fifo: not a regular file" "$PY" "$plots/links.py" "$WORK/links/fifo" --out "$WORK/links/none.png"
[[ ! -e $WORK/links/none.png ]] || fail "links.py wrote a figure after an error"
# A real sweep's results.csv: a heatmap over G x B with a facet, and lines.
cat >"$WORK/sweep.json" <<'EOF'
{"set": {"training.steps": 20}, "policies": ["static", "minmax", "kk"],
 "axes": {"training.world_size": [2, 4], "training.global_batch": [16, 32], "simulation.algorithm": ["ring", "tree"]}}
EOF
"$DDPSIM" sweep "$WORK/sweep.json" --out "$WORK/real_sweep" --jobs 2 >/dev/null 2>"$WORK/err" ||
  fail "ddpsim sweep failed: $(cat "$WORK/err")"
expect_ok "$PY" "$plots/sweep.py" "$WORK/real_sweep/results.csv" heatmap --x world_size --y global_batch \
  --facet algorithm --gain minmax
expect_png "$WORK/real_sweep/heatmap-gain_pct-minmax.png" 600x350
expect_ok "$PY" "$plots/sweep.py" "$WORK/real_sweep/results.csv" lines --x world_size --where global_batch=32 \
  --where algorithm=tree --metric p95_max_step_ms
expect_png "$WORK/real_sweep/lines-p95_max_step_ms-training.world_size.png" 800x350
# Replicates: a seed axis drawn as the mean with its 2.5-97.5% range as error bars.
cat >"$WORK/seeds.json" <<'EOF'
{"set": {"training.steps": 20}, "policies": ["static", "minmax"],
 "axes": {"training.global_batch": [16, 32], "training.seed": [0, 1, 2, 3]}}
EOF
"$DDPSIM" sweep "$WORK/seeds.json" --out "$WORK/seeds" --jobs 2 >/dev/null 2>"$WORK/err" ||
  fail "ddpsim sweep failed: $(cat "$WORK/err")"
expect_ok "$PY" "$plots/sweep.py" "$WORK/seeds/results.csv" lines --x global_batch --metric gain_pct --over seed
expect_png "$WORK/seeds/lines-gain_pct-training.global_batch.png" 800x350
expect_exit 1 "several rows per" "$PY" "$plots/sweep.py" "$WORK/seeds/results.csv" lines --x global_batch
# A line per value of a swept key, for one policy.
expect_ok "$PY" "$plots/sweep.py" "$WORK/seeds/results.csv" lines --x seed --metric mean_max_step_ms --policies minmax \
  --by global_batch
expect_png "$WORK/seeds/lines-mean_max_step_ms-training.seed-by-training.global_batch.png" 800x350
expect_exit 1 "--by training.global_batch draws a line per value of training.global_batch for one policy" \
  "$PY" "$plots/sweep.py" "$WORK/seeds/results.csv" lines --x seed --by global_batch
expect_exit 1 "--by training.global_batch is also --x" "$PY" "$plots/sweep.py" "$WORK/seeds/results.csv" lines \
  --x global_batch --by global_batch --policies minmax --over seed
expect_exit 1 "--over training.seed is also --x" "$PY" "$plots/sweep.py" "$WORK/seeds/results.csv" lines --x seed \
  --over seed
# A swept list (quoted, as RFC 4180 says) is a categorical axis.
cat >"$WORK/lists.csv" <<'EOF'
cell,simulation.rank_speed,policy,mean_max_step_ms,gain_pct
0123456789abcdef,"[1,1,1,1]",static,118.2,0
0123456789abcdef,"[1,1,1,1]",minmax,112.4,4.906937394
fedcba9876543210,"[1,1,1,1.3]",static,150.1,0
fedcba9876543210,"[1,1,1,1.3]",minmax,141,6.062624917
EOF
expect_ok "$PY" "$plots/sweep.py" "$WORK/lists.csv" lines --x rank_speed --metric gain_pct
expect_png "$WORK/lines-gain_pct-simulation.rank_speed.png" 800x350

# Validation of a committed measured trace against its model, as scripts/validate_cpu.sh ran it.
emulated=(--model "$SRC/models/cpu-distilbert-small-1core.json" --set platform.link_GBps=10
          --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)
expect_ok "$DDPSIM" validate --measured "$SRC/traces/cpu/emulated4/minmax-cost-tokens/steps.csv" \
  --baseline "$SRC/traces/cpu/emulated4/static/steps.csv" "${emulated[@]}" --out "$WORK/val"
expect_ok "$PY" "$plots/validation.py" "$WORK/val"
expect_wrote 4
expect_png "$WORK/val/steps.png" 800x500
expect_png "$WORK/val/scatter.png" 450x450
expect_png "$WORK/val/error_hist.png" 800x350
expect_png "$WORK/val/gains.png" 800x350
# Without --baseline there are no gains to draw.
expect_ok "$DDPSIM" validate --measured "$SRC/traces/cpu/emulated4/kk/steps.csv" "${emulated[@]}" --out "$WORK/val-kk"
expect_ok "$PY" "$plots/validation.py" "$WORK/val-kk"
expect_wrote 3
[[ -e $WORK/val-kk/gains.png ]] && fail "gains.png drawn without gains"
grep -q "no gains" "$WORK/err" || fail "no note on the missing gains: $(cat "$WORK/err")"
# The committed validations, one per policy against one baseline, read once: six policies.
expect_ok "$PY" "$plots/validation.py" "$SRC"/traces/cpu/validation/2ranks/*/ --out "$WORK/val-2ranks" --all-steps
expect_png "$WORK/val-2ranks/steps.png" 800x1300
expect_png "$WORK/val-2ranks/gains.png" 800x350

# Bad input and usage.
out=$WORK/bad
bad() {  # bad CODE PATTERN SCRIPT ARGS...: one line matching PATTERN, exit CODE, nothing written
  local code=$1 pattern=$2 script=$3; shift 3
  expect_exit "$code" "$pattern" "$PY" "$plots/$script" "$@"
  [[ -e $out ]] && { fail "$script $*: left $out behind"; rm -rf "$out"; }
}
# edit_csv IN OUT COLUMN [LINE VALUE]: IN without COLUMN, or with COLUMN on file line LINE set to VALUE.
edit_csv() {
  awk -F, -v OFS=, -v col="$3" -v at="${4:-0}" -v value="${5-}" '
    /^#/ { print; next }
    !c { for (i = 1; i <= NF; i++) if ($i == col) c = i }
    at == 0 { s = ""; for (i = 1; i <= NF; i++) if (i != c) s = s (s == "" ? "" : OFS) $i; print s; next }
    NR == at { $c = value }
    { print }' "$1" >"$2"
}
steps=$WORK/run/steps.csv
header=$(grep -n -m1 -v '^#' "$steps" | cut -d: -f1)
edit_csv "$steps" "$WORK/no_step_ms.csv" step_ms
edit_csv "$steps" "$WORK/word.csv" step_ms $((header + 5)) fast
head -n "$header" "$steps" >"$WORK/header_only.csv"
bad 1 "$WORK/nowhere: No such file" run.py "$WORK/nowhere" --out "$out"
bad 1 "no_step_ms.csv:$header: missing column\(s\) step_ms" run.py "$WORK/no_step_ms.csv" --out "$out"
bad 1 "word.csv:$((header + 5)): column step_ms: 'fast' is not a number" run.py "$WORK/word.csv" --out "$out"
bad 1 "header_only.csv: no data rows" run.py "$WORK/header_only.csv" --out "$out"
bad 1 "no rows for policy kk \(policies: static, minmax\)" run.py "$steps" --policies static,kk --out "$out"
bad 2 "--out FOLDER is required" run.py "$steps" "$WORK/val-kk/validation.csv"
bad 2 "run.py: the following arguments are required: DIR_OR_STEPS_CSV" run.py

mkdir -p "$WORK/r"
edit_csv "$fixture" "$WORK/r/results.csv" mean_max_step_ms 2 n/a
sed '1s/,policy,/,variant,/' "$fixture" >"$WORK/r/no_policy.csv"
bad 1 "results.csv: no column 'bogus' \(metrics: steps, mean_max_step_ms" sweep.py "$fixture" --out "$out" lines --x world_size --metric bogus
bad 1 "results.csv: no swept key 'gpus' \(swept: training.world_size, training.global_batch, platform.topology\)" \
  sweep.py "$fixture" --out "$out" heatmap --x gpus --y global_batch
bad 1 "--where: training.global_batch=32.64; platform.topology=pcie.nvlink" sweep.py "$fixture" --out "$out" lines --x world_size
bad 1 "no row with platform.topology=infiniband \(platform.topology: pcie, nvlink\)" \
  sweep.py "$fixture" --out "$out" heatmap --x world_size --y global_batch --where topology=infiniband
bad 1 "results.csv:2: column mean_max_step_ms: 'n/a' is not a number" \
  sweep.py "$WORK/r/results.csv" --out "$out" lines --x world_size --where global_batch=32 --where topology=pcie
bad 1 "no_policy.csv:1: missing column\(s\) policy" sweep.py "$WORK/r/no_policy.csv" --out "$out" lines --x world_size
bad 1 "$WORK/r/none.csv: No such file" sweep.py "$WORK/r/none.csv" --out "$out" lines --x world_size
bad 2 "--where topology: expected KEY=VALUE" sweep.py "$fixture" --out "$out" lines --x world_size --where topology
bad 2 "--gain POLICY" sweep.py "$fixture" --out "$out" heatmap --x world_size --y global_batch --gain kk --metric steps
bad 2 "invalid choice" sweep.py "$fixture" --out "$out" bars --x world_size

cp -r "$WORK/val" "$WORK/broken"
head -c 200 "$WORK/val/validation.json" >"$WORK/broken/validation.json"
bad 1 "broken/validation.json:[0-9]+:[0-9]+: " validation.py "$WORK/broken" --out "$out"
edit_csv "$WORK/val/validation.csv" "$WORK/broken/validation.csv" steady
bad 1 "broken/validation.csv:1: missing column\(s\) steady" validation.py "$WORK/broken" --out "$out"
bad 1 "$WORK/nowhere/validation.csv: No such file" validation.py "$WORK/nowhere" --out "$out"
touch "$out"
expect_exit 1 "$out: not a folder" "$PY" "$plots/validation.py" "$WORK/val" --out "$out"
[[ -s $out ]] && fail "a figure was written over the file $out"

leftovers=$(find "$WORK" -name '*.tmp.*')
[[ -z $leftovers ]] || fail "temporaries left behind: $leftovers"

# A python3 that cannot import matplotlib (here Debian's without its site packages) is told both
# ways to get it, and nothing is drawn.
if [[ -x /usr/bin/python3 ]]; then
  expect_exit 1 "apt-get install python3-matplotlib.*pip install matplotlib" \
    /usr/bin/python3 -S "$plots/run.py" "$WORK/run" --out "$WORK/nompl"
  [[ ! -e $WORK/nompl ]] || fail "a failed figure script left $WORK/nompl"
fi
finish
