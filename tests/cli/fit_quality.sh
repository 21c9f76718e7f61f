# The fit-quality gate end to end: a profile whose shapes scatter far off any surface makes
# `calibrate` warn on stderr, naming the phase and the figure; `run` and `validate` with that
# model repeat the warning in their headers, and summary.json carries it.
source "$(dirname "$0")/lib.sh"
python3 - "$WORK/profile.csv" <<'PY'
import math, random, sys
random.seed(3)
with open(sys.argv[1], "w") as f:
    f.write("# world_size=1\n# profile=one rank\n")
    f.write("step,rank,policy,batch_size,max_len,real_tokens,padded_tokens,fwd_ms,bwd_ms,comm_wait_ms,opt_ms,step_ms,peak_mem_mib,loss\n")
    step = 0
    for b in (1, 2, 4, 8, 16, 32):
        for L in (8, 16, 32, 64, 128, 256):
            level = (2 + 0.002 * b * L + 1e-5 * b * L * L) * math.exp(0.7 * random.gauss(0, 1))
            for _ in range(4):
                fwd = level * math.exp(0.02 * random.gauss(0, 1))
                f.write(f"{step},0,profile,{b},{L},{b*L},{b*L},{fwd:.4f},{2*fwd:.4f},0,1.0,{3*fwd+1:.4f},,\n")
                step += 1
PY
expect_ok "$DDPSIM" calibrate "$WORK/profile.csv" --out "$WORK/model.json"
grep -q "warning: the model fits poorly (forward: held-out MAPE" "$WORK/err" || fail "calibrate did not warn: $(cat "$WORK/err")"
expect_ok "$DDPSIM" run --steps 20 --set model="$WORK/model.json" --out "$WORK/run"
grep -q "warning: this model fits poorly (forward: held-out MAPE" "$WORK/out" || fail "run's header lacks the warning"
grep -q '"model_fit_warning"' "$WORK/run/summary.json" || fail "summary.json lacks model_fit_warning"
expect_ok "$DDPSIM" validate --measured "$WORK/run/steps.csv" --model "$WORK/model.json"
grep -q "warning: this model fits poorly (forward: held-out MAPE" "$WORK/out" || fail "validate's header lacks the warning"
finish
