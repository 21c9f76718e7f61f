#!/usr/bin/env bash
# The CPU validation campaign (docs/validation-cpu.md), from nothing: profile the reduced
# DistilBERT (`--model small`), calibrate, train every policy for real on SST-2 — (a) two Gloo
# ranks pinned to one core each, (b) four ranks emulated on one core — and validate each run
# against its model, with static as the baseline. A core computes slower while the other one
# works (shared caches and memory bandwidth), so each setting has the model of a profile taken
# as it runs: (a) from both ranks profiling at once (with their allreduce and interference),
# (b) from one process on one core; each setting's runs follow its profile at once. The runs time
# that grid again between their turns (--profile-alongside), and each run is validated against
# both models: the one profiled before the runs, and the one of the runs' own minutes. Builds
# what is missing; needs ../shared/data (SST-2, the uncased vocab). Keep the machine otherwise
# idle: every figure is a timing.
#
#   scripts/validate_cpu.sh                      # ~33 minutes on a 2-core machine
#   STEPS=20 OUT=/tmp/q MODELS=/tmp/q PROFILE_OPTS="--profile-reps 2" \
#     ALONGSIDE_OPTS="--profile-batches 4,12 --profile-lengths 16,48" scripts/validate_cpu.sh  # a quick look
#   SETTINGS=2ranks scripts/validate_cpu.sh      # one setting again (its profile, model, runs)
#   STAGES="calibrate validate" scripts/validate_cpu.sh  # refit the committed profiles, validate the committed runs
#   STAGES="repeat-run repeat-validate" scripts/validate_cpu.sh  # (a) twice more, with a profile of that session
#   STAGES="order-run order-validate" scripts/validate_cpu.sh  # (a)'s kk, then static: does the run order matter?
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${SHARED:-../shared/data}
out=${OUT:-traces/cpu}
steps=${STEPS:-300}
build=${BUILD:-build/release}
models=${MODELS:-models}
model_a=$models/cpu-distilbert-small-2ranks.json
model_b=$models/cpu-distilbert-small-1core.json
read -r -a profile_opts <<<"${PROFILE_OPTS:-}"
read -r -a alongside_opts <<<"${ALONGSIDE_OPTS:-}"
policies=(static minmax:cost=tokens minmax:cost=model kk sorted token_budget)
read -r -a settings <<<"${SETTINGS:-2ranks emulated4}"
read -r -a stages <<<"${STAGES:-profile calibrate run validate}"
wants() { [[ " ${settings[*]} " == *" $1 "* ]]; }
stage() { [[ " ${stages[*]} " == *" $1 "* ]]; }
for s in "${settings[@]}"; do [[ $s == 2ranks || $s == emulated4 ]] || { echo "validate_cpu: SETTINGS: unknown setting '$s' (2ranks, emulated4)" >&2; exit 2; }; done
for s in "${stages[@]}"; do [[ $s =~ ^(profile|calibrate|run|validate|repeat-run|repeat-validate|order-run|order-validate)$ ]] || { echo "validate_cpu: STAGES: unknown stage '$s' (profile, calibrate, run, validate, repeat-run, repeat-validate, order-run, order-validate)" >&2; exit 2; }; done
# A number from a model file: the value after "KEY": (the key's own letters stay out of it).
model_value() { sed -n "s/.*\"$2\": *\([-+0-9.eE]*\).*/\1/p" "$1" | head -1; }

for f in "$shared/sst2/train.tsv" "$shared/bert-base-uncased/vocab.txt"; do
  [[ -f $f ]] || { echo "validate_cpu: $f is missing (set SHARED to the shared data folder)" >&2; exit 1; }
done
if [[ ! -x $build/ddptrain || ! -x $build/ddpsim ]]; then
  scripts/setup.sh
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j"$(nproc)" --target ddptrain ddpsim
fi
ddptrain=$build/ddptrain
ddpsim=$build/ddpsim
common=(--model small --max-length 128 --threads 1 --global-batch 48 --seed 0
        --data "$shared/sst2/train.tsv" --vocab "$shared/bert-base-uncased/vocab.txt")
name() { echo "${1//[:=]/-}"; }   # minmax:cost=model -> minmax-cost-model
step() { echo; echo "== $(date +%T) $*"; }
mkdir -p "$out"

