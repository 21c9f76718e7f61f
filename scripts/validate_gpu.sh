#!/usr/bin/env bash
# The GPU validation campaigns (docs/validation-gpu.md). Stages, in order; the ones marked
# (GPU) run on the GPU machine, the others where ddpsim is built (SimGrid):
#   carry          the folder a GPU machine without network needs ($CARRY, default gpu-carry,
#                  git-ignored): the .deb dependencies and SST-2 (train, dev) with the vocab
#   build (GPU)    ddptrain and its tests against the machine's PyTorch LibTorch, deps from .deb
#                  files in $DEBS unpacked into $DEPS; skipped when $BUILD/ddptrain exists
#   test (GPU)     the unit tests, the trainer's on CUDA
#   profile (GPU)  the layout, then ddptrain --profile of distilbert-base, fp32 and bf16
#   calibrate      ddpsim calibrate of each profile -> models/$GPU-distilbert-measured{,-bf16}.json
#   run (GPU)      campaign 1: the study's setting (B=48, K=64, 4 emulated ranks) under every
#                  policy, one run each; B=256 at max_length 128; bf16; NCCL at world size 1; probe
#   prereg (GPU)   campaign 2: the registered setting (traces/$GPU/prereg/prediction.json), its
#                  policies trained in turn, then a profile of its (b, L) range
#   turns (GPU)    campaign 2: the study's setting, static, minmax and kk trained in turn
#   bf16pad (GPU)  campaign 2: bf16 static and minmax in turn, --pad-to-multiple-of 8
#   optimizer (GPU) campaign 2: ddptrain's AdamW implementations on the study's setting
#   peer (GPU)     bench/peer_pytorch.py (PyTorch eager + Hugging Face DistilBERT), static and
#                  minmax, on the study's setting; its trace through the package's StepTracer
#                  (needs the package the build stage builds)
#   wide (GPU)     campaign 3: fp32 and bf16 profiles over b up to 128, L up to 512 (the
#                  built-in model's measured grid)
#   turns6 (GPU)   campaign 3: the study's setting, all six policies in turn (held-out runs)
#   prereg3 (GPU)  campaign 3's registered setting (traces/$GPU/prereg3): bf16 static and minmax,
#                  each a run of its own, padded to a multiple of 1 and of 16
#   prereg4 (GPU)  campaign 4's registered DistilBERT settings (traces/$GPU/prereg4, prereg4-bf16):
#                  compute-bound fp32 (B=384, log-normal lengths up to 512) and the study's
#                  setting in bf16 padded to a multiple of 8, each one run of its policies in turn
#   prereg5 (GPU)  an H200 registration made from campaign 4's runs (traces/h200/prereg5): the
#                  study's setting in bf16 padded to 8, static,kk,sorted,minmax in turn
#   prereg6 (GPU)  an H200 registration made from campaign 5's runs (traces/h200/prereg6):
#                  compute-bound fp32 at B=256, lengths up to 512, static,minmax,kk,sorted in turn
#   decoder (GPU)  campaign 4's decoders (traces/gpu4/registered/decoder-shapes.json) profiled
#                  through ddpsim.torch.profile() at the registered shapes, their unit jitter
#                  (ddpsim.torch.unit_jitter), a traced run over NCCL at world size 1
#                  (scripts/gpu_decoder.py), and the Python package's CUDA
#                  test (python/tests/test_cuda.py); needs the package built by the build stage
#   pack (GPU)     a campaign's folders and logs into $PACK (one archive, to bring back);
#                  CAMPAIGN=3 packs the third's
#   validate       ddpsim validate of each run against its model, static as the baseline
#                  (KEEP_MODELS=1: against the committed models, not refitted ones)
#
#   STAGES=carry scripts/validate_gpu.sh                               # here, once
#   STAGES="build test prereg turns pack" scripts/validate_gpu.sh     # GPU, call (a)
#   STAGES="build bf16pad optimizer peer pack" scripts/validate_gpu.sh  # GPU, call (b)
#   STAGES=validate scripts/validate_gpu.sh                            # where ddpsim is built
#   STAGES="build test wide turns6 pack" CAMPAIGN=3 scripts/validate_gpu.sh  # GPU, campaign 3
#   STAGES="build test prereg3 pack" CAMPAIGN=3b scripts/validate_gpu.sh     # GPU, its second call
#   STAGES="build test prereg4 pack" CAMPAIGN=4 scripts/validate_gpu.sh      # GPU, campaign 4
#   STAGES="build decoder pack" CAMPAIGN=4d scripts/validate_gpu.sh          # GPU, campaign 4's decoders
#   STAGES="build prereg5 peer pack" CAMPAIGN=5 GPU=h200 PEER=fp32 PEER_OUT=traces/h200/peer5 \
#     scripts/validate_gpu.sh                                                # campaign 5 (H200)
#   STAGES="build prereg6 pack" CAMPAIGN=6 GPU=h200 scripts/validate_gpu.sh  # an H200's next call
#
# How much: STEPS (800 a run of campaign 1), RUNS (the run stage's parts: policies bf16 large
# nccl probe), LARGE_STEPS (STEPS/2), PEER (fp32 bf16), PEER_STEPS (STEPS), PEER_OUT ($TRACES/peer), PREREG_STEPS (300 per policy),
# TURN_STEPS (500 per policy), TURN6_STEPS (300), WIDE_PRECISIONS, WIDE_BATCHES, WIDE_LENGTHS,
# COST_MODEL (minmax:cost=model's, default the fp32 measured model), MODEL (base; tiny for a rehearsal on CPU). Where: SHARED
# (../shared/data), TRACES (traces/$GPU, GPU=h100), BUILD (build-gpu), PACK (campaign2.tar.gz).
# A rehearsal on CPU (the plumbing, not the figures), with Debian's LibTorch:
#   STAGES="build prereg turns bf16pad optimizer pack" BUILD=build/release MODEL=tiny \
#     PREREG_STEPS=6 TURN_STEPS=6 TRACES=/tmp/rehearsal scripts/validate_gpu.sh
#   STAGES="decoder pack" CAMPAIGN=4d BUILD=build/release DECODER_ARGS="--device cpu --tiny" \
#     TRACES=/tmp/rehearsal scripts/validate_gpu.sh
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
  [[ $s =~ ^(carry|build|test|profile|calibrate|run|prereg|turns|bf16pad|optimizer|peer|wide|turns6|prereg3|prereg4|prereg5|prereg6|decoder|pack|validate)$ ]] ||
    { echo "validate_gpu: STAGES: unknown stage '$s' (carry build test profile calibrate run prereg turns bf16pad optimizer peer wide turns6 prereg3 prereg4 prereg5 prereg6 decoder pack validate)" >&2; exit 2; }
