# Bad simulator input: one clear line naming the file and field, exit 1 or 2, no output left.
source "$(dirname "$0")/lib.sh"
out="$WORK/out_dir"
no_output() { [[ -z $(ls -A "$out" 2>/dev/null) ]] || fail "output left behind after: $*: $(ls -A "$out")"; }
run_bad() { expect_exit "$@" --steps 3 --out "$out" --timeline "$out/t.json"; no_output "${@:3}"; }

printf '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n<platform version="4.1">\n<zone id="z" routing="Full">\n<host id="a" speed="1Gf"\n</zone>\n</platform>\n' >"$WORK/bad.xml"
run_bad 1 "bad.xml: invalid SimGrid platform: .*bad.xml:6" "$DDPSIM" run \
  --set "platform={\"topology\":\"xml\",\"file\":\"$WORK/bad.xml\",\"hosts\":[\"a\",\"b\",\"c\",\"d\"]}"
run_bad 1 'pcie-4x-rtx3090.xml: no host "gpu9" for rank 2 \(platform.hosts\[2\]\)' "$DDPSIM" run \
  --set "platform={\"topology\":\"xml\",\"file\":\"$SRC/models/pcie-4x-rtx3090.xml\",\"hosts\":[\"gpu0\",\"gpu1\",\"gpu9\",\"gpu3\"]}"
run_bad 1 "platform: hosts maps 2 ranks, world_size is 4" "$DDPSIM" run \
  --set "platform={\"topology\":\"xml\",\"file\":\"$SRC/models/pcie-4x-rtx3090.xml\",\"hosts\":[\"gpu0\",\"gpu1\"]}"
# A --set that breaks a section is named, not the --steps that lands in it.
run_bad 1 "with --set training=5, --steps 3: training: expected a JSON object, got number" "$DDPSIM" run --set training=5
# A dataset smaller than the ranks sharing it is named with its source.
printf 'sentence\tlabel\ngood film\t1\n' >"$WORK/one.tsv"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\ngood\nfilm\n' >"$WORK/vocab.txt"
run_bad 1 "data \(GLUE TSV .*one.tsv: 1 sentences\): 1 samples, fewer than the 4 ranks sharing them" "$DDPSIM" run \
  --set data.source=tsv --set "data.path=$WORK/one.tsv" --set "data.vocab=$WORK/vocab.txt"
# Platforms SimGrid aborts on are loaded in a child first: its reason, the file, exit 1.
H='<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n<platform version="4.1">\n'
hosts='<host id="a" speed="1Gf"/><host id="b" speed="1Gf"/><link id="l" bandwidth="1GBps" latency="1us"/>\n'
printf "$H"'<zone id="z" routing="Full">\n'"$hosts"'<route src="a" dst="a"><link_ctn id="l"/></route>\n</zone>\n</platform>\n' >"$WORK/noroute.xml"
printf "$H"'<zone id="z" routing="Full">\n'"$hosts"'<link id="l" bandwidth="1GBps" latency="1us"/>\n</zone>\n</platform>\n' >"$WORK/duplink.xml"
printf "$H"'<zone id="z" routing="Full">\n'"$hosts"'<route src="a" dst="b"><link_ctn id="l"/></route>\n<route src="a" dst="b"><link_ctn id="l"/></route>\n</zone>\n</platform>\n' >"$WORK/duproute.xml"
printf "$H"'<zone id="z" routing="Full">\n'"$hosts"'<link id="l" bandwidth="1GBps" latency="1us" sharing_policy="SPLITDUPLEX"/>\n<route src="a" dst="b"><link_ctn id="l"/></route>\n</zone>\n</platform>\n' >"$WORK/dupsplit.xml"
printf "$H"'<zone id="z" routing="Bogus">\n'"$hosts"'</zone>\n</platform>\n' >"$WORK/badrouting.xml"
# No route at all in a Full zone (SimGrid 3.32 crashes looking it up), and a file without version.
printf "$H"'<zone id="z" routing="Full">\n'"$hosts"'</zone>\n</platform>\n' >"$WORK/noroutes.xml"
printf '<?xml version="1.0"?>\n<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n<platform>\n<zone id="z" routing="Full">\n'"$hosts"'</zone>\n</platform>\n' >"$WORK/noversion.xml"
# refused_platform "FILE.xml: message": a 2-rank run on $WORK/FILE.xml (ranks on hosts a, b) is refused so.
refused_platform() {
  run_bad 1 "$1" "$DDPSIM" run --set training.world_size=2 --set training.global_batch=4 \
    --set "platform={\"topology\":\"xml\",\"file\":\"$WORK/${1%%.xml*}.xml\",\"hosts\":[\"a\",\"b\"]}"
}
for case in 'noroute.xml: no route from host "a" \(rank 0\) to host "b" \(rank 1\)' \
  "duplink.xml: invalid SimGrid platform: Link 'l' declared several times" \
  "duproute.xml: invalid SimGrid platform: The route between a and b already exists" \
  'dupsplit.xml: link "l" is declared twice: as SPLITDUPLEX \(SimGrid.s "l_UP" and "l_DOWN"\) and as a plain link' \
  "badrouting.xml: invalid SimGrid platform: Not a valid model" \
  'noroutes.xml: SimGrid crashed \(.*\) looking up the route from host "a" \(rank 0\) to host "b" \(rank 1\)' \
  'noversion.xml: invalid SimGrid platform: .*the <platform> element has no version attribute'; do
  refused_platform "$case"
