# Bad input and failed rendezvous end in one clear message and exit 1 or 2, never a hang.
source "$(dirname "$0")/lib.sh"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\n' >"$WORK/vocab.txt"
printf 'sentence\tlabel\ngood\t1\ngood good\n' >"$WORK/bad.tsv"
expect_exit 1 "missing.txt" "$DDPTRAIN" --data "$WORK/bad.tsv" --vocab "$WORK/missing.txt" --model tiny
expect_exit 1 "bad.tsv:3" "$DDPTRAIN" --data "$WORK/bad.tsv" --vocab "$WORK/vocab.txt" --model tiny
expect_exit 2 "give --data TSV and --vocab" "$DDPTRAIN" --model tiny
expect_exit 2 "unrecognised|unrecognized" "$DDPTRAIN" --model tiny --bogus
expect_exit 2 "--optimizer-impl fused: no fused AdamW kernel here" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --steps 1 --device cpu --optimizer-impl fused
expect_exit 2 "--pad-to-multiple-of must be from 1 to --max-length \(64\)" "$DDPTRAIN" --synthetic-lengths sst2 \
  --model tiny --steps 1 --max-length 64 --pad-to-multiple-of 65
expect_exit 2 "--pad-to-multiple-of is not used with --profile" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --profile --pad-to-multiple-of 8
expect_exit 2 "--optimizer-impl is auto, per-param, foreach or fused" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --steps 1 --optimizer-impl fast
expect_exit 2 "--out: empty value" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --steps 1 --out ""
expect_exit 2 "--profile-reps is for --profile and --profile-alongside runs" "$DDPTRAIN" --synthetic-lengths sst2 \
  --model tiny --steps 1 --profile-reps 0
expect_exit 2 "--profile-alongside writes OUT/profile/steps.csv: give --out DIR" "$DDPTRAIN" --synthetic-lengths sst2 \
  --model tiny --steps 1 --profile-alongside
expect_exit 2 "--profile-alongside is not used with --profile" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --profile --profile-alongside --out "$WORK/both"
expect_exit 2 "--profile-reps sizes the allreduce profile --profile-alongside takes with several ranks" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --steps 4 --profile-alongside --profile-reps 2 --out "$WORK/one"
expect_exit 2 "--profile-alongside times one of the grid's 4 \(b, L\) points after each turn, and --steps 3 turns" \
  "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --steps 3 --profile-alongside --profile-batches 1,2 \
  --profile-lengths 8,16 --out "$WORK/few"
[[ -e $WORK/few ]] && fail "a refused --profile-alongside run left its --out folder behind"
# A folder where a run's file goes is refused before the training, not after it.
mkdir -p "$WORK/blocked/profile/steps.csv"
expect_exit 2 "blocked/profile/steps.csv is a folder; the run writes its steps.csv there" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --steps 4 --policy static,kk --profile-alongside --profile-batches 1,2 \
  --profile-lengths 8,16 --out "$WORK/blocked"
[[ -e $WORK/blocked/static ]] && fail "a run refused for its output path trained first"
mkdir -p "$WORK/blocked1/summary.json"
expect_exit 2 "blocked1/summary.json is a folder; the run writes its summary.json there" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --steps 1 --out "$WORK/blocked1"
expect_exit 2 "--profile-bytes: 3 is not a whole number of 4-byte \(fp32\) gradient elements" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --profile --profile-bytes 3,4
expect_exit 2 "--profile-max-warmup caps --profile-warmup auto, and --profile-warmup is 1" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --profile --profile-warmup 1 --profile-max-warmup 10
mkdir -p "$WORK/filed" && touch "$WORK/filed/profile"
expect_exit 2 "filed/profile is a file; expected a folder for --profile-alongside" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --steps 4 --profile-alongside --out "$WORK/filed"
expect_exit 2 "--dev is a TSV for --data runs" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --steps 1 \
  --dev "$WORK/bad.tsv"
expect_exit 2 '--bmax "1.5": expected a cap from 1 to 999999999' "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --steps 1 --bmax 1.5
expect_exit 2 "--bmax probe needs a CUDA device" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --bmax probe \
  --device cpu