done
if stage carry; then
  # What the GPU machine cannot download; the GPU calls then take SHARED=$carry/data DEBS=$carry/debs.
  carry=${CARRY:-gpu-carry}
  mkdir -p "$carry/debs" "$carry/data/sst2" "$carry/data/bert-base-uncased"
  (cd "$carry/debs" && apt-get download libboost-program-options1.74.0 libboost-program-options1.74-dev \
    libboost1.74-dev nlohmann-json3-dev doctest-dev libutf8proc-dev libutf8proc2 pkgconf pkgconf-bin libpkgconf3 \
    pybind11-dev)
  cp "$shared/sst2/train.tsv" "$shared/sst2/dev.tsv" "$carry/data/sst2/"
  cp "$shared/bert-base-uncased/vocab.txt" "$carry/data/bert-base-uncased/"
  echo "validate_gpu: $carry holds $(du -sh "$carry" | cut -f1); name it in the GPU call's carry"
fi
for f in "$shared/sst2/train.tsv" "$shared/bert-base-uncased/vocab.txt"; do
  [[ -f $f ]] || { echo "validate_gpu: $f is missing (set SHARED to the shared data folder)" >&2; exit 1; }
done
t0=$SECONDS
step() { echo; echo "== +$((SECONDS - t0))s $*"; }
name() { echo "${1//[:=]/-}"; }   # minmax:cost=model -> minmax-cost-model
policies=(static minmax:cost=tokens minmax:cost=model kk sorted token_budget)
model=${MODEL:-base}
data=(--model "$model" --seed 0 --data "$shared/sst2/train.tsv" --vocab "$shared/bert-base-uncased/vocab.txt")
common=("${data[@]}" --max-length 256 --global-batch 48)   # the study's setting
ddptrain=$build/ddptrain
mkdir -p "$out"
export LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

