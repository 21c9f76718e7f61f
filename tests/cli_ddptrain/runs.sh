# Two real Gloo ranks started by --nproc-per-node, and --emulate-ranks: traces in the shared
# schema, with what was measured and what was modelled said in the metadata.
source "$(dirname "$0")/lib.sh"
expect_ok "$DDPTRAIN" --help
grep -q "usage: ddptrain" "$WORK/out" || fail "--help lacks its usage line"

common=(--synthetic-lengths sst2 --synthetic-samples 800 --model tiny --max-length 64 --global-batch 16 --steps 6)
expect_ok "$DDPTRAIN" "${common[@]}" --policy minmax:buffer=16 --nproc-per-node 2 --out "$WORK/real"
csv="$WORK/real/steps.csv"
grep -q '^# world_size=2$' "$csv" || fail "trace metadata lacks world_size=2"
grep -q '^# backend=gloo$' "$csv" || fail "trace metadata lacks backend=gloo"
grep -q '^# cpu_subnormals=flushed$' "$csv" || fail "trace metadata lacks cpu_subnormals=flushed (each rank flushes them)"
if [[ $(uname -m) == x86_64 ]]; then
  grep -Eq '^# cpu=.+ \(family [0-9]+, model [0-9]+\)$' "$csv" || fail "trace metadata lacks cpu=NAME (family F, model M)"
fi
# The setup installs OpenBLAS for LibTorch: which of its kernels ran is what the line is for.
# (A machine whose OpenBLAS predates its CPU may set OPENBLAS_CORETYPE for every process.)
forced=${OPENBLAS_CORETYPE:+, set by OPENBLAS_CORETYPE}
grep -Eq "^# blas=OpenBLAS [0-9.]+, [A-Za-z0-9]+ kernels$forced\$" "$csv" ||
  fail "trace metadata lacks blas=OpenBLAS V, CORE kernels$forced"
grep -q '^# malloc=freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)$' "$csv" ||
  fail "trace metadata lacks malloc=freed memory kept (...)"
grep -q '^# allreduce=measured' "$csv" || fail "trace metadata does not say the allreduce was measured"
[[ $(grep -vc '^#' "$csv") == $((1 + 6 * 2)) ]] || fail "steps.csv should hold 6 steps x 2 ranks"
row=$(grep -v '^#' "$csv" | sed -n 2p)
IFS=, read -ra v <<<"$row,"
for i in 7 8 9 10 11 13; do [[ -n ${v[$i]} ]] || fail "column $i is empty in: $row"; done
[[ -z ${v[12]} ]] || fail "peak_mem_mib should be empty on CPU: $row"
for key in mean_max_step_ms p95_max_step_ms mean_std_compute_ms mean_std_padded_tokens dev_accuracy; do
  grep -q "\"$key\"" "$WORK/real/summary.json" || fail "summary.json lacks $key"
done

grep -q '^# precision=fp32$' "$csv" || fail "trace metadata lacks precision=fp32"
grep -q '^# optimizer_impl=foreach$' "$csv" || fail "trace metadata lacks optimizer_impl=foreach (auto on a CPU)"
grep -q '"optimizer_impl": "foreach"' "$WORK/real/summary.json" || fail "summary.json lacks optimizer_impl"

# Policies interleaved in one run, a step each in turn: each policy's trace is the one its own
# run writes, sample for sample and loss for loss (dropout on: each keeps its own stream).
expect_ok "$DDPTRAIN" "${common[@]}" --policy kk,minmax:buffer=16 --nproc-per-node 2 --out "$WORK/turns"
cp "$WORK/out" "$WORK/turns.log"
expect_ok "$DDPTRAIN" "${common[@]}" --policy kk --nproc-per-node 2 --out "$WORK/kk"
grep -q '^# interleaved=one step of each policy in turn: kk,minmax:buffer=16$' "$WORK/turns/kk/steps.csv" ||
  fail "an interleaved trace does not say so"
