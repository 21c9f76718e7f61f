# `ddpsim lengths` on the real SST-2 train split reproduces the committed, embedded histogram.
source "$(dirname "$0")/lib.sh"
[[ -f $SHARED/sst2/train.tsv && -f $SHARED/bert-base-uncased/vocab.txt ]] || { echo "no shared data: skip"; exit 77; }
expect_ok "$DDPSIM" lengths "$SHARED/sst2/train.tsv" --vocab "$SHARED/bert-base-uncased/vocab.txt" --out "$WORK/h.json"
cmp -s "$WORK/h.json" "$SRC/traces/sst2-train-lengths.json" || fail "histogram differs from traces/sst2-train-lengths.json"
grep -q "67349 samples" "$WORK/out" || fail "lengths did not report 67349 samples: $(cat "$WORK/out")"
finish
