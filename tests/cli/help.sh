# Every verb explains itself; bad usage exits 2.
source "$(dirname "$0")/lib.sh"
expect_ok "$DDPSIM" --help
for verb in run compare sweep balance; do grep -q "  $verb" "$WORK/out" || fail "--help does not list $verb"; done
for verb in run compare sweep calibrate replay validate balance bench lengths; do
  expect_ok "$DDPSIM" "$verb" --help
  grep -q "usage: ddpsim $verb" "$WORK/out" || fail "$verb --help lacks its usage line"
done
expect_exit 2 "missing command" "$DDPSIM"
expect_exit 2 'unknown command "simulate"' "$DDPSIM" simulate
expect_exit 2 "unrecognised option|unrecognized option" "$DDPSIM" balance --bogus
expect_exit 2 "expected key=value" "$DDPSIM" balance --set training.steps
expect_exit 2 "vocab.*required|required.*vocab" "$DDPSIM" lengths x.tsv --out h.json
# Nothing follows --version or --help but a command to explain (issue 47 probe).
expect_exit 2 "--version takes nothing after it, got \"bogus\"" "$DDPSIM" --version bogus
expect_exit 2 "help: unknown command \"bogus\" .commands: run, compare" "$DDPSIM" help bogus
expect_exit 2 "help run takes nothing after it, got \"extra\"" "$DDPSIM" help run extra
expect_ok "$DDPSIM" help validate
grep -q "^usage: ddpsim validate" "$WORK/out" || fail "ddpsim help validate is not validate's help"
finish
