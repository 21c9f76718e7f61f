# Bad input: one clear line naming the culprit, exit 1 or 2, and no output left behind.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
no_output() { [[ -z $(ls -A "$out" 2>/dev/null) ]] || fail "output left behind after: $*: $(ls -A "$out")"; }
run_bad() { expect_exit "$@" --out "$out"; no_output "${@:3}"; }

printf '{\n  "training": {\n    "world_size": 4,\n  }\n}\n' >"$WORK/broken.json"
run_bad 1 "broken.json:4:[0-9]+: invalid JSON" "$DDPSIM" balance "$WORK/broken.json"
echo '{"training": {"global_bach": 48}}' >"$WORK/typo.json"
run_bad 1 'typo.json: training: unknown key "global_bach" \(did you mean "global_batch"' "$DDPSIM" balance "$WORK/typo.json"
run_bad 1 "cannot open" "$DDPSIM" balance "$WORK/missing.json"
run_bad 1 "B=3 is smaller than G=4" "$DDPSIM" balance --set training.global_batch=3
run_bad 1 "B=48 exceeds the 40 samples" "$DDPSIM" balance --policies minmax --set training.b_max=10
run_bad 1 "not divisible by G=4" "$DDPSIM" balance --policies static --set training.global_batch=50
run_bad 1 'unknown policy "minmx" \(did you mean "minmax"' "$DDPSIM" balance --policies static,minmx
run_bad 1 'unknown policy "VERL" \(did you mean "verl"' "$DDPSIM" balance --policies static,VERL
run_bad 1 'unknown option "bufer" \(did you mean "buffer"' "$DDPSIM" balance --policies minmax:bufer=3
printf '{"counts": [[3, 5], [2, 1]]}' >"$WORK/hist.json"
run_bad 1 "hist.json: counts\[1\]: lengths must be strictly ascending" "$DDPSIM" balance \
  --set data.source=histogram --set "data.path=$WORK/hist.json"
printf 'sentence\tlabel\ngood one\t1\nno label here\n' >"$WORK/bad.tsv"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\none\n' >"$WORK/vocab.txt"
expect_exit 1 "bad.tsv:3:" "$DDPSIM" lengths "$WORK/bad.tsv" --vocab "$WORK/vocab.txt" --out "$out/h.json"
no_output "lengths on a malformed TSV"
: >"$WORK/empty.txt"
expect_exit 1 "empty.txt: vocabulary has no \[PAD\]" "$DDPSIM" lengths "$WORK/bad.tsv" --vocab "$WORK/empty.txt" --out "$out/h.json"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\ngo\xffod\n' >"$WORK/latin.txt"
expect_exit 1 "latin.txt:5: invalid UTF-8 at byte 3 of the token" "$DDPSIM" lengths "$WORK/bad.tsv" --vocab "$WORK/latin.txt" \
  --out "$out/h.json"
# Inputs are regular files: a device, a FIFO or a directory is refused by name, never read.
mkfifo "$WORK/fifo"
for input in /dev/zero "$WORK/fifo" "$WORK"; do
  run_bad 1 "$input: cannot open JSON file: (not a regular file|it is a directory)" "$DDPSIM" run "$input"
done
no_output "lengths with an empty vocab"
# Another of ddpsim's files given as the config is named as what it is.
expect_ok "$DDPSIM" run --set training.steps=3 --out "$WORK/run"
run_bad 1 'run/summary.json is a run.s summary.json, not a config: its "config" key' "$DDPSIM" run "$WORK/run/summary.json"
printf '{"axes": {"training.steps": [3, 4]}}' >"$WORK/sweep.json"
run_bad 1 'sweep.json is a sweep file, not a config: `ddpsim sweep` runs it' "$DDPSIM" run "$WORK/sweep.json"
run_bad 1 'is a performance model, not a config: a config names it as its "model"' \
  "$DDPSIM" run "$(dirname "$0")/../../models/cpu-distilbert-small-1core.json"
finish