cpu="CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
stage profile && "$ddptrain" --model small --write-layout "$out/layout.json"
all=$(IFS=,; echo "${policies[*]}")
# One setting's profile, model and runs, back to back: the machine's speed drifts over tens of
# minutes, and a profile taken while the other setting ran would miss the minutes of these runs.
# The runs train every policy in one process, a step of each in turn (ddptrain --policy A,B,...),
# so that every policy gets the same minutes; after each turn, one step of the profile grid
# (--profile-alongside): a second profile, of the minutes the runs ran in.
setting_2ranks() {
  if stage profile; then
    step "1. profile (a): two pinned ranks at once, then their allreduce and interference"
    "$ddptrain" "${common[@]}" --profile "${profile_opts[@]}" --nproc-per-node 2 --out "$out/profile-2ranks" |
      grep -v '^weights' | tail -12
  fi
  if stage calibrate; then
    step "2. calibrate (a) -> $model_a"
    "$ddpsim" calibrate "$out/profile-2ranks/steps.csv" --base "$out/layout.json" --name cpu-distilbert-small-2ranks \
      --gpu "$cpu, two ranks of one core each" --out "$model_a" --residuals "$out/residuals-2ranks.csv" |
      tee "$out/calibrate-2ranks.txt"
  fi
  if stage run; then
    step "3. real runs (a), two Gloo ranks: $steps steps of every policy in turn, a profiled step after each turn"
    "$ddptrain" "${common[@]}" --policy "$all" --perf-model "$model_a" --steps "$steps" \
      --nproc-per-node 2 --profile-alongside "${alongside_opts[@]}" --log-every 100 --out "$out/2ranks" |
      grep -E 'step .*/|wrote|interference'
  fi
}
setting_emulated4() {
  if stage profile; then
    step "1. profile (b): one process on one core"
    taskset -c 0 "$ddptrain" "${common[@]}" --profile "${profile_opts[@]}" --out "$out/profile-1core" | tail -2
  fi
  if stage calibrate; then
    step "2. calibrate (b) -> $model_b"
    "$ddpsim" calibrate "$out/profile-1core/steps.csv" --base "$out/layout.json" --name cpu-distilbert-small-1core \
      --gpu "$cpu, one core" --out "$model_b" --residuals "$out/residuals-1core.csv" | tee "$out/calibrate-1core.txt"
  fi
  if stage run; then
    step "3. real runs (b), four ranks emulated on one core: $steps steps of every policy in turn, a profiled" \
      "step after each turn"
    taskset -c 0 "$ddptrain" "${common[@]}" --policy "$all" --perf-model "$model_b" \
      --steps "$steps" --emulate-ranks 4 --profile-alongside "${alongside_opts[@]}" --log-every 100 \
      --out "$out/emulated4" | grep -E 'step .*/|wrote'
  fi
}
for setting in "${settings[@]}"; do "setting_$setting"; done

# The measured ring of a model, as a pcie platform without a shared root complex (a route is two
# links): sets platform to its --set options.
ring_platform() {
  local link step_us
  link=$(model_value "$1" link_GBps)
  step_us=$(model_value "$1" ring_step_latency_us)
  [[ -n $link && -n $step_us ]] ||
    { echo "validate_cpu: $1 has no fitted allreduce (link_GBps, ring_step_latency_us)" >&2; exit 1; }
  platform=(--set platform.link_GBps="$link" --set platform.latency_us="$(awk "BEGIN { print $step_us / 2 }")"
            --set platform.host_GBps=0)
}
# What --emulate-ranks charges: a ring of 10 GB/s and 10 us per step, buckets after backward;
# and its ranks take turns on one core, so a slow spell of the machine falls on all of a step's.
emulated_platform=(--set platform.link_GBps=10 --set platform.latency_us=5 --set platform.host_GBps=0
                   --set training.overlap=false --set simulation.spells=shared)

