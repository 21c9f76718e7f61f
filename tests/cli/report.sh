# plots/report.py turns a run, a sweep and a validation folder each into one HTML page that
# loads nothing from outside; a real headless browser (Debian's chromium) shows every figure
# on it, and its screenshot is not blank. Skips without matplotlib or chromium.
source "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
"$PY" -c 'import matplotlib' 2>/dev/null || PY=/usr/bin/python3
"$PY" -c 'import matplotlib' 2>/dev/null || { echo "no matplotlib (apt-get install python3-matplotlib): skip"; exit 77; }
CHROMIUM=$(command -v chromium || command -v chromium-browser) || { echo "no chromium (apt-get install chromium): skip"; exit 77; }
export MPLBACKEND=Agg
browser() { timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --user-data-dir="$WORK/profile" "$@" 2>/dev/null; }

# check_page HTML MIN_FIGURES: self-contained, every figure shown in the browser, not blank.
check_page() {
  local page=$1 min=$2
  [[ -s $page ]] || { fail "$page not written"; return; }
  grep -qiE '(src|href)=["'"'"']?(https?:|//)|<link|@import|url\(' "$page" && fail "$page loads something from outside"
  local shown
  shown=$(browser --virtual-time-budget=5000 --dump-dom "file://$page" |
    sed -n 's/.*data-figures-shown="\([0-9]*\)" data-figures="\([0-9]*\)".*/\1 \2/p')
  read -r got total <<<"$shown"
  [[ -n $got && $got == "$total" && $got -ge $min ]] ||
    fail "$page: the browser shows ${got:-no} of ${total:-?} figures, expected all and at least $min"
  # Every table fits a 1,280 px window: none scrolls sideways.
  local scrolling
  scrolling=$(browser --window-size=1280,1000 --virtual-time-budget=5000 --dump-dom "file://$page" |
    sed -n 's/.*data-tables-scrolling="\([0-9]*\)".*/\1/p')
  [[ $scrolling == 0 ]] || fail "$page: ${scrolling:-?} table(s) scroll sideways at 1,280 px"
  browser --window-size=1200,1600 --screenshot="$WORK/shot.png" "file://$page" >/dev/null
  "$PY" - "$WORK/shot.png" <<'PYEOF' || fail "$page: the screenshot is blank or missing"
import sys
import matplotlib.image
pixels = matplotlib.image.imread(sys.argv[1])[..., :3]
ink = (pixels.min(axis=2) < 0.9).mean()   # share of pixels that are not near white
colours = len({tuple(p) for p in (pixels[::7, ::7] * 255).astype(int).reshape(-1, 3)})
sys.exit(0 if ink > 0.03 and colours > 20 else 1)
PYEOF
  rm -f "$WORK/shot.png"
}

expect_ok "$DDPSIM" compare --policies static,minmax,kk --steps 80 --out "$WORK/run"
expect_ok "$PY" "$SRC/plots/report.py" "$WORK/run"
grep -q "wrote $WORK/run/report.html" "$WORK/out" || fail "report.py did not say what it wrote: $(cat "$WORK/out")"
check_page "$WORK/run/report.html" 4
grep -q 'rtx3090-distilbert' "$WORK/run/report.html" || fail "the run's page does not name its model"
grep -q '&quot;global_batch&quot;: 48' "$WORK/run/report.html" || fail "the run's page lacks its config"

expect_ok "$DDPSIM" sweep "$SRC/configs/sweep-study.json" --out "$WORK/sweep" --jobs 2
expect_ok "$PY" "$SRC/plots/report.py" "$WORK/sweep" --out "$WORK/sweep.html"
check_page "$WORK/sweep.html" 1
grep -q 'training.world_size=4, training.global_batch=128' "$WORK/sweep.html" ||
  fail "the sweep page names its cells by hash, not by their swept values"

# A committed validation: its model path is relative to the repository, where validate ran.
(cd "$SRC" && "$PY" plots/report.py traces/cpu/validation/2ranks/kk --out "$WORK/val/report.html") \
  >"$WORK/out" 2>"$WORK/err" || fail "report.py of a validation: $(cat "$WORK/err")"
check_page "$WORK/val/report.html" 4
grep -q 'calibration' "$WORK/val/report.html" || fail "the validation's page lacks the model's provenance"
grep -q '<title>Validation: kk against cpu-distilbert-small-2ranks.json' "$WORK/val/report.html" ||
  fail "the validation's title does not name the run and the model"
grep -Eq '<ul class=verdict><li>kk: gain measured .*: the (prediction lies|measured gain cannot)' "$WORK/val/report.html" ||
  fail "the validation's page does not open with its verdict"
grep -q 'Phases, mean ms per rank-step' "$WORK/val/report.html" || fail "the validation's page lacks the phase table"

# A folder whose name is not UTF-8 gets its page (issue 47 probe), and no temporary file is left.
odd=$(printf '%s/val\xffdir' "$WORK")
mkdir "$odd" && cp "$SRC"/traces/cpu/validation/2ranks/kk/validation.* "$odd/"
"$PY" "$SRC/plots/report.py" "$odd" >"$WORK/out" 2>"$WORK/err" || fail "report.py on a non-UTF-8 folder name: $(cat "$WORK/err")"
[[ -s $odd/report.html ]] || fail "no page for a folder whose name is not UTF-8"
[[ -z $(find "$WORK" -name 'report.tmp.*') ]] || fail "a temporary page was left behind"

mkdir "$WORK/empty"
expect_exit 1 "holds none of summary.json" "$PY" "$SRC/plots/report.py" "$WORK/empty"
[[ ! -e $WORK/empty/report.html ]] || fail "a failed report left a page"
finish
