# `ddpsim policies` lists every policy with options that parse at the defaults it shows, and
# `--version` names the build (ddpsim's and, when built, ddptrain's alike).
source "$(dirname "$0")/lib.sh"
DDPTRAIN=$(dirname "$DDPSIM")/ddptrain
version=$(sed -n 's/^project(ddpsim VERSION \([0-9.]*\).*/\1/p' "$SRC/CMakeLists.txt")

expect_ok "$DDPSIM" --version
grep -qx "ddpsim $version\( (git [^)]*)\)\?" "$WORK/out" || fail "ddpsim --version: $(cat "$WORK/out")"
if [[ -x $DDPTRAIN ]]; then
  expect_ok "$DDPTRAIN" --version
  sed "s/^ddptrain /ddpsim /" "$WORK/out" >"$WORK/train-version"
  expect_ok "$DDPSIM" --version
  cmp -s "$WORK/out" "$WORK/train-version" || fail "ddptrain --version differs: $(cat "$WORK/train-version")"
fi

expect_ok "$DDPSIM" policies
cp "$WORK/out" "$WORK/policies"
# Every policy docs/policies.md documents is listed, and no other.
documented=$(sed -n 's/^| `\([a-z_]*\)` | .*/\1/p' "$SRC/docs/policies.md" | sort)
listed=$(sed -n 's/^\([a-z_]\+\) .*/\1/p' "$WORK/policies" | sort)
[[ $documented == "$listed" ]] || fail "policies listed ($(echo $listed)) are not those documented ($(echo $documented))"
# Each option at the default shown parses and runs, spelled out as a user would.
policy=""
options=0
while read -r first rest; do
  if [[ $first =~ ^[a-z_]+$ && -n $rest ]]; then policy=$first; continue; fi
  [[ $first == *=* ]] || continue
  options=$((options + 1))
  expect_ok "$DDPSIM" balance --steps 2 --policies "$policy:$first"
done <"$WORK/policies"
((options >= 10)) || fail "only $options options listed"
grep -q '^    buffer=64 *integer from 1 to 65536$' "$WORK/policies" || fail "minmax's buffer is not listed with its range"
grep -q '^    cost=tokens *tokens | tokens_sq | workload | model$' "$WORK/policies" ||
  fail "minmax's cost values are not listed"
# Named policies alone; a misspelt one is refused as --policies refuses it.
expect_ok "$DDPSIM" policies verl kk
[[ $(sed -n 's/^\([a-z_]\+\) .*/\1/p' "$WORK/out" | tr '\n' ' ') == "kk verl " ]] ||
  fail "ddpsim policies verl kk lists others: $(cat "$WORK/out")"
expect_exit 1 'unknown policy "vrel" \(did you mean "verl"' "$DDPSIM" policies vrel
finish
