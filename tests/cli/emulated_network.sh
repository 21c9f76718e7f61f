# An emulated trace replays on the network ddptrain charged it (its allreduce metadata) unless
# the command gives its own: validate without platform flags gives what the flags gave.
source "$(dirname "$0")/lib.sh"
cd "$SRC" || exit 1
runs=traces/h100/emulated4
args=(--measured $runs/minmax-cost-tokens/steps.csv --baseline $runs/static/steps.csv
      --model models/h100-distilbert-measured.json)
flags=(--set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)
expect_ok "$DDPSIM" validate "${args[@]}"
grep -q "from: the trace's modelled allreduce (ddptrain --emulate-ranks charged a ring at 10 GB/s, 10 µs a step, no overlap" \
  "$WORK/out" || fail "the header does not say the network is the trace's: $(grep 'from:' "$WORK/out")"
sed -n '/^steady state/,$p' "$WORK/out" >"$WORK/taken"
expect_ok "$DDPSIM" validate "${args[@]}" "${flags[@]}"
grep -q "from: the config.s: every figure given" "$WORK/out" || fail "flags given, yet the header names another source: $(grep from: "$WORK/out")"
sed -n '/^steady state/,$p' "$WORK/out" >"$WORK/flagged"
diff "$WORK/taken" "$WORK/flagged" >/dev/null || fail "the trace's network and the same flags give different validations"

# A platform of the user's own wins; the trace still gives the overlap it ran with.
expect_ok "$DDPSIM" validate "${args[@]}" --set platform.link_GBps=50
grep -q '"link_GBps":50' "$WORK/out" || fail "--set platform.link_GBps=50 was not used"
grep -q "charged no overlap" "$WORK/out" || fail "the trace's overlap was not taken beside the user's platform"
expect_ok "$DDPSIM" replay $runs/kk/steps.csv --model models/h100-distilbert-measured.json
grep -q "the trace's modelled allreduce" "$WORK/out" || fail "replay does not take the trace's network"

# A trace that measured its own allreduce keeps the config's network.
expect_ok "$DDPSIM" validate --measured traces/cpu/2ranks/kk/steps.csv --baseline traces/cpu/2ranks/static/steps.csv \
  --model models/cpu-distilbert-small-2ranks.json
grep -q "the trace's modelled allreduce" "$WORK/out" && fail "a measured allreduce was taken as modelled"
finish
