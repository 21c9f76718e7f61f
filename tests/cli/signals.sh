# A signal during a run ends it with one message and the signal's status, and leaves no output.
source "$(dirname "$0")/lib.sh"
out="$WORK/new/out_dir"
timeout --preserve-status -s INT 2 "$DDPSIM" run --set simulation.mode=full --steps 200000 --out "$out" \
  >/dev/null 2>"$WORK/err"
status=$?
[[ $status == 130 ]] || fail "SIGINT during a run: exit $status, expected 130; stderr: $(cat "$WORK/err")"
# steps.csv is streamed while the steps are simulated: its temporary goes, and the message says so.
grep -q "^ddpsim run: stopped by SIGINT (interrupted); its unfinished output files were removed" "$WORK/err" ||
  fail "no message on SIGINT: $(cat "$WORK/err")"
[[ $(wc -l <"$WORK/err") == 1 ]] || fail "the SIGINT message is not one line: $(cat "$WORK/err")"
[[ ! -e $WORK/new ]] || fail "output or its new folders left behind after SIGINT: $(find "$WORK/new")"
# Again once the simulation is over and the files are being written (SimGrid's own SIGINT
# handler must not be the one left in place).
for delay in 3 6; do
  timeout --preserve-status -s INT $delay "$DDPSIM" run --steps 30000 --out "$out" --timeline "$WORK/tl.json" \
    --timeline-steps 0:2000 >/dev/null 2>"$WORK/err"
  status=$?
  [[ $status == 130 || $status == 0 ]] || fail "SIGINT after ${delay}s: exit $status; stderr: $(cat "$WORK/err")"
  [[ $status == 0 ]] || grep -q "^ddpsim run: stopped by SIGINT" "$WORK/err" || fail "no message: $(cat "$WORK/err")"
  [[ -z $(find "$out" "$WORK" -name '*.tmp.*' 2>/dev/null) ]] || fail "temporaries left after SIGINT at ${delay}s"
done
finish
