#!/usr/bin/env bash
# The GPU validation campaign (README: "Validation on GPU"). Stages, in order; the ones marked
# (GPU) run on the GPU machine, the others where ddpsim is built (SimGrid):
#   build (GPU)    ddptrain and its tests against the machine's PyTorch LibTorch, deps from .deb
#                  files in $DEBS unpacked into $DEPS (README: "Building ddptrain against a CUDA
#                  LibTorch")
#   test (GPU)     the unit tests, the trainer's on CUDA
#   profile (GPU)  the layout, then ddptrain --profile of distilbert-base, fp32 and bf16
#   calibrate      ddpsim calibrate of each profile -> models/$GPU-distilbert-measured{,-bf16}.json
#   run (GPU)      training runs: the study's setting (B=48, K=64, 800 steps, 4 emulated ranks)
#                  under every policy; B=256 at max_length 128; bf16; NCCL at world size 1;
#                  --bmax probe
#   peer (GPU)     bench/peer_pytorch.py (PyTorch eager + Hugging Face DistilBERT), static and
#                  minmax, on the study's setting
#   validate       ddpsim validate of each run against its model, static as the baseline
#
#   STAGES="build test profile" scripts/validate_gpu.sh     # on the GPU machine
#   STAGES=calibrate scripts/validate_gpu.sh                 # where ddpsim is built
#   STAGES="build run peer" scripts/validate_gpu.sh          # on the GPU machine
#   STAGES=validate scripts/validate_gpu.sh                  # where ddpsim is built
#
# How much: STEPS (800 a run), RUNS (the run stage's parts: policies bf16 large nccl probe),
# LARGE_STEPS (STEPS/2), PEER (fp32 bf16); where: SHARED (../shared/data), TRACES
# (traces/$GPU, GPU=h100), BUILD (build-gpu). The committed campaign ran STEPS=500 for the
# policies, 800 for bf16 and LARGE_STEPS=200, within 30 minutes of GPU time.
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared/data}
gpu=${GPU:-h100}
out=${TRACES:-traces/$gpu}
steps=${STEPS:-800}
build=${BUILD:-build-gpu}
deps=${DEPS:-/tmp/deps}
debs=${DEBS:-.gpu-debs}
models=${MODELS:-models}
model_fp32=$models/$gpu-distilbert-measured.json
model_bf16=$models/$gpu-distilbert-measured-bf16.json
read -r -a stages <<<"${STAGES:-build test profile}"
read -r -a runs <<<"${RUNS:-policies bf16 large nccl probe}"   # the run stage's parts
part() { [[ " ${runs[*]} " == *" $1 "* ]]; }
stage() { [[ " ${stages[*]} " == *" $1 "* ]]; }
for s in "${stages[@]}"; do
  [[ $s =~ ^(build|test|profile|calibrate|run|peer|validate)$ ]] ||
    { echo "validate_gpu: STAGES: unknown stage '$s' (build test profile calibrate run peer validate)" >&2; exit 2; }
done
for f in "$shared/sst2/train.tsv" "$shared/bert-base-uncased/vocab.txt"; do
  [[ -f $f ]] || { echo "validate_gpu: $f is missing (set SHARED to the shared data folder)" >&2; exit 1; }