done
# Availability that varies over time (SimGrid deadlocks or aborts mid-run when a link goes to
# zero or off) and WIFI links (an abort mid-run) are refused before any step, by file and line.
abc='<host id="a" speed="1Gf"/><host id="b" speed="1Gf"/><link id="l" bandwidth="1GBps" latency="1us"/>\n'
route='<route src="a" dst="b"><link_ctn id="l"/><link_ctn id="w"/></route>\n</zone>\n</platform>\n'
printf "$H"'<zone id="z" routing="Full">\n'"$abc"'<link id="w" bandwidth="1GBps" latency="0us" sharing_policy="WIFI"/>\n'"$route" >"$WORK/wifi.xml"
printf "$H"'<zone id="z" routing="Full">\n'"$abc"'<!-- a state_file="x" in a comment is no profile -->\n<link id="w" bandwidth="1GBps" latency="1us" bandwidth_file="bw.txt"/>\n'"$route" >"$WORK/bwfile.xml"
printf "$H"'<zone id="z" routing="Full">\n'"$abc"'<link id="w" bandwidth="1GBps" latency="1us" state_file="on_off.txt"/>\n'"$route" >"$WORK/statefile.xml"
# A <config> block rescales SimGrid's network model under the calibrated one (and some of its
# values abort SimGrid mid-run); a cluster radical of 10^9 hosts would be built host by host.
printf "$H"'<config><prop id="network/bandwidth-factor" value="0"/></config>\n<zone id="z" routing="Full">\n'"$abc"'<link id="w" bandwidth="1GBps" latency="1us"/>\n'"$route" >"$WORK/config.xml"
printf "$H"'<cluster id="c" prefix="a" suffix="" radical="0-1000000000" speed="1Gf" bw="1GBps" lat="1us"/>\n</platform>\n' >"$WORK/radical.xml"
for case in 'config.xml:4: config: SimGrid.s own settings would change the network model' \
  'radical.xml:4: a cluster radical of more than 100000 hosts' \
  'wifi.xml: link "w" is a WIFI link, which ddpsim does not simulate' \
  'bwfile.xml:7: bandwidth_file: availability that varies over time is not simulated' \
  'statefile.xml:6: state_file: availability that varies over time is not simulated'; do
  refused_platform "$case"
done
# JSON nested 100,000 deep (nlohmann copies values recursively) is refused, not a stack overflow.
python3 -c "n = 100000; print('{\"x\":' + '[' * n + ']' * n + '}')" >"$WORK/deep.json"
run_bad 1 'deep.json: invalid JSON: nested deeper than 64 levels' "$DDPSIM" run "$WORK/deep.json"
# A histogram's own max_length is a truncation length: 2 or more.
printf '{"max_length": -5, "counts": [[5, 100]]}' >"$WORK/hist.json"
run_bad 1 'hist.json: key "max_length" is number -5: expected an integer from 2 to 1000000' "$DDPSIM" run \
  --set "data={\"source\": \"histogram\", \"path\": \"$WORK/hist.json\"}"