grep -q '^# interleaved' "$WORK/kk/steps.csv" && fail "a run alone says it was interleaved"
# ... and the optimizer, the same work in both models, read as a control: kk's median as its
# trace gives it, within the printed figure's rounding to 0.1 ms.
kk_opt=$(awk -F, '$1 ~ /^[0-9]+$/ && $1 >= 1 && $2 == 0 { print $11 }' "$WORK/turns/kk/steps.csv" | sort -g |
  awk '{ v[NR] = $1 } END { print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
line=$(grep "^optimizer, the same work in every policy's model, median after step 0: kk [0-9.]*, minmax:buffer=16 [0-9.]* ms ([0-9.]*% apart)$" \
  "$WORK/turns.log") || fail "the interleaved run does not print its optimizer control"
printed=$(sed -n 's/.*step 0: kk \([0-9.]*\),.*/\1/p' <<<"$line")
awk -v a="$printed" -v b="$kk_opt" 'BEGIN { d = a - b; exit !(d < 0.06 && d > -0.06) }' ||
  fail "the optimizer control printed kk's median as $printed ms, its trace gives $kk_opt"
tr -d ' \n' <"$WORK/turns/kk/summary.json" | grep -q '"interleaved":\["kk","minmax:buffer=16"\]' ||
  fail "an interleaved run's summary.json does not list the policies trained in turn"
grep -q '"interleaved"' "$WORK/kk/summary.json" && fail "a run alone's summary.json says it was interleaved"
for pair in "turns/kk kk" "turns/minmax-buffer-16 real"; do
  read -r a b <<<"$pair"
  # step, rank, policy, batch, max_len, tokens and loss: the same; the times are not.
  cmp -s <(grep -v '^#' "$WORK/$a/steps.csv" | cut -d, -f1-7,14) <(grep -v '^#' "$WORK/$b/steps.csv" | cut -d, -f1-7,14) ||
    fail "$a/steps.csv differs from its run alone ($b) in samples or losses"
done

# The profile grid timed alongside the turns: a profile trace of every rank's rows and the
# allreduce profile, which ddpsim calibrate reads as it reads a --profile one; the training itself
# is the run's without it, sample for sample and loss for loss.
expect_ok "$DDPTRAIN" "${common[@]}" --policy kk,minmax:buffer=16 --nproc-per-node 2 --profile-alongside \
  --profile-batches 1,4 --profile-lengths 8,24 --profile-bytes 4096,65536 --profile-reps 2 --profile-warmup 0 \
  --out "$WORK/along"
grep -q "profile alongside: 4 (b, L) points, one after each of the 6 turns" "$WORK/out" ||
  fail "the run does not say how it profiles alongside"
prof="$WORK/along/profile/steps.csv"
said="^# profile=on 2 ranks at once; then allreduce, interference and all-gather; alongside training (kk,minmax:buffer=16), "
said+="one profiled step after each turn: 6 steps over 4 points in seeded random orders, each point 1 or 2 times, "
grep -q "${said}no warm-up of its own; allreduce warmup 0, repetitions 2$" "$prof" ||
  fail "the profile alongside lacks its metadata"
grep -Eq "^# allgather=4096:[0-9.]+,65536:[0-9.]+$" "$prof" || fail "the profile lacks its all-gather times"
grep -Eq "^# optimizer_update_share=0\.[0-9]+$" "$prof" || fail "the profile lacks the optimizer's update share"
[[ $(grep -c ',profile,' "$prof") == 12 ]] || fail "two ranks should have timed a grid point after each of 6 turns"
[[ $(grep -c ',allreduce,' "$prof") -gt 0 ]] || fail "the profile alongside lacks its allreduce profile"
grep -q '^# ddp_buckets=' "$prof" || fail "the profile alongside does not name DDP's buckets"
grep -q '^# policy=profile$' "$prof" || fail "the profile alongside names a policy it did not run"
grep -v '^#' "$prof" | awk -F, '$3 == "profile" { print $4 "x" $5 }' | sort -u | tr '\n' ' ' |
  grep -qx '1x24 1x8 4x24 4x8 ' || fail "the profile alongside did not visit every grid point"
grep -q '^# profile_alongside=one step of a profile grid after each turn' "$WORK/along/kk/steps.csv" ||
  fail "a run with a profile alongside does not say so"
grep -q '^# profile_alongside' "$WORK/turns/kk/steps.csv" && fail "a run without a profile alongside says it had one"
for policy in kk minmax-buffer-16; do
  cmp -s <(grep -v '^#' "$WORK/along/$policy/steps.csv" | cut -d, -f1-7,14) \
    <(grep -v '^#' "$WORK/turns/$policy/steps.csv" | cut -d, -f1-7,14) ||
    fail "$policy's training changed when the profile ran alongside it"
done
# One policy, four emulated ranks: one real rank profiles, between the steps.
expect_ok "$DDPTRAIN" "${common[@]}" --emulate-ranks 4 --profile-alongside --profile-batches 2 --profile-lengths 16,32 \
  --out "$WORK/along1"
[[ $(grep -c ',profile,' "$WORK/along1/profile/steps.csv") == 6 ]] || fail "one rank should have timed 6 grid steps"
grep -q ',allreduce,' "$WORK/along1/profile/steps.csv" && fail "one real rank has no allreduce to profile"
said="^# profile=alongside training (static), one profiled step after each turn: 6 steps over 2 points in seeded "
grep -q "${said}random orders, each point 3 times, no warm-up of its own$" "$WORK/along1/profile/steps.csv" ||
  fail "one rank's profile alongside lacks its metadata"
[[ $(grep -vc '^#' "$WORK/along1/steps.csv") == $((1 + 6 * 4)) ]] || fail "the run itself should hold 6 steps x 4 ranks"

expect_ok "$DDPTRAIN" "${common[@]}" --emulate-ranks 4 --precision bf16 --out "$WORK/emu"
grep -q '^# precision=bf16$' "$WORK/emu/steps.csv" || fail "trace metadata lacks precision=bf16"
grep -q '"precision": "bf16"' "$WORK/emu/summary.json" || fail "summary.json does not say bf16"
grep -q '^# emulated_ranks=4$' "$WORK/emu/steps.csv" || fail "trace metadata lacks emulated_ranks=4"
grep -q "^# allreduce=modelled.*NOT a real 4-GPU run" "$WORK/emu/steps.csv" || fail "emulation is not labelled as such"
[[ $(grep -vc '^#' "$WORK/emu/steps.csv") == $((1 + 6 * 4)) ]] || fail "emulated steps.csv should hold 6 steps x 4 ranks"

# Gradient accumulation on real ranks: VeRL's micro-batches, and a fixed count, in the trace.
expect_ok "$DDPTRAIN" "${common[@]}" --policy verl:max_token_len=64 --nproc-per-node 2 --out "$WORK/verl"
grep -v '^#' "$WORK/verl/steps.csv" | head -1 | grep -q ',micro_batches,micro_sizes,micro_max_lens,micro_tokens$' ||
  fail "a verl trace lacks the micro-batch columns"
awk -F, '!/^#/ && NR > 1 && $17 < 2 { bad++ } END { exit bad > 0 }' <(grep -v '^#' "$WORK/verl/steps.csv") ||
  fail "verl with max_token_len 64 should cut 8 SST-2 samples into 2 or more micro-batches"
expect_ok "$DDPTRAIN" "${common[@]}" --micro-batches 3 --emulate-ranks 2 --out "$WORK/accum"
grep -q '"mean_micro_batches": 3' "$WORK/accum/summary.json" || fail "summary.json lacks mean_micro_batches 3"
expect_exit 2 'micro-batches must be from 1 to 10000' "$DDPTRAIN" "${common[@]}" --micro-batches 0
finish