expect_exit 2 "--precision is fp32 or bf16, got \"fp16\"" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --precision fp16
# Numbers out of range are refused before anything starts, naming the option and its range.
for bad in "--steps 0" "--steps -1" "--bucket-mb 0" "--first-bucket-mb -1" "--warmup 2" "--clip-norm -1" \
  "--nproc-per-node 0" "--emulate-ranks 0" "--emulate-link-GBps 0" "--synthetic-samples 10000000000" \
  "--lr -1" "--log-every 0" "--dropout 1" "--threads 2000" "--probe-reserve nan" "--max-length 1000001"; do
  read -r option value <<<"$bad"
  expect_exit 2 "$option must|$option is" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny "$option=$value"
done
expect_exit 2 "--seed must be from 0 to 9223372036854775807" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --seed=-1
expect_exit 2 "give one of them" "$DDPTRAIN" --synthetic-lengths sst2 --data "$WORK/bad.tsv" --model tiny
expect_exit 2 "--emulate-ranks plays N ranks in one process, --nproc-per-node starts N processes" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --emulate-ranks 2 --nproc-per-node 2
expect_exit 2 "--bmax \"-1\": expected a cap from 1" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --bmax=-1
expect_exit 1 "RANK=3 is not below WORLD_SIZE=2" env RANK=3 WORLD_SIZE=2 "$DDPTRAIN" --synthetic-lengths sst2 --model tiny

port=$(( (RANDOM % 20000) + 30000 ))
start=$SECONDS
expect_exit 1 "rendezvous at 127.0.0.1:$port failed within 3 s" env RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
  MASTER_PORT=$port "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --timeout-s 3
(( SECONDS - start < 60 )) || fail "the unreachable rendezvous took $((SECONDS - start)) s"

# Two ranks that disagree on the world size.
port=$((port + 1))
env RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$DDPTRAIN" --synthetic-lengths sst2 \
  --model tiny --timeout-s 10 >/dev/null 2>"$WORK/rank0.err" &
# Rank 0 serves the store and sees the mismatch; rank 1 sees it too unless rank 0 was faster to quit.
expect_exit 1 "world size mismatch|rendezvous at 127.0.0.1:$port failed" env RANK=1 WORLD_SIZE=3 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --timeout-s 10
wait
grep -q "world size mismatch" "$WORK/rank0.err" || fail "rank 0 did not report the mismatch: $(cat "$WORK/rank0.err")"
grep -q "rank 0 waiting at 127.0.0.1:$port for 1 other rank(s), up to 10 s" "$WORK/rank0.err" ||
  fail "rank 0 did not say whom it waits for: $(cat "$WORK/rank0.err")"
# --bmax from a model needs its memory: a parameter layout has none (issue 36).
"$DDPTRAIN" --model tiny --write-layout "$WORK/tiny-layout.json" >/dev/null || fail "--write-layout failed"
expect_exit 1 "--bmax .*tiny-layout.json: the model gives no device memory \(memory_mib.capacity is 0\)" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --steps 1 --bmax "$WORK/tiny-layout.json"
# Profile options: passes and warm-ups bounded, a list naming a value twice refused.
expect_exit 2 "--profile-reps must be from 1 to 10000" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --profile \
  --profile-reps 1000000000
expect_exit 2 '--profile-batches "1,1": 1 is listed twice' "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --profile \
  --profile-batches 1,1
# --write-layout reads --model and --seed only, so it never replaces an input of the command.
cp "$WORK/vocab.txt" "$WORK/keep.txt"
expect_exit 2 "--data is not used with --write-layout, which reads --model and --seed only" "$DDPTRAIN" --model tiny --data "$WORK/bad.tsv" \
  --vocab "$WORK/keep.txt" --write-layout "$WORK/keep.txt"
