# A CPU run's speed rests on its processor, on the BLAS kernels LibTorch runs (OpenBLAS 0.3.21
# chose its Prescott kernels on a Xeon newer than itself, a third as fast as its AVX-512 ones) and on
# what malloc does with freed memory: calibrate refuses a training run of another machine than its
# profile, and validate warns when the run it scores ran on another cpu or blas than the model's
# traces. prereg26's committed traces, given the lines ddptrain and ddpsim.torch now write.
source "$(dirname "$0")/lib.sh"
P=$SRC/traces/cpu/prereg26
CPU="Intel(R) Xeon(R) Processor (family 6, model 207)"
FAST="OpenBLAS 0.3.21, SkylakeX kernels, set by OPENBLAS_CORETYPE" SLOW="OpenBLAS 0.3.21, Prescott kernels"
# on BLAS TRACE OUT: TRACE with the machine's lines among its metadata.
on() { mkdir -p "$(dirname "$3")" && { printf '# cpu=%s\n# blas=%s\n' "$CPU" "$1"; cat "$2"; } >"$3"; }
on "$FAST" "$P/profile/profile.csv" "$WORK/profile.csv"
on "$FAST" "$P/pre-run-a/static/steps.csv" "$WORK/pre-fast.csv"
on "$SLOW" "$P/pre-run-b/static/steps.csv" "$WORK/pre-slow.csv"

expect_exit 1 "pre-slow.csv: blas=OpenBLAS 0.3.21, Prescott kernels, and the profile .*profile.csv has blas=OpenBLAS 0.3.21, SkylakeX kernels" \
  "$DDPSIM" calibrate "$WORK/profile.csv" --base "$P/profile/layout.json" --training "$WORK/pre-fast.csv" \
  "$WORK/pre-slow.csv" --out "$WORK/refused.json"
[[ -e $WORK/refused.json ]] && fail "a refused calibration left its model behind"
# malloc's setting, a third line of the machine: freed memory given back costs a step its page faults.
{ echo "# malloc=glibc's defaults (freed memory given back, its pages faulted in again on the next step)"
  cat "$WORK/pre-fast.csv"; } >"$WORK/pre-defaults.csv"
sed -i "1i # malloc=freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)" "$WORK/profile.csv"
expect_exit 1 "pre-defaults.csv: malloc=glibc's defaults .*, and the profile .*profile.csv has malloc=freed memory kept" \
  "$DDPSIM" calibrate "$WORK/profile.csv" --base "$P/profile/layout.json" --training "$WORK/pre-defaults.csv" \
  --out "$WORK/refused.json"
{ echo "# malloc=freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)"
  cat "$WORK/pre-fast.csv"; } >"$WORK/pre-kept.csv" && mv "$WORK/pre-kept.csv" "$WORK/pre-fast.csv"
expect_ok "$DDPSIM" calibrate "$WORK/profile.csv" --base "$P/profile/layout.json" --training "$WORK/pre-fast.csv" \
  --out "$WORK/model.json"

# The run on the model's machine: no warning. On the slow kernels: one line, and the JSON says it.
on "$FAST" "$P/runs-base-1/static/steps.csv" "$WORK/same/steps.csv"
expect_ok "$DDPSIM" validate --measured "$WORK/same/steps.csv" --model "$WORK/model.json" --out "$WORK/v-same"
grep -q "another machine" "$WORK/out" && fail "a warning for a run on the model's own machine: $(grep machine "$WORK/out")"
on "$SLOW" "$P/runs-base-1/static/steps.csv" "$WORK/slow/steps.csv"
expect_ok "$DDPSIM" validate --measured "$WORK/slow/steps.csv" --model "$WORK/model.json" --out "$WORK/v-slow"
grep -qF "warning: $WORK/slow/steps.csv ran on another machine than the traces model \"calibrated\" was calibrated on (blas \"$SLOW\" against \"$FAST\"): its times are another machine's" \
  "$WORK/out" || fail "no warning for a run on other BLAS kernels: $(grep -i warning "$WORK/out")"
python3 -c 'import json, sys; assert "Prescott" in json.load(open(sys.argv[1]))["model_other_machine"]' \
  "$WORK/v-slow/validation.json" || fail "validation.json lacks model_other_machine"
python3 -c 'import json, sys; assert "model_other_machine" not in json.load(open(sys.argv[1]))' \
  "$WORK/v-same/validation.json" || fail "validation.json has model_other_machine for the model's own machine"
finish