# A value out of range is shown with all its digits (%g showed 3.0000001 as 3).
run_bad 1 'noise_sigma is a log-normal σ in \[0, 3\] .*got 3.0000001' "$DDPSIM" run --set simulation.noise_sigma=3.0000001
# A link on a needed route with no bandwidth would stall every transfer: named, with its route.
printf "$H"'<zone id="z" routing="Full">\n<host id="a" speed="1Gf"/><host id="b" speed="1Gf"/><link id="l" bandwidth="0GBps" latency="1us"/>\n<route src="a" dst="b"><link_ctn id="l"/></route>\n</zone>\n</platform>\n' >"$WORK/zerobw.xml"
refused_platform 'zerobw.xml: link "l" \(on the route from "a" to "b"\) has bandwidth 0 B/s'
run_bad 2 "--set training.steps=: no value after '='" "$DDPSIM" run --set training.steps=
run_bad 1 "missing.xml: cannot open platform file" "$DDPSIM" run \
  --set "platform={\"topology\":\"xml\",\"file\":\"$WORK/missing.xml\",\"hosts\":[\"a\",\"b\",\"c\",\"d\"]}"
printf '{"name": "m", "source": "test", "forward_ms": {"a": 1, "beta": -2, "gamma": 0}, "backward_ms": {}, "layers": []}' >"$WORK/m.json"
run_bad 1 "m.json: forward_ms: beta must be a finite number ≥ 0" "$DDPSIM" run --set "model=$WORK/m.json"
printf '{"name": "m", "source": "test", "forward_ms": {"a": 1, "beta": 2, "gamma": 0}, "backward_ms": {}, "layers": []}' >"$WORK/m.json"
run_bad 1 'm.json: backward_ms: missing "a" \(the analytic form' "$DDPSIM" run --set "model=$WORK/m.json"
printf '{"name": "m", "source": "test",\n "forward_ms": {"a": 1,}}' >"$WORK/broken.json"
run_bad 1 "broken.json:2:[0-9]+: invalid JSON" "$DDPSIM" run --set "model=$WORK/broken.json"
run_bad 1 'simulation: noise_shared_sigma is a log-normal σ in \[0, 3\]' "$DDPSIM" run --set simulation.noise_shared_sigma=4
run_bad 1 'simulation: unit_jitter is a log-normal σ in \[0, 3\]' "$DDPSIM" run --set training.data_parallel=fsdp --set simulation.unit_jitter=-1
run_bad 1 'simulation: unit_jitter spreads a rank.s compute unevenly over FSDP.s units .* "ddp" has none' "$DDPSIM" run --set simulation.unit_jitter=0.1
printf '{"name": "m", "source": "test", "forward_ms": {"a": 1, "beta": 2, "gamma": 0}, "backward_ms": {"a": 1, "beta": 2, "gamma": 0}, "noise": {"sigma": 0.1, "shared_sigma": -1}, "layers": [{"name": "l", "params": 10}]}' >"$WORK/m.json"
run_bad 1 'm.json: noise: shared_sigma must be a finite number ≥ 0 \(at most 3.0\), got -1' "$DDPSIM" run --set "model=$WORK/m.json"
run_bad 1 'platform: unknown key "link_gbps" \(did you mean "link_GBps"' "$DDPSIM" run --set platform.link_gbps=10
run_bad 1 'unknown algorithm "butterfly"' "$DDPSIM" run --set simulation.algorithm=butterfly
run_bad 1 "stragglers\[0\]: rank 7 is outside 0..3" "$DDPSIM" run --set 'simulation.stragglers=[{"rank":7,"factor":2}]'
run_bad 2 'timeline-steps "5:2": expected FROM:TO' "$DDPSIM" run --timeline-steps 5:2
# A policy's option inside a config file names the file and the entry; a non-object config is
# blamed on the file, not on the --steps that run_bad adds.
printf '{"policies": ["static", "minmax:buffer=x"]}' >"$WORK/policy.json"
run_bad 1 "policy.json: policies\[1\]: policy minmax:buffer=x: option buffer must be an integer" "$DDPSIM" run "$WORK/policy.json"
run_bad 1 "--policies: policy sorted:mega=0: option mega must be" "$DDPSIM" run --policies static,sorted:mega=0
# Values given twice, and numbers that would make step times infinite.
run_bad 1 '--policies: policy "minmax:buffer=4:buffer=8": option buffer is given twice' "$DDPSIM" run --policies minmax:buffer=4:buffer=8
# A malformed policy string is a bad value like a bad option value: exit 1, naming where it is.
run_bad 1 '--policies: policy "verl:max_token_len=": option "max_token_len=" must look like key=value' \
  "$DDPSIM" run --policies verl:max_token_len=
printf '{"policies": ["kk:cost"]}' >"$WORK/policy-syntax.json"
run_bad 1 'policy-syntax.json: policies\[0\]: policy "kk:cost": option "cost" must look like key=value' \
  "$DDPSIM" run "$WORK/policy-syntax.json"
