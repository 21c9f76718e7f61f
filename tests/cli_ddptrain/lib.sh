# Helpers for the end-to-end tests of ddptrain: script.sh DDPTRAIN SOURCE_DIR SHARED_DATA_DIR.
set -uo pipefail
DDPTRAIN=$1
SRC=$2
SHARED=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_exit() {
  local code=$1 pattern=$2; shift 2
  timeout 120 "$@" >"$WORK/out" 2>"$WORK/err"
  local got=$?
  [[ $got == "$code" ]] || { fail "$* exited $got, expected $code; stderr: $(cat "$WORK/err")"; return; }
  grep -qE -- "$pattern" "$WORK/err" || fail "$*: stderr does not match /$pattern/: $(cat "$WORK/err")"
}
expect_ok() { timeout 300 "$@" >"$WORK/out" 2>"$WORK/err" || fail "$* exited $?; stderr: $(cat "$WORK/err")"; }
finish() {
  if ((failures)); then echo "$failures expectation(s) failed" >&2; exit 1; fi
  echo "all expectations met"
}
