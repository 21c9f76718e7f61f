# The platform XML files in models/ simulate exactly like the built-in topologies they mirror.
source "$(dirname "$0")/lib.sh"
hosts() { local out=""; for ((g = 0; g < $1; g++)); do out+="${out:+,}\"gpu$g\""; done; echo "[$out]"; }
check() {  # check GPUS XML [--set ...]: built-in (from the remaining --set) vs XML
  local G=$1 xml=$2; shift 2
  expect_ok "$DDPSIM" run --steps 30 --policies static,minmax --set "training.world_size=$G" \
    --set "training.global_batch=$((12 * G))" "$@" --out "$WORK/builtin"
  expect_ok "$DDPSIM" run --steps 30 --policies static,minmax --set "training.world_size=$G" \
    --set "training.global_batch=$((12 * G))" "$@" \
    --set "platform={\"topology\":\"xml\",\"file\":\"$SRC/models/$xml\",\"hosts\":$(hosts "$G")${PER_NODE:+,\"gpus_per_node\":$PER_NODE}}" \
    --out "$WORK/xml"
  diff <(grep -v '^#' "$WORK/builtin/steps.csv") <(grep -v '^#' "$WORK/xml/steps.csv") >/dev/null ||
    fail "$xml does not simulate like its built-in topology ($*)"
}
# The built-in RTX 3090 model carries its own host_GBps (a hypothesis): the file holds the default.
check 4 pcie-4x-rtx3090.xml --set platform.topology=pcie --set platform.host_GBps=40
check 8 nvlink-8x-h100.xml --set platform.topology=nvlink --set simulation.mode=full
PER_NODE=4 check 16 cluster-4x4-h100.xml --set platform.topology=cluster --set platform.gpus_per_node=4 \
  --set platform.nodes_per_leaf=2 --set simulation.algorithm=hierarchical --set simulation.mode=full
# gpus_per_node serves the hierarchical algorithm only: beside another it is refused.
expect_exit 1 'platform.gpus_per_node groups an xml platform.s ranks into nodes for simulation.algorithm "hierarchical"; the ring algorithm does not use it' \
  "$DDPSIM" run --steps 2 \
  --set "platform={\"topology\":\"xml\",\"file\":\"$SRC/models/pcie-4x-rtx3090.xml\",\"hosts\":$(hosts 4),\"gpus_per_node\":2}"
# SimGrid 3.32 loads a user XML platform once per process: what would simulate a second time is
# refused (--replicates, validate --baseline) or left out, saying why (the gains with noise off),
# where it crashed in SimGrid's parser.
xml4="platform={\"topology\":\"xml\",\"file\":\"$SRC/models/pcie-4x-rtx3090.xml\",\"hosts\":$(hosts 4)}"
expect_exit 2 'replicates 2: a user XML platform is loaded once per process' \
  "$DDPSIM" compare --steps 5 --policies static,minmax --replicates 2 --set "$xml4"
expect_ok "$DDPSIM" compare --steps 5 --policies static,minmax --set "$xml4" --out "$WORK/once"
grep -q "gains with the compute noise off are not simulated here" "$WORK/out" || fail "compare on xml: no word on noise off"
expect_ok "$DDPSIM" run --steps 5 --policies static --set "$xml4" --out "$WORK/base"
expect_exit 2 'baseline replays a second trace, and a user XML platform is loaded once per process' \
  "$DDPSIM" validate --measured "$WORK/once/steps.csv" --baseline "$WORK/base/steps.csv" --model rtx3090-distilbert \
  --set "$xml4"
finish