run_bad 2 '--set data: invalid JSON: number overflow' "$DDPSIM" run --set 'data={"source":"lognormal","mean":1e400}'
run_bad 1 'data: path is empty \(expected the trace file\)' "$DDPSIM" run --set 'data={"source":"trace","path":""}'
printf '{"training": {"world_size": 4}}\0garbage{{{' >"$WORK/nul.json"
run_bad 1 'nul.json:1:32: invalid JSON: a NUL byte' "$DDPSIM" run "$WORK/nul.json"
run_bad 2 '--timeline-steps 5:9: the run has 3 steps' "$DDPSIM" run --timeline-steps 5:9
# Integers outside their range, or not integers, get the range in the message.
run_bad 1 'training: key "micro_batches" is number 1.5: expected an integer from 1 to 10000' \
  "$DDPSIM" run --set training.micro_batches=1.5
run_bad 1 'training: key "world_size" is number 0: expected an integer from 1 to 65536' \
  "$DDPSIM" run --set training.world_size=0
run_bad 1 '--policies: static is already policies\[0\]' "$DDPSIM" run --policies static,static
run_bad 2 '--set training: key "world_size" appears twice' "$DDPSIM" run --set 'training={"world_size":4,"world_size":2}'
run_bad 2 '--set simulation.noise_sigma: 1e400 is beyond the range of a number' "$DDPSIM" run --set simulation.noise_sigma=1e400
run_bad 1 'sched_ms is a number of ms from 0 to 1e6 or "measured", got 1.7e\+308' "$DDPSIM" run --set simulation.sched_ms=1.7e308
run_bad 1 'platform: link_GBps must be from 1e-06 to 1e\+06, got 1e-300' "$DDPSIM" run --set platform.link_GBps=1e-300
run_bad 1 'platform: latency_us must be from 0 to 1e\+06 µs' "$DDPSIM" run --set platform.latency_us=1.7e308
run_bad 1 'key "global_batch" is number 10000001: expected an integer from 1 to 10000000' "$DDPSIM" run --set training.global_batch=10000001
run_bad 1 'platform: hosts\[1\] repeats "gpu0" of hosts\[0\]' "$DDPSIM" run \
  --set "platform={\"topology\":\"xml\",\"file\":\"$SRC/models/pcie-4x-rtx3090.xml\",\"hosts\":[\"gpu0\",\"gpu0\",\"gpu2\",\"gpu3\"]}"
printf '{"name": "m", "source": "test", "forward_ms": {"a": 1, "beta": 0, "gamma": 0}, "backward_ms": {"a": 1, "beta": 0, "gamma": 0}, "optimizer_ms": 1e308,\n "layers": [{"name": "l", "params": 10, "bwd_fraction": 1}]}' >"$WORK/huge.json"
run_bad 1 'huge.json: optimizer_ms must be a finite number ≥ 0 \(at most 10000000.0\), got 1e\+308' "$DDPSIM" run --set "model=$WORK/huge.json"
printf '[1, 2]' >"$WORK/array.json"
run_bad 1 "array.json: expected a JSON object, got array" "$DDPSIM" run "$WORK/array.json"
# The same policy twice, once with its defaults written out; --steps into a replaced section;
# --print-config with an output it would not write.
expect_exit 1 '--policies: minmax:buffer=64 is policies\[0\] \(minmax\) with its options written out .*the same policy twice' \
  "$DDPSIM" run --steps 2 --policies minmax,minmax:buffer=64
expect_exit 1 'policies\[0\]: policy minmax:buffer=64: option buffer is an integer from 1 to 65536, got the string "64"' \
  "$DDPSIM" run --steps 2 --set 'policies=[{"name": "minmax", "buffer": "64"}]'
# User text in a message shows its control bytes: a NUL no longer cuts the message short.
printf '12\n1\x003 tokens\n14\n' >"$WORK/nul-lengths.txt"
expect_exit 1 'nul-lengths.txt:2: expected one positive integer length, got "1\\x003 tokens"' "$DDPSIM" run --steps 2 \
  --set data.source=trace --set "data.path=$WORK/nul-lengths.txt"
expect_exit 2 '--print-config prints the resolved config and runs nothing, so --out would write nothing' \
  "$DDPSIM" run --print-config --out "$out"
no_output print-config
run_bad 1 'stragglers\[0\]: from_step 100 is past the run.s last step \(2\): it would never straggle' "$DDPSIM" run \
  --set 'simulation.stragglers=[{"rank": 1, "factor": 2, "from_step": 100}]'
