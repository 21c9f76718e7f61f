# Helpers for the end-to-end CLI tests. Each test script is called as
#   script.sh DDPSIM SOURCE_DIR SHARED_DATA_DIR
# and exits non-zero at the first failed expectation, 77 when it must skip.
set -uo pipefail
DDPSIM=$1
SRC=$2
SHARED=$3
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0

fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# ASan's note on SimGrid's stack switching, which it prints (sanitizer builds only) when an
# error is thrown after a simulation ran: not the program's output.
asan_notes() {
  grep -v -e '^==[0-9]*==WARNING: ASan is ignoring requested __asan_handle_no_return' \
    -e '^False positive error reports may follow' -e '^For details see https://github.com/google/sanitizers'
}

# expect_exit CODE PATTERN CMD...: CMD exits with CODE and its stderr matches PATTERN (grep -E).
expect_exit() {
  local code=$1 pattern=$2; shift 2
  "$@" >"$WORK/out" 2>"$WORK/err.all"
  local got=$?
  asan_notes <"$WORK/err.all" >"$WORK/err"
  [[ $got == "$code" ]] || { fail "$* exited $got, expected $code; stderr: $(cat "$WORK/err")"; return; }
  grep -qE -- "$pattern" "$WORK/err" || fail "$*: stderr does not match /$pattern/: $(cat "$WORK/err")"
  [[ $(wc -l <"$WORK/err") -le 2 ]] || fail "$*: error is not one line: $(cat "$WORK/err")"
}

# expect_ok CMD...: CMD exits 0; its stdout is left in $WORK/out.
expect_ok() {
  "$@" >"$WORK/out" 2>"$WORK/err" || fail "$* exited $?; stderr: $(cat "$WORK/err")"
}

finish() {
  if ((failures)); then echo "$failures expectation(s) failed" >&2; exit 1; fi
  echo "all expectations met"
}
