# A signal during a run ends it with one message and the signal's status, and leaves no output.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
timeout --preserve-status -s INT 2 "$DDPSIM" run --set simulation.mode=full --steps 200000 --out "$out" \
  >/dev/null 2>"$WORK/err"
status=$?
[[ $status == 130 ]] || fail "SIGINT during a run: exit $status, expected 130; stderr: $(cat "$WORK/err")"
grep -q "ddpsim run: stopped by SIGINT (interrupted); no output of this run was written" "$WORK/err" ||
  fail "no message on SIGINT: $(cat "$WORK/err")"
[[ -z $(ls -A "$out" 2>/dev/null) ]] || fail "output left behind after SIGINT: $(ls -A "$out")"
finish