cmp -s "$WORK/vocab.txt" "$WORK/keep.txt" || fail "--write-layout replaced the vocabulary"
# Options the run would not read.
expect_exit 2 'unexpected argument "stray": ddptrain takes options only' "$DDPTRAIN" --synthetic-lengths sst2 stray
expect_exit 2 "--vocab tokenizes --data; --synthetic-lengths makes its own token ids" "$DDPTRAIN" \
  --synthetic-lengths sst2 --vocab "$WORK/vocab.txt"
expect_exit 2 "--synthetic-samples sizes the --synthetic-lengths dataset" "$DDPTRAIN" --data "$WORK/bad.tsv" \
  --vocab "$WORK/vocab.txt" --synthetic-samples 10
expect_exit 2 "--perf-model is read by minmax:cost=model only, and --policy is kk" "$DDPTRAIN" \
  --synthetic-lengths sst2 --policy kk --perf-model rtx3090-distilbert
expect_exit 2 "--ckpt-every writes checkpoints into --out" "$DDPTRAIN" --synthetic-lengths sst2 --ckpt-every 5
expect_exit 2 "--policy is not used with --profile: it times fixed shapes instead of training" "$DDPTRAIN" \
  --synthetic-lengths sst2 --profile --policy minmax
expect_exit 1 "--synthetic-samples: 1 samples, fewer than the 2 ranks sharing them" "$DDPTRAIN" --model tiny \
  --synthetic-lengths sst2 --synthetic-samples 1 --emulate-ranks 2 --global-batch 2
# The library's errors name the option they came from.
expect_exit 1 '--policy foo: unknown policy "foo"' "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --policy foo
expect_exit 1 "--perf-model: $WORK/nope.json: cannot open" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny \
  --policy minmax:cost=model --perf-model "$WORK/nope.json"
expect_exit 2 "--policy minmax:cost=model balances predicted time: give --perf-model" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --policy minmax:cost=model
expect_exit 2 '--model is base, small or tiny, got "huge"' "$DDPTRAIN" --synthetic-lengths sst2 --model huge
expect_exit 2 "--profile-batches: 5000 is more than a rank's batch can be \(48: --global-batch\)" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --profile --profile-batches 5000
echo x >"$WORK/a-file"
expect_exit 2 "--out .*a-file: is a file; expected a folder" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --steps 2 \
  --out "$WORK/a-file"
# Options of a mode that is off are refused, not ignored.
tinyrun=(--synthetic-lengths sst2 --model tiny --steps 2)
expect_exit 2 "--probe-reserve sizes the batch --bmax probe finds" "$DDPTRAIN" "${tinyrun[@]}" --probe-reserve 0.5
expect_exit 2 "--emulate-link-GBps shapes the allreduce --emulate-ranks models" "$DDPTRAIN" "${tinyrun[@]}" \
  --emulate-link-GBps 5
expect_exit 2 "--emulate-latency-us shapes the allreduce" "$DDPTRAIN" "${tinyrun[@]}" --emulate-latency-us 5
expect_exit 2 "--profile-bytes sizes the allreduces and all-gathers a profile of several ranks times" "$DDPTRAIN" \
  --synthetic-lengths sst2 --model tiny --profile --profile-bytes 100
expect_exit 2 "--global-batch 8 is less than the 16 ranks" "$DDPTRAIN" "${tinyrun[@]}" --global-batch 8 \
  --emulate-ranks 16
expect_exit 2 "--emulate-latency-us must be from 0 to 1e9" "$DDPTRAIN" "${tinyrun[@]}" --emulate-ranks 2 \
  --emulate-latency-us 1e300
expect_exit 2 "--micro-batches 49 is more than a rank's share of --global-batch \(48 over 1 ranks: 48\)" \
  "$DDPTRAIN" "${tinyrun[@]}" --micro-batches 49
expect_exit 2 "--profile-lengths: 1 is outside 2" "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --profile \
  --profile-lengths 1,8
printf 'sentence\tlabel\ngood film\t1\nbad film\t0\n' >"$WORK/ok.tsv"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\nbad\nfilm\n' >"$WORK/v.txt"
expect_exit 2 "--eval-every measures accuracy on --dev, which is not given" "$DDPTRAIN" --data "$WORK/ok.tsv" \
  --vocab "$WORK/v.txt" --model tiny --steps 2 --global-batch 2 --eval-every 1