done
t0=$SECONDS
step() { echo; echo "== +$((SECONDS - t0))s $*"; }
name() { echo "${1//[:=]/-}"; }   # minmax:cost=model -> minmax-cost-model
policies=(static minmax:cost=tokens minmax:cost=model kk sorted token_budget)
data=(--model base --seed 0 --data "$shared/sst2/train.tsv" --vocab "$shared/bert-base-uncased/vocab.txt")
common=("${data[@]}" --max-length 256 --global-batch 48)   # the study's setting
ddptrain=$build/ddptrain
mkdir -p "$out"
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if stage build; then
  step "build: ddptrain against $(python3 -c 'import torch; print("PyTorch", torch.__version__)')"
  mkdir -p "$deps"
  for f in "$debs"/*.deb; do dpkg -x "$f" "$deps"; done
  # The .pc files name /usr; point them at the private prefix.
  sed -i "s|^prefix=/usr\$|prefix=$deps/usr|" "$deps"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig
  command -v pkg-config >/dev/null || export PKG_CONFIG=$deps/usr/bin/pkgconf
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDDPSIM_BUILD_SIM=OFF \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" -DBoost_NO_SYSTEM_PATHS=ON -DBOOST_ROOT="$deps/usr" \
    -DDDPSIM_SHARED_DATA="$(realpath "$shared")" >"$build.configure.log" 2>&1 ||
    { tail -40 "$build.configure.log"; exit 1; }
  cmake --build "$build" -j"$(nproc)" 2>&1 | grep -E 'error|Error|warning: unused|Built target ddptrain$' || true
  [[ -x $ddptrain ]] || { echo "validate_gpu: the build made no $ddptrain" >&2; exit 1; }
fi

if stage test; then
  step "test: the unit tests (ddptrain's on $(nvidia-smi -L | head -1))"
  ctest --test-dir "$build" --output-on-failure -j4 -E '^ddptrain_cli_' | tail -15
fi

if stage profile; then
  {
    nvidia-smi -L
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    nvcc --version | tail -2
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'
    c++ --version | head -1
    uname -r
  } >"$out/env.txt" 2>&1
  "$ddptrain" --model base --write-layout "$out/layout.json"
  for p in fp32 bf16; do
    step "profile $p: distilbert-base over the auto grid"
    "$ddptrain" "${common[@]}" --precision "$p" --profile --out "$out/profile-$p" | tail -3
  done
fi

if stage calibrate; then
  ddpsim=${DDPSIM:-build/release/ddpsim}
  device=$(sed -n 's/^# device=//p' "$out/profile-fp32/steps.csv")
  for p in fp32 bf16; do
    model=$model_fp32 suffix=""
    [[ $p == bf16 ]] && model=$model_bf16 suffix=-bf16
    step "calibrate $p -> $model"
    "$ddpsim" calibrate "$out/profile-$p/steps.csv" --base "$out/layout.json" --name "$gpu-distilbert-measured$suffix" \
      --gpu "$device, $p" --out "$model" --residuals "$out/residuals-$p.csv" | tee "$out/calibrate-$p.txt"
  done
fi

if stage run; then
  emu=(--emulate-ranks 4 --log-every 400)
  for policy in "${policies[@]}"; do
    part policies || break
    step "run: $policy, $steps steps, 4 emulated ranks"
    extra=()
    [[ $policy == *cost=model* ]] && extra=(--perf-model "$model_fp32")
    "$ddptrain" "${common[@]}" "${extra[@]}" "${emu[@]}" --policy "$policy" --steps "$steps" \
      --out "$out/emulated4/$(name "$policy")" | grep -E '^step|wrote'
  done
  for policy in static minmax:cost=tokens; do
    part bf16 || break
    step "run: $policy, bf16, $steps steps, 4 emulated ranks"
    "$ddptrain" "${common[@]}" "${emu[@]}" --precision bf16 --policy "$policy" --steps "$steps" \
      --out "$out/bf16/$(name "$policy")" | grep -E '^step|wrote'
  done
  large=(--global-batch 256 --max-length 128 --steps "${LARGE_STEPS:-$((steps / 2))}")
  for policy in static minmax:cost=tokens:buffer=128; do
    part large || break
    step "run: $policy, B=256, max_length 128, ${large[-1]} steps, 4 emulated ranks"
    "$ddptrain" "${data[@]}" "${emu[@]}" "${large[@]}" --policy "$policy" --out "$out/large/$(name "$policy")" |
      grep -E '^step|wrote'
  done
  if part nccl; then
    step "run: NCCL at world size 1"
    "$ddptrain" "${common[@]}" --backend nccl --steps 100 --log-every 50 --out "$out/nccl-1rank" | grep -E '^step|wrote'
  fi
  if part probe; then
    step "run: --bmax probe (max_length 256), 4 emulated ranks"
    "$ddptrain" "${common[@]}" "${emu[@]}" --bmax probe --policy minmax:cost=tokens --steps 50 \
      --out "$out/bmax-probe" | grep -E 'probe|^step|wrote'
  fi
fi

if stage peer; then
  read -r -a peer_precisions <<<"${PEER:-fp32 bf16}"
  for p in "${peer_precisions[@]}"; do
    for policy in static minmax; do
      step "peer: PyTorch eager, $policy, $p"
      PYTHONUNBUFFERED=1 python3 bench/peer_pytorch.py --data "$shared/sst2/train.tsv" \
        --vocab "$shared/bert-base-uncased/vocab.txt" --policy "$policy" --precision "$p" --steps "$steps" \
        --out "$out/peer/$p-$policy" | grep -v '^{'
    done
  done
fi

if stage validate; then
  ddpsim=${DDPSIM:-build/release/ddpsim}
  # What --emulate-ranks charges: a ring of 10 GB/s and 10 us per step, buckets after backward.
  emulated_platform=(--set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0
                     --set training.overlap=false)
  for setting in emulated4 bf16 large; do
    model=$model_fp32
    [[ $setting == bf16 ]] && model=$model_bf16
    for run in "$out/$setting"/*/; do
      run=${run%/}
      [[ $(basename "$run") == static ]] && continue
      dir=$out/validation/$setting/$(basename "$run")
      mkdir -p "$(dirname "$dir")"
      "$ddpsim" validate --measured "$run/steps.csv" --baseline "$out/$setting/static/steps.csv" \
        --model "$model" "${emulated_platform[@]}" --out "$dir" >"$dir.txt"
      echo "-- $setting, $(basename "$run")"
      # Paths relative to the repository: the outputs do not depend on where it was cloned.
      sed -i "s|$PWD/||g" "$dir.txt" "$dir"/*.json
      sed -n '/^steady state/,/^$/p' "$dir.txt"
    done
  done
fi
step "done"