run_bad 1 'is number 10000000.0: expected an integer from 1 to 10000000 \(written without a decimal point or exponent\)' \
  "$DDPSIM" run --set training.global_batch=1e7
run_bad 1 'data: std must be from 0 to 1e6 tokens, got -1' "$DDPSIM" run \
  --set 'data={"source": "lognormal", "mean": 10, "std": -1, "min": 1, "max": 100, "samples": 1000}'
expect_exit 2 'missing TSV, the GLUE file to tokenize' "$DDPSIM" lengths --vocab "$WORK/v.txt" --out "$WORK/h.json"
expect_exit 2 '--baseline .*steps.csv is the --measured trace' "$DDPSIM" validate --model "$SRC/models/cpu-distilbert-small-2ranks.json" \
  --measured "$SRC/traces/cpu/2ranks/kk/steps.csv" --baseline "$SRC/traces/cpu/2ranks/kk/steps.csv"
# Values that would be clipped, ignored or contradicted without a word.
run_bad 1 "training.micro_batches \(13\) is more than a rank's share of the global batch \(48 over 4 ranks: 12\)" \
  "$DDPSIM" run --set training.micro_batches=13
run_bad 1 "data: mean 1000 is outside min 3 to max 10: most samples would be clipped" "$DDPSIM" run \
  --set 'data={"source": "lognormal", "mean": 1000, "std": 5, "min": 3, "max": 10}'
run_bad 1 "data: min \(300\) is more than training.max_length \(256\)" "$DDPSIM" run \
  --set 'data={"source": "lognormal", "mean": 400, "std": 5, "min": 300, "max": 500}'
printf '{"max_length": 2, "counts": [[5, 10]]}' >"$WORK/short.json"
run_bad 1 'short.json: a length of 5, but "max_length" is 2' "$DDPSIM" run \
  --set data.source=histogram --set "data.path=$WORK/short.json"
sed 's/"architectures": \[\([^]]*\)\]/"architectures": \1/' "$SRC/models/hf/gpt2.json" >"$WORK/gpt2-arch.json"
grep -q '"architectures": "' "$WORK/gpt2-arch.json" || fail "the gpt2 fixture lost its architectures list"
printf '{"hf_config": "%s", "gpu": "h100-sxm"}' "$WORK/gpt2-arch.json" >"$WORK/spec.json"
run_bad 1 'gpt2-arch.json: key "architectures" is string.*: expected an array' "$DDPSIM" run --set "model=$WORK/spec.json"
# Samples longer than a learned position table (GPT-2's 1024, RoBERTa's 514 less its two
# padding rows) cannot be embedded; a RoPE model (Llama) takes any length.
printf '{"hf_config": "%s", "gpu": "h100-sxm"}' "$SRC/models/hf/gpt2.json" >"$WORK/gpt2.json"
run_bad 1 "training.max_length 1025 is more than the 1024 positions of gpt2.s learned position table" \
  "$DDPSIM" run --set "model=$WORK/gpt2.json" --set training.max_length=1025 --policies static
sed 's/"model_type": "bert"/"model_type": "roberta"/' "$SRC/models/hf/bert-base-uncased.json" >"$WORK/roberta-hf.json"
printf '{"hf_config": "%s", "gpu": "h100-sxm"}' "$WORK/roberta-hf.json" >"$WORK/roberta.json"
run_bad 1 "training.max_length 511 is more than the 510 positions of roberta.s learned" \
  "$DDPSIM" run --set "model=$WORK/roberta.json" --set training.max_length=511 --policies static
printf '{"hf_config": "%s", "gpu": "h100-sxm"}' "$SRC/models/hf/llama-3-8b.json" >"$WORK/llama.json"
expect_ok "$DDPSIM" run --set "model=$WORK/llama.json" --set training.max_length=9000 --policies static --steps 2
printf '{"gpu": "h100-sxm", "dtype": "bf16"}' >"$WORK/nospec.json"
run_bad 1 'nospec.json: a model spec \(gpu, dtype, efficiency\) needs "hf_config"' "$DDPSIM" run --set "model=$WORK/nospec.json"
printf '{"hf_config": "", "gpu": "h100-sxm"}' >"$WORK/emptyspec.json"
run_bad 1 'emptyspec.json: "hf_config" is empty: expected the path of a Hugging Face config.json' "$DDPSIM" run \
  --set "model=$WORK/emptyspec.json"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["id2label"] = {}
