# Golden outputs: the simulator's predictions for two fixed, seeded runs, checked in, so that
# any change in what ddpsim predicts shows as a diff. After an intended change, regenerate
# with the commands below and explain the new figures in the commit.
source "$(dirname "$0")/lib.sh"
check() {  # check GOLDEN ARGS...
  local golden=$SRC/tests/golden/$1; shift
  expect_ok "$DDPSIM" compare "$@"
  diff <(grep -v '^simulated' "$WORK/out") "$golden" >"$WORK/diff" ||
    fail "ddpsim compare $* differs from $golden: $(cat "$WORK/diff")"
}
check compare_study_50_steps.txt --steps 50 --policies static,minmax,minmax:cost=model,sorted
check compare_cluster16_full_20_steps.txt --steps 20 --policies static,minmax --set simulation.mode=full \
  --set platform.topology=cluster --set training.world_size=16 --set training.global_batch=192 \
  --set simulation.algorithm=hierarchical --set model=h100-distilbert
finish