# ddpsim validate of a run against a baseline under a model and the platform set above, into DIR
# and DIR.txt, with paths relative to the repository (the outputs do not depend on where it was
# cloned); prints the steady-state table. Arguments: DIR MEASURED BASELINE MODEL.
validate_run() {
  mkdir -p "$(dirname "$1")"
  "$ddpsim" validate --measured "$2" --baseline "$3" --model "$4" "${platform[@]}" --out "$1" >"$1.txt"
  sed -i "s|$PWD/||g" "$1.txt" "$1"/*.json
  sed -n '/^steady state/,/^$/p' "$1.txt"
}

# Each setting's runs against a model: the profile's before the runs (validation/), and, where the
# runs timed one, the profile's alongside them (validation-alongside/, its model calibrated here).
if stage validate; then
  step "4. validate, static as the baseline, against the profile before the runs and the one alongside them"
  for setting in "${settings[@]}"; do
    model=$model_a name=cpu-distilbert-small-2ranks gpu="$cpu, two ranks of one core each"
    [[ $setting == emulated4 ]] && model=$model_b name=cpu-distilbert-small-1core gpu="$cpu, one core"
    models=("$model")
    if [[ -f $out/$setting/profile/steps.csv ]]; then
      models+=("$out/$setting/model-alongside.json")
      "$ddpsim" calibrate "$out/$setting/profile/steps.csv" --base "$out/layout.json" --name "$name-alongside" \
        --gpu "$gpu, profiled alongside the runs" --out "${models[1]}" \
        --residuals "$out/$setting/residuals-alongside.csv" >"$out/$setting/calibrate-alongside.txt"
      echo "-- $setting: the profile alongside the runs"
      sed -n '/held-out MAPE/p;/spells/p' "$out/$setting/calibrate-alongside.txt"
    fi
    for m in "${models[@]}"; do
      validation=validation
      [[ $m == "$model" ]] || validation=validation-alongside
      platform=("${emulated_platform[@]}")
      [[ $setting == emulated4 ]] || ring_platform "$m"
      for policy in "${policies[@]:1}"; do
        echo "-- $setting, $policy, against $m"
        validate_run "$out/$validation/$setting/$(name "$policy")" "$out/$setting/$(name "$policy")/steps.csv" \
          "$out/$setting/static/steps.csv" "$m"
      done
    done
  done
fi
# How far two runs of one policy in one session disagree, and how the model of that session's
# own profile does: static, minmax:cost=tokens and token_budget twice more in turn on two Gloo
# ranks, then the 2-rank profile again.
repeats=$out/experiments/repeats
repeated=(static minmax:cost=tokens token_budget)
if stage repeat-run; then
  step "5. repeats: ${repeated[*]} twice more in turn, then a 2-rank profile of this session"
  for rep in 2 3; do
    for policy in "${repeated[@]}"; do
      echo "-- $policy, run $rep"
      "$ddptrain" "${common[@]}" --policy "$policy" --steps "$steps" --nproc-per-node 2 --log-every 100 \
        --out "$repeats/$(name "$policy")-$rep" | grep -E '^step .*/|wrote'
    done
  done
  "$ddptrain" "${common[@]}" --profile "${profile_opts[@]}" --nproc-per-node 2 --out "$repeats/profile-2ranks" |
    grep -v '^weights' | tail -12
fi
if stage repeat-validate; then
  step "6. the repeats against their session's model, each run's static as its baseline"
  model_r=$repeats/model-2ranks.json
  "$ddpsim" calibrate "$repeats/profile-2ranks/steps.csv" --base "$out/layout.json" \
    --name cpu-distilbert-small-2ranks-repeats --gpu "$cpu, two ranks of one core each" --out "$model_r" \
    --residuals "$repeats/residuals-2ranks.csv" | tee "$repeats/calibrate-2ranks.txt"
  ring_platform "$model_r"
  for rep in 2 3; do
    for policy in "${repeated[@]:1}"; do
      echo "-- run $rep, $policy"
      validate_run "$repeats/validation/run$rep/$(name "$policy")" "$repeats/$(name "$policy")-$rep/steps.csv" \
        "$repeats/static-$rep/steps.csv" "$model_r"
    done
  done
fi
# The campaign runs static first, right after the profile. Whether a policy's gain in (a) is the
# policy or the minutes its run took: kk (which pads like static) and then static again, validated
# against the campaign's model (a).
order=$out/experiments/order
if stage order-run; then
  step "7. order: (a) kk, then static"
  for policy in kk static; do
    echo "-- $policy"
    "$ddptrain" "${common[@]}" --policy "$policy" --steps "$steps" --nproc-per-node 2 --log-every 100 \
      --out "$order/$policy" | grep -E '^step .*/|wrote'
  done
fi
if stage order-validate; then
  step "8. order: kk against the static run after it"
  ring_platform "$model_a"
  validate_run "$order/validation" "$order/kk/steps.csv" "$order/static/steps.csv" "$model_a"
fi
step "done: traces and validation under $out, models $model_a and $model_b"
