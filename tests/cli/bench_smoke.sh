# `ddpsim bench --quick --json` runs every case and prints the documented JSON shape.
source "$(dirname "$0")/lib.sh"
expect_ok "$DDPSIM" bench --quick --json
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
