# Every --help (ddpsim's, each verb's, the figure scripts', ddptrain's when built) fits 100
# columns, counted in characters as a terminal shows them, and every verb the top-level help
# lists answers --help.
source "$(dirname "$0")/lib.sh"
DDPTRAIN=$(dirname "$DDPSIM")/ddptrain

# too_wide NAME < TEXT: fails for each line over 100 characters.
too_wide() {
  python3 -c '
import sys
for n, line in enumerate(sys.stdin.buffer.read().decode("utf-8").splitlines(), 1):
    if len(line) > 100:
        print("%s: line %d is %d columns: %s" % (sys.argv[1], n, len(line), line))' "$1"
}

expect_ok "$DDPSIM" --help
verbs=$(sed -n 's/^  \([a-z]\+\)\( .*\)\?$/\1/p' "$WORK/out")
[[ $(wc -w <<<"$verbs") -ge 10 ]] || fail "ddpsim --help lists too few commands: $verbs"
wide=$(too_wide "ddpsim --help" <"$WORK/out")
[[ -z $wide ]] || fail "$wide"
for verb in $verbs; do
  expect_ok "$DDPSIM" "$verb" --help
  wide=$(too_wide "ddpsim $verb --help" <"$WORK/out")
  [[ -z $wide ]] || fail "$wide"
done
# The figure scripts' docstrings are their --help; argparse wraps its own lines to COLUMNS.
for script in "$SRC"/plots/*.py; do
  [[ $script == */common.py ]] && continue
  COLUMNS=100 python3 "$script" --help >"$WORK/out" 2>&1 || { fail "$script --help failed: $(cat "$WORK/out")"; continue; }
  wide=$(too_wide "${script#"$SRC"/} --help" <"$WORK/out")
  [[ -z $wide ]] || fail "$wide"
done
if [[ -x $DDPTRAIN ]]; then
  expect_ok "$DDPTRAIN" --help
  wide=$(too_wide "ddptrain --help" <"$WORK/out")
  [[ -z $wide ]] || fail "$wide"
fi
finish