# An interleaved --policy list: every item a policy, each once, and no resume of the whole.
expect_exit 2 'an empty policy in the list' "$DDPTRAIN" "${tinyrun[@]}" --policy static,,kk
expect_exit 2 'kk is listed twice' "$DDPTRAIN" "${tinyrun[@]}" --policy kk,static,kk
expect_exit 1 'unknown policy "nope"' "$DDPTRAIN" "${tinyrun[@]}" --policy static,nope
expect_exit 1 '--policy vrel: unknown policy "vrel" \(did you mean "verl"' "$DDPTRAIN" "${tinyrun[@]}" --policy static,vrel
! grep -q 'weights' "$WORK/out" || fail "a model was built for a misspelled policy: $(cat "$WORK/out")"
expect_exit 2 'minmax:buffer=64 is minmax with its options written out .*: the same policy twice' "$DDPTRAIN" \
  "${tinyrun[@]}" --policy minmax,kk,minmax:buffer=64
mkdir -p "$WORK/turns" && : >"$WORK/turns/kk"
expect_exit 2 "--out $WORK/turns: $WORK/turns/kk is a file; expected a folder for policy kk" "$DDPTRAIN" \
  "${tinyrun[@]}" --policy static,kk --out "$WORK/turns"
[[ ! -e $WORK/turns/static ]] || fail "a refused interleaved run left $WORK/turns/static behind"
# Refused before the ranks start: one message, not one per rank.
expect_exit 2 "--out $WORK/turns: $WORK/turns/kk is a file; expected a folder for policy kk" "$DDPTRAIN" \
  "${tinyrun[@]}" --policy static,kk --nproc-per-node 2 --out "$WORK/turns"
expect_exit 2 'an interleaved --policy list cannot be resumed' "$DDPTRAIN" "${tinyrun[@]}" --policy static,kk \
  --resume "$WORK/ok.tsv"
expect_exit 2 '--policy is not used with --profile' "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --profile \
  --policy static,kk
# A global batch larger than the dataset would train on samples twice (issue 36).
expect_exit 1 "--synthetic-samples: 100 samples, fewer than --global-batch 400" "$DDPTRAIN" --synthetic-lengths sst2 \
  --model tiny --steps 1 --synthetic-samples 100 --global-batch 400 --out "$WORK/big"
[[ ! -e $WORK/big/steps.csv ]] || fail "a refused run left $WORK/big/steps.csv behind"
expect_exit 1 "--data .*ok.tsv: 2 samples, fewer than --global-batch 4:" "$DDPTRAIN" --data "$WORK/ok.tsv" \
  --vocab "$WORK/v.txt" --model tiny --steps 1 --global-batch 4
# verl forms its own micro-batches: a count for it alone is refused, not ignored (issue 36).
for policy in verl verl:max_token_len=512; do
  expect_exit 2 "--micro-batches 4: --policy $policy forms its own micro-batches .* leave --micro-batches out" "$DDPTRAIN" \
    "${tinyrun[@]}" --policy "$policy" --micro-batches 4
done
# --nproc-per-node beside Slurm's task count: the one used is named (issue 47 probe).
SLURM_NTASKS=4 "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --nproc-per-node 2 --profile-reps 3 \
  --out "$WORK/both" >/dev/null 2>"$WORK/err"
grep -q "note: --nproc-per-node 2 starts this node's ranks itself; Slurm's SLURM_NTASKS=4" "$WORK/err" ||
  fail "--nproc-per-node beside SLURM_NTASKS passed without a note: $(cat "$WORK/err")"
# --bmax bounds a profile's grid; the policy a profile never runs does not refuse it.
expect_ok "$DDPTRAIN" --synthetic-lengths sst2 --model tiny --profile --bmax 2 --profile-batches 1,2 \
  --profile-lengths 8,16 --profile-reps 1 --profile-warmup 0 --out "$WORK/prof-bmax"
finish
