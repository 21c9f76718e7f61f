# `ddpsim bench --quick --json` runs every case (under a sanitizer, every part but the sweep) and prints
# the documented JSON shape.
source "$(dirname "$0")/lib.sh"
# Sanitized, the sweep part (1,100 forked cells: 46 of the test's 64 s) is left to cli_sweep, which
# runs the same sweep code under the sanitizer; the other parts are checked one at a time.
if [[ -n ${DDPSIM_TEST_SANITIZED:-} ]]; then
  : >"$WORK/all"
  for part in sched sim validate; do
    expect_ok "$DDPSIM" bench --quick --json --only "$part"
    cat "$WORK/out" >>"$WORK/all"
  done
  mv "$WORK/all" "$WORK/out"
else
  expect_ok "$DDPSIM" bench --quick --json
  grep -q '"sweep"' "$WORK/out" || fail "bench JSON lacks its sweep part"
fi
for key in '"sched"' '"policy"' '"solver"' '"G"' '"B"' '"K"' '"mean_us"' '"p95_us"' '"target_us"'; do
  grep -q "$key" "$WORK/out" || fail "bench JSON lacks $key"
done
grep -q '"enumerate"' "$WORK/out" || fail "bench JSON lacks the enumeration reference"
[[ $(grep -c '"G": 1024' "$WORK/out") -ge 5 ]] || fail "bench JSON lacks the G=1024 cases"
for key in '"sim"' '"config"' '"mode"' '"wall_s"' '"cpu_s"' '"peak_rss_mib"' '"rank_steps_per_s"' '"full"' '"fast"'; do
  grep -q "$key" "$WORK/out" || fail "bench JSON lacks $key in its simulator part"
done
for key in '"validate"' '"rows"' '"steps"'; do
  grep -q "$key" "$WORK/out" || fail "bench JSON lacks $key in its validation part"
done
finish