if stage build && [[ ! -x $ddptrain ]]; then
  step "build: ddptrain against $(python3 -c 'import torch; print("PyTorch", torch.__version__)')"
  mkdir -p "$deps"
  for f in "$debs"/*.deb; do dpkg -x "$f" "$deps"; done
  # The .pc files name /usr; point them at the private prefix.
  sed -i "s|^prefix=/usr\$|prefix=$deps/usr|" "$deps"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc
  export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig
  command -v pkg-config >/dev/null || export PKG_CONFIG=$deps/usr/bin/pkgconf
  torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
  # The Python package (python/) for the python3 that has torch, where its headers are there.
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDDPSIM_BUILD_SIM=OFF -DPython_EXECUTABLE="$(command -v python3)" \
    -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" -DBoost_NO_SYSTEM_PATHS=ON -DBOOST_ROOT="$deps/usr" \
    -DDDPSIM_SHARED_DATA="$(realpath "$shared")" >"$build.configure.log" 2>&1 ||
    { tail -12 "$build.configure.log"
      echo "validate_gpu: configuring failed (above); again without the Python package, for the trainer" >&2
      cmake "$build" -DDDPSIM_BUILD_PYTHON=OFF >>"$build.configure.log" 2>&1 || { tail -40 "$build.configure.log"; exit 1; }; }
  cmake --build "$build" -j"$(nproc)" 2>&1 | grep -E 'error|Error|warning: unused|Built target ddptrain$' || true
  if [[ ! -x $ddptrain ]]; then  # the fused AdamW kernel's call is the one part not compiled on CPU
    echo "validate_gpu: the build failed; again without the fused AdamW (-DDDPTRAIN_FUSED_ADAMW=OFF)" >&2
    cmake "$build" -DDDPTRAIN_FUSED_ADAMW=OFF >>"$build.configure.log" 2>&1
    cmake --build "$build" -j"$(nproc)" 2>&1 | grep -E 'error|Error|Built target ddptrain$' || true
  fi
  [[ -x $ddptrain ]] || { echo "validate_gpu: the build made no $ddptrain" >&2; exit 1; }
fi

if stage test; then
  step "test: the unit tests (ddptrain's on $(nvidia-smi -L | head -1))"
  timeout "${TEST_TIMEOUT:-300}" ctest --test-dir "$build" --output-on-failure -j4 -E '^ddptrain_cli_' | tail -25 ||
    echo "validate_gpu: the tests failed or ran past ${TEST_TIMEOUT:-300} s (above); the runs go on"
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

# Campaign 2 runs every policy of a setting in turn (one ddptrain run, a step of each policy in
# turn), so that the machine's drift falls on all of them alike.
emu=(--emulate-ranks 4)
supports() { [[ $("$ddptrain" --help) == *"--$1 "* ]]; }
# Whether the Python package the build stage built imports (its error into the file $1).
package_imports() { PYTHONPATH=$build/python python3 -c 'import ddpsim.torch' 2>"$1"; }
failed() { echo "validate_gpu: $1 failed (above); the other stages go on" >&2; }
environment() {
  local env=$out/env-campaign${CAMPAIGN:-2}.txt
  [[ -f $env ]] && return
  {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || echo "no nvidia-smi: CPU"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' || true
    c++ --version | head -1
    nproc
    uname -r
  } >"$env" 2>&1
}

if stage prereg; then
  environment
  prereg=$out/prereg
  # The registered config is the one place the setting is written: the runs read it there.
  registered() { python3 -c "import json; print(json.load(open('traces/$gpu/prereg/prediction.json'))['run']['$1'])"; }
  hist=$(registered lengths) batch=$(registered global_batch) policy=$(registered policies)
  prereg_steps=${PREREG_STEPS:-$(registered steps)}
  setting=(--model "$model" --seed 0 --synthetic-lengths "$hist" --synthetic-samples "$(registered samples)"
           --max-length "$(registered max_length)" --global-batch "$batch")
  # The model's optimizer figure is LibTorch's per-parameter AdamW: the runs use that one too.
  optimizer=()
  supports optimizer-impl && optimizer=(--optimizer-impl "$(registered optimizer_impl)")
  step "prereg: $policy in turn, B=$batch, $prereg_steps steps each, 4 emulated ranks"
  "$ddptrain" "${setting[@]}" "${emu[@]}" "${optimizer[@]}" --emulate-link-GBps "$(registered emulate_link_GBps)" \
    --log-every 100 --policy "$policy" --steps "$prereg_steps" \
    --out "$prereg/runs" | grep -E 'step|wrote' || failed "the registered runs"
  step "prereg: a profile of the setting's (b, L) range, for a model fitted after the fact"
  "$ddptrain" "${setting[@]}" --profile --profile-batches "$(registered profile_batches)" \
    --profile-lengths "$(registered profile_lengths)" --profile-warmup 2 --profile-reps 3 \
    --out "$prereg/profile-fp32" | tail -2 || failed "the registered setting's profile"
fi

if stage turns; then
  environment
  step "turns: static,minmax:cost=tokens,kk in turn, the study's setting, ${TURN_STEPS:-500} steps each"
  "$ddptrain" "${common[@]}" "${emu[@]}" --log-every 250 --policy static,minmax:cost=tokens,kk \
    --steps "${TURN_STEPS:-500}" --out "$out/turns/fp32" | grep -E 'step|wrote' || failed "the study's setting in turn"
fi

if stage bf16pad; then
  environment
  pad=() folder=bf16
  if supports pad-to-multiple-of; then pad=(--pad-to-multiple-of 8) folder=bf16-pad8; fi
  step "bf16pad: static,minmax:cost=tokens in turn, bf16 ${pad[*]}, ${TURN_STEPS:-500} steps each"
  "$ddptrain" "${common[@]}" "${emu[@]}" --log-every 250 --precision bf16 "${pad[@]}" \
    --policy static,minmax:cost=tokens --steps "${TURN_STEPS:-500}" --out "$out/turns/$folder" | grep -E 'step|wrote' || failed "bf16 in turn"
fi

if stage optimizer; then
  environment
  impls=(default)
  supports optimizer-impl && impls=(per-param foreach fused)
  for impl in "${impls[@]}"; do
    step "optimizer: AdamW $impl, static, the study's setting, ${OPT_STEPS:-150} steps"
    extra=()
    [[ $impl != default ]] && extra=(--optimizer-impl "$impl")
    "$ddptrain" "${common[@]}" "${emu[@]}" "${extra[@]}" --log-every 150 --policy static --steps "${OPT_STEPS:-150}" \
      --out "$out/optimizer/$impl" 2>&1 | grep -E 'step|wrote|optimizer' || failed "AdamW $impl"
  done
fi

if stage peer && ! package_imports /dev/null; then
  echo "validate_gpu: the Python package does not import from $build/python, and the peer traces through it:" \
    "the peer stage is skipped" >&2
elif stage peer; then
  read -r -a peer_precisions <<<"${PEER:-fp32 bf16}"
  for p in "${peer_precisions[@]}"; do
    for policy in static minmax; do
      step "peer: PyTorch eager, $policy, $p"
      PYTHONUNBUFFERED=1 PYTHONPATH=$build/python python3 bench/peer_pytorch.py --data "$shared/sst2/train.tsv" \
        --vocab "$shared/bert-base-uncased/vocab.txt" --policy "$policy" --precision "$p" --steps "${PEER_STEPS:-$steps}" \
        --out "${PEER_OUT:-$out/peer}/$p-$policy" | grep -v '^{' || failed "the peer, $policy, $p"
    done
  done
fi

# Campaign 3 measures what the honest built-in model and the held-out targets need: a grid
# wide enough for the built-in to stand on measurements, and every policy trained in turn.
if stage wide; then
  environment
  for p in ${WIDE_PRECISIONS:-fp32 bf16}; do
    step "wide: profile $p, b ${WIDE_BATCHES:=1,2,4,8,16,24,32,48,64,96,128}, L ${WIDE_LENGTHS:=16,32,48,64,96,128,192,256,384,512}"
    timeout "${WIDE_TIMEOUT:-240}" "$ddptrain" "${data[@]}" --max-length 512 --global-batch 128 --precision "$p" --profile \
      --profile-batches "$WIDE_BATCHES" --profile-lengths "$WIDE_LENGTHS" --profile-reps 3 \
      --out "$out/wide/profile-$p" | tail -2 || failed "the wide $p profile"
  done
fi

if stage turns6; then
  environment
  six=$(IFS=,; echo "${policies[*]}")
  step "turns6: $six in turn, the study's setting, ${TURN6_STEPS:-300} steps each"
  "$ddptrain" "${common[@]}" "${emu[@]}" --perf-model "${COST_MODEL:-$model_fp32}" --log-every 300 --policy "$six" \
    --steps "${TURN6_STEPS:-300}" --out "$out/turns6/fp32" | grep -E 'step|wrote' || failed "the six policies in turn"
fi

if stage prereg3; then
  environment
  # The registered model's optimizer is LibTorch's per-parameter AdamW: the runs use that one too.
  for pad in 1 16; do
    for policy in static minmax:cost=tokens; do
      step "prereg3: $policy, bf16, --pad-to-multiple-of $pad, ${PREREG3_STEPS:-300} steps, a run of its own"
      "$ddptrain" "${common[@]}" "${emu[@]}" --precision bf16 --optimizer-impl per-param --pad-to-multiple-of "$pad" \
        --log-every 300 --policy "$policy" --steps "${PREREG3_STEPS:-300}" \
        --out "$out/prereg3/runs/pad$pad/$(name "$policy")" | grep -E 'step|wrote' || failed "prereg3 $policy pad $pad"
    done
  done
fi

if stage prereg4; then
  environment
  # The flags are the registered configs' (a run of another setting is refused when scored);
  # the fp32 model's optimizer is ddptrain's default AdamW, the bf16 one's the per-parameter.
  step "prereg4: compute-bound fp32, B=384, up to 512 tokens, ${PREREG4_STEPS:-50} steps a policy, in turn"
  "$ddptrain" --model "$model" --seed 0 --synthetic-lengths traces/lognormal-96-0.6-512-lengths.json \
    --synthetic-samples 20015 --max-length 512 --global-batch 384 "${emu[@]}" --log-every 25 \
    --policy static,minmax:cost=tokens:buffer=128,kk --steps "${PREREG4_STEPS:-50}" \
    --out "$out/prereg4/runs" | grep -E 'step|wrote' || failed "prereg4 compute-bound"
  step "prereg4: the study's setting, bf16, padded to a multiple of 8, ${PREREG4_BF16_STEPS:-300} steps a policy"
  "$ddptrain" "${common[@]}" "${emu[@]}" --precision bf16 --pad-to-multiple-of 8 --optimizer-impl per-param \
    --log-every 150 --policy static,minmax:cost=tokens --steps "${PREREG4_BF16_STEPS:-300}" \
    --out "$out/prereg4-bf16/runs" | grep -E 'step|wrote' || failed "prereg4 bf16"
fi

if stage prereg5; then
  environment
  # The registered config's flags (traces/h200/prereg5): prereg4-bf16's setting, four policies.
  step "prereg5: the study's setting, bf16, padded to 8, static,kk,sorted,minmax in turn, ${PREREG5_STEPS:-300} steps each"
  "$ddptrain" "${common[@]}" "${emu[@]}" --precision bf16 --pad-to-multiple-of 8 --optimizer-impl per-param \
    --log-every 150 --policy static,kk,sorted,minmax:cost=tokens --steps "${PREREG5_STEPS:-300}" \
    --out "$out/prereg5/runs" | grep -E 'step|wrote' || failed "prereg5"
fi

if stage prereg6; then
  environment
  # The registered config's flags (traces/h200/prereg6): prereg4's compute-bound setting at B=256, four policies.
  step "prereg6: compute-bound fp32, B=256, up to 512 tokens, ${PREREG6_STEPS:-50} steps a policy, in turn"
  "$ddptrain" --model "$model" --seed 0 --synthetic-lengths traces/lognormal-96-0.6-512-lengths.json \
    --synthetic-samples 20015 --max-length 512 --global-batch 256 "${emu[@]}" --log-every 25 \
    --policy static,minmax:cost=tokens:buffer=128,kk,sorted --steps "${PREREG6_STEPS:-50}" \
    --out "$out/prereg6/runs" | grep -E 'step|wrote' || failed "prereg6"
fi

if stage decoder; then
  environment
  if package_imports "$out/decoder-import.txt"; then
    step "decoder: the Python package's CUDA test"
    mkdir -p "$out/decoder"
    rc=0
    PYTHONPATH=$build/python timeout "${TEST_TIMEOUT:-300}" python3 python/tests/test_cuda.py \
      >"$out/decoder/cuda-test.txt" 2>&1 || rc=$?
    tail -8 "$out/decoder/cuda-test.txt"
    [[ $rc == 77 ]] && echo "validate_gpu: the CUDA test skipped itself: this python3's torch sees no CUDA device" >&2
    [[ $rc != 0 && $rc != 77 ]] && failed "the CUDA test"
    step "decoder: the registered decoders profiled at their shapes, then a traced NCCL run"
    read -r -a decoder_args <<<"${DECODER_ARGS:-}"
    PYTHONPATH=$build/python python3 scripts/gpu_decoder.py --out "$out/decoder" "${decoder_args[@]}" 2>&1 |
      grep -E '^gpu_decoder|Error|error' || failed "the decoder stage"
  else
    echo "validate_gpu: the Python package does not import from $build/python ($(tail -1 "$out/decoder-import.txt")):" \
      "the build needs pybind11 (the carry's .deb) and this python3's headers; the decoder stage is skipped" >&2
  fi
fi

if stage pack; then
  # A campaign's outputs as one archive (the GPU machine sends back a few files, not folders).
  pack=${PACK:-$out/campaign${CAMPAIGN:-2}.tar.gz}
  parts=()
  members=(prereg/runs prereg/profile-fp32 turns optimizer peer2 env-campaign2.txt campaign2-log-a.txt campaign2-log-b.txt)
  [[ ${CAMPAIGN:-2} == 3 ]] && members=(wide turns6 env-campaign3.txt)
  [[ ${CAMPAIGN:-2} == 3b ]] && members=(prereg3/runs env-campaign3b.txt)
  [[ ${CAMPAIGN:-2} == 4 ]] && members=(prereg4/runs prereg4-bf16/runs env-campaign4.txt)
  [[ ${CAMPAIGN:-2} == 4d ]] && members=(decoder env-campaign4d.txt)
  [[ ${CAMPAIGN:-2} == 5 ]] && members=(prereg5/runs peer5 env-campaign5.txt)
  [[ ${CAMPAIGN:-2} == 6 ]] && members=(prereg6/runs env-campaign6.txt)
  for d in "${members[@]}"; do
    [[ -e $out/$d ]] && parts+=("$d")
  done
  tar czf "$pack" -C "$out" "${parts[@]}"
  step "pack: ${parts[*]} -> $pack ($(du -h "$pack" | cut -f1))"
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
if stage validate && [[ -d $out/prereg/runs ]]; then
  # Campaign 2. Each run's optimizer was LibTorch's per-parameter AdamW (the registered runs,
  # as the model's 8.3 ms) or the fused kernel (the rest, ddptrain's default on CUDA): the
  # models say which, from a run that is not validated (optimizer/fused) or the first profile.
  models2=$out/validation2/models
  mkdir -p "$models2"
  ddpsim=${DDPSIM:-build/release/ddpsim}
  device=$(sed -n 's/^# device=//p' "$out/prereg/profile-fp32/steps.csv")
  if [[ ${KEEP_MODELS:-0} != 1 || ! -f $models2/prereg-posthoc.json ]]; then
  "$ddpsim" calibrate "$out/prereg/profile-fp32/steps.csv" --base "$out/layout.json" \
    --name "$gpu-distilbert-measured-b64-L256" --gpu "$device, fp32" --out "$models2/prereg-posthoc.json" \
    --residuals "$models2/prereg-posthoc-residuals.csv" >"$models2/prereg-posthoc-calibrate.txt"
  python3 - "$models2" "$model_fp32" "$model_bf16" "$out/optimizer/fused/steps.csv" <<'PY'
import csv, json, statistics, sys
folder, fp32, bf16, fused = sys.argv[1:]
rows = [r for r in csv.DictReader(l for l in open(fused) if not l.startswith("#")) if int(r["step"]) >= 20]
fused_ms = statistics.median(float(r["opt_ms"]) for r in rows)
def write(path, base, optimizer_ms, why):
    m = json.load(open(base))
    m["optimizer_ms"] = optimizer_ms
    m["source"] += "; optimizer_ms " + why
    json.dump(m, open(path, "w"), indent=2)
per_param = json.load(open(fp32))["optimizer_ms"]
write(f"{folder}/prereg-posthoc.json", f"{folder}/prereg-posthoc.json", per_param,
      f"from {fp32} (per-parameter AdamW, as the registered runs; this profile stepped the fused kernel)")
for name, base in (("fp32-fused", fp32), ("bf16-fused", bf16)):
    write(f"{folder}/{name}.json", base, fused_ms,
          f"{fused_ms:.3f}: the fused AdamW's median from step 20 of {fused} (the runs' optimizer)")
PY
  fi
  link50=(--set platform.link_GBps=50 --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)
  link10=(--set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)
  validate2() {  # NAME RUNS_FOLDER MODEL PLATFORM...
    local name=$1 runs=$2 model=$3
    shift 3
    for run in "$runs"/*/; do
      run=${run%/}
      [[ $(basename "$run") == static ]] && continue
      local dir=$out/validation2/$name/$(basename "$run")
      mkdir -p "$(dirname "$dir")"
      "$ddpsim" validate --measured "$run/steps.csv" --baseline "$runs/static/steps.csv" --model "$model" "$@" \
        --out "$dir" >"$dir.txt"
      sed -i "s|$PWD/||g" "$dir.txt" "$dir"/*.json
      echo "-- $name, $(basename "$run")"
      grep -E '^gain of' "$dir.txt" | head -1
    done
  }
  validate2 prereg-registered "$out/prereg/runs" "$model_fp32" "${link50[@]}"
  validate2 prereg-posthoc "$out/prereg/runs" "$models2/prereg-posthoc.json" "${link50[@]}"
  validate2 prereg-repeat-registered "$out/prereg/repeat" "$model_fp32" "${link50[@]}"
  validate2 prereg-repeat-posthoc "$out/prereg/repeat" "$models2/prereg-posthoc.json" "${link50[@]}"
  validate2 turns-fp32 "$out/turns/fp32" "$models2/fp32-fused.json" "${link10[@]}"
  validate2 turns-bf16-pad8 "$out/turns/bf16-pad8" "$models2/bf16-fused.json" "${link10[@]}"
fi
if stage validate && [[ -d $out/turns6 ]]; then
  # Campaign 3 and the held-out targets: each model from a profile plus one static run
  # (--training), validated on the runs it never saw.
  ddpsim=${DDPSIM:-build/release/ddpsim}
  v3=$out/validation3
  mkdir -p "$v3/models"
  link10=(--set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0 --set training.overlap=false)
  held_out() {  # NAME PROFILE RUNS_FOLDER: calibrate on PROFILE + RUNS/static, validate the rest
    local name=$1 profile=$2 runs=$3
    [[ ${KEEP_MODELS:-0} == 1 && -f $v3/models/$name.json ]] ||
      "$ddpsim" calibrate "$profile" --training "$runs/static/steps.csv" --base "$out/layout.json" \
        --name "$gpu-$name" --out "$v3/models/$name.json" >"$v3/models/$name-calibrate.txt"
    for run in "$runs"/*/; do
      run=${run%/}
      [[ $(basename "$run") == static ]] && continue
      local dir=$v3/$name/$(basename "$run")
      mkdir -p "$(dirname "$dir")"
      "$ddpsim" validate --measured "$run/steps.csv" --baseline "$runs/static/steps.csv" --model "$v3/models/$name.json" \
        "${link10[@]}" --out "$dir" >"$dir.txt"
      sed -i "s|$PWD/||g" "$dir.txt" "$dir"/*.json
      echo "-- $name, $(basename "$run")"
      grep -E '^gain of' "$dir.txt" | head -1
    done
  }
  held_out turns6 "$out/wide/profile-fp32/steps.csv" "$out/turns6/fp32"
  held_out emulated4 "$out/profile-fp32/steps.csv" "$out/emulated4"
  held_out bf16 "$out/profile-bf16/steps.csv" "$out/bf16"
  held_out large "$out/profile-fp32/steps.csv" "$out/large"
  sed -i "s|$PWD/||g" "$v3"/models/*.json
fi
step "done"