c["architectures"] = ["BertForSequenceClassification"]; print(json.dumps(c))' \
  "$SRC/models/hf/bert-base-uncased.json" >"$WORK/nolabels-hf.json"
printf '{"hf_config": "%s", "gpu": "h100-sxm"}' "$WORK/nolabels-hf.json" >"$WORK/nolabels.json"
run_bad 1 'nolabels-hf.json: key "id2label" is an empty object: expected a label name for each id' "$DDPSIM" run \
  --set "model=$WORK/nolabels.json"
# id2label ids are the head's outputs ("0" to "n-1"); architectures names the one head modelled.
for case in '"id2label"] = {"0": "a", "7": "b"}|"id2label": id "7" is not one of "0" to "1"' \
  '"architectures"] = ["BertModel", "BertForSequenceClassification"]|"architectures" lists 2 classes: expected one' \
  '"architectures"] = []|"architectures" lists 0 classes'; do
  python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["architectures"] = ["BertForSequenceClassification"]
exec("c[" + sys.argv[2]); print(json.dumps(c))' "$SRC/models/hf/bert-base-uncased.json" "${case%%|*}" >"$WORK/odd-hf.json"
  printf '{"hf_config": "%s", "gpu": "h100-sxm"}' "$WORK/odd-hf.json" >"$WORK/odd.json"
  run_bad 1 "odd-hf.json: key ${case#*|}" "$DDPSIM" run --set "model=$WORK/odd.json"
done
# Integer fields state their own range, not an int's.
python3 -c 'import json, sys; m = json.load(open(sys.argv[1]))
m["forward_ms"]["grid"] = {"b": [1.5, 2], "L": [8, 16], "ms": [[1, 2], [2, 3]]}; print(json.dumps(m))' \
  "$SRC/models/rtx3090-distilbert.json" >"$WORK/gridf.json"
run_bad 1 'gridf.json: forward_ms: grid: b\[0\] is number 1.5: expected an integer from 1 to 100000000' "$DDPSIM" run \
  --set "model=$WORK/gridf.json"
printf '{"samples": 100.0, "counts": [[5, 100]]}' >"$WORK/hsamples.json"
run_bad 1 'hsamples.json: key "samples" is number 100.0: expected an integer, as the counts give \(100\)' "$DDPSIM" run \
  --set data.source=histogram --set "data.path=$WORK/hsamples.json"
# A model's layers each have a name of their own; a noise object states its sigma.
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["layers"][1]["name"] = m["layers"][0]["name"]
print(json.dumps(m))' "$SRC/models/rtx3090-distilbert.json" >"$WORK/dupname.json"
run_bad 1 'dupname.json: layers\[1\]: name ".*" is given to two layers' "$DDPSIM" run --set "model=$WORK/dupname.json"
python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); m["noise"] = {}
print(json.dumps(m))' "$SRC/models/rtx3090-distilbert.json" >"$WORK/nonoise.json"
run_bad 1 'nonoise.json: noise: missing "sigma"' "$DDPSIM" run --set "model=$WORK/nonoise.json"
# A histogram without a "source" is named by its file where the data is described.
printf '{"counts": [[5, 3]]}' >"$WORK/three.json"
run_bad 1 'data \(histogram .*three.json: 3 samples.*\): 3 samples, fewer than the 4 ranks' "$DDPSIM" run \
  --set data.source=histogram --set "data.path=$WORK/three.json"
# A global batch larger than the dataset would hold samples twice in one step (issue 36).
run_bad 1 'data \(lognormal.*\): 100 samples, fewer than training.global_batch 200: a step would hold samples twice' \
  "$DDPSIM" run --policies static --set training.global_batch=200 \
  --set 'data={"source": "lognormal", "mean": 20, "std": 5, "min": 2, "max": 64, "samples": 100}'
# A length trace with a byte order mark reads as one without (CSV traces and TSVs do too).
{ printf '\xef\xbb\xbf'; seq 5 100; } >"$WORK/bom.txt"
expect_ok "$DDPSIM" balance --steps 2 --set data.source=trace --set "data.path=$WORK/bom.txt"
# A setting the model makes a no-op is said to be one (issue 36 probe).
expect_ok "$DDPSIM" run --set model=h100-distilbert --set training.world_size=2 --set training.global_batch=8 --steps 2 \
  --set simulation.first_use=shared
grep -q "note: simulation.first_use has no effect: model h100-distilbert has no first-use cost" "$WORK/err" ||
  fail "first_use on a model without a first-use cost passed without a note: $(cat "$WORK/err")"
finish
