"""Tracer round trip on CPU: a small transformer from torch.nn is profiled on two Gloo ranks,
ddpsim calibrates a model from the profile, the two ranks train static and minmax a step of each
in turn with the sampler and the tracer (and a profile step after each turn), and ddpsim replays
and validates the traces. This CPU's timings drift and are shared with other work, so the only
bound on accuracy is a sanity one: the mean step time within 60% (ddptrain's round trip's bound)
under the profile of the runs' own minutes. An interrupted run leaves no trace behind."""

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

import common

common.need_torch()

import torch  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

from common import full_batch, loss_of  # noqa: E402

import ddpsim  # noqa: E402
from ddpsim.torch import BalancedBatchSampler, Profiler, StepTracer, profile, write_layout  # noqa: E402

G, B, MAX_LENGTH, STEPS = 2, 16, 64, 60
POLICIES = ("static", "minmax")
LENGTHS = ddpsim.synthetic_lengths("sst2", 3000, MAX_LENGTH, 0)


def profile_worker(rank, world_size, out):
    model = DDP(common.small_transformer())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if rank == 0:
        write_layout(model, os.path.join(out, "layout.json"), name="small-transformer")
    profile(model, optimizer, full_batch, loss_of, os.path.join(out, "profile.csv"), batches=[1, 2, 4, 8, 12],
            lengths=[8, 16, 32, 48, 64], reps=3, max_warmup=12, model_name="small-transformer",
            allreduce_bytes=[64 << 10, 1 << 20, 4 << 20])


def train_worker(rank, world_size, out):
    """Both policies in one process, a step of each in turn, so that both get the same minutes,
    and after each turn a step of a profile grid, which so measures the runs' own minutes."""
    profiled = DDP(common.small_transformer())
    alongside = Profiler(profiled, torch.optim.AdamW(profiled.parameters(), lr=1e-4), full_batch, loss_of,
                         os.path.join(out, "alongside.csv"), batches=[2, 4, 8, 12], lengths=[8, 16, 32, 48, 64],
                         reps=3, max_warmup=12, allreduce_bytes=[64 << 10, 1 << 20, 4 << 20],
                         model_name="small-transformer")
    runs = []
    for policy in POLICIES:
        model = DDP(common.small_transformer())
        sampler = BalancedBatchSampler(LENGTHS, world_size=world_size, rank=rank, global_batch=B, policy=policy,
                                       max_length=MAX_LENGTH)
        tracer = StepTracer(os.path.join(out, policy, "steps.csv"), policy=sampler.policy, global_batch=B,
                            model="small-transformer", seed=0,
                            metadata={"interleaved": "one step of each policy in turn: " + ",".join(POLICIES)})
        tracer.attach(model)
        runs.append((model, torch.optim.AdamW(model.parameters(), lr=1e-4), sampler, iter(sampler), tracer))
    for step in range(STEPS):
        for model, optimizer, sampler, batches, tracer in runs:
            indices = next(batches)
            batch = common.collate(LENGTHS, indices)  # loading, as a DataLoader does it, before the step
            common.traced_step(tracer, sampler, step, optimizer, lambda: loss_of(model, batch))
        alongside.step()
    for *_, tracer in runs:
        tracer.close()
    alongside.close()


def sharded_optimizer_worker(rank, world_size, path):
    """profile() refuses PyTorch's ZeroRedundancyOptimizer: calibrate reads the whole optimizer."""
    from torch.distributed.optim import ZeroRedundancyOptimizer
    model = common.small_transformer()
    sharded = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-4)
    try:
        profile(model, sharded, full_batch, loss_of, path, batches=[1], lengths=[8], reps=1, warmup=0)
    except ddpsim.UsageError as e:
        assert "ZeroRedundancyOptimizer steps only this rank's shard; profile the plain optimizer" in str(e), e
    else:
        raise AssertionError("profile() took a ZeroRedundancyOptimizer")


INTERRUPTED = textwrap.dedent("""
    import os, signal, sys, torch
    from ddpsim.torch import StepTracer
    model = torch.nn.Linear(4, 1)
    with StepTracer(sys.argv[1], policy="static") as tracer:
        for step in range(100):
            with tracer.step(batch_size=4, max_len=8) as s:
                with s.phase("fwd"):
                    loss = model(torch.ones(4, 4)).sum()
                with s.phase("bwd"):
                    loss.backward()
                if step == 5:
                    os.kill(os.getpid(), signal.SIGINT)
""")


def meta_line(text: str, key: str) -> str:
    """A trace's one metadata line KEY=VALUE: the value."""
    values = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"# {key}=")]
    assert len(values) == 1, f"{key}: {len(values)} metadata lines"
    return values[0]


class TracerRoundTrip(unittest.TestCase):
    def test_profile_calibrate_train_validate(self):
        ddpsim_cli = common.tool("ddpsim")
        with tempfile.TemporaryDirectory() as out:
            common.spawn(profile_worker, G, out, pin=True)
            with open(os.path.join(out, "profile.csv")) as f:
                text = f.read()
            self.assertIn("# tool=ddpsim.torch\n", text)
            self.assertIn("# profile=warmup auto", text)
            self.assertEqual(text.count(",profile,"), 5 * 5 * 3 * G)
            buckets = [line for line in text.splitlines() if line.startswith("# ddp_buckets=")]
            self.assertEqual(len(buckets), 1)  # one bucket of the model's gradients, timed beside the ladder
            self.assertGreater(text.count(",allreduce,"), 4 * 3)  # the ladder's, then the interference's
            self.assertIn("then allreduce, interference and all-gather\n", text)
            # ZeRO-1's gather at the ladder's sizes and the model's own, and the update's share
            gathers = dict(pair.split(":") for pair in meta_line(text, "allgather").split(","))
            parameter_bytes = 4 * sum(p.numel() for p in common.small_transformer().parameters())
            self.assertEqual(sorted(map(int, gathers)), sorted({64 << 10, 1 << 20, 4 << 20, parameter_bytes}))
            self.assertTrue(all(float(ms) > 0 for ms in gathers.values()))
            self.assertIn("a broadcast of each rank's shard from it", meta_line(text, "allgather_as"))
            share = float(meta_line(text, "optimizer_update_share"))
            self.assertTrue(0 < share <= 1, share)
            report = common.run([ddpsim_cli, "calibrate", os.path.join(out, "profile.csv"), "--base",
                                 os.path.join(out, "layout.json"), "--gpu", "CPU, two Gloo ranks", "--out",
                                 os.path.join(out, "model.json")])
            self.assertIn("held-out MAPE", report)
            self.assertIn("allreduce 2 ranks", report)
            self.assertIn("interference: backward runs", report)
            # The gather's factor needs the allreduce line's bandwidth, which this small ladder's
            # latency-bound sizes may leave unresolved: then calibrate says so and keeps the ring.
            with open(os.path.join(out, "model.json")) as f:
                fitted = json.load(f)
            if "allgather_factor" in fitted:
                self.assertIn(f"bytes (the profiled size nearest the model's {parameter_bytes} bytes of parameters)",
                              report)
                self.assertEqual(fitted["calibration"]["fit"]["allgather"]["bytes"], parameter_bytes)
            else:
                self.assertIn("no allgather_factor: the allreduce fit resolved no link bandwidth", report)
            self.assertAlmostEqual(fitted["optimizer_update_share"], share, places=4)

            load = [os.getloadavg()[0]]
            common.spawn(train_worker, G, out, pin=True)
            load.append(os.getloadavg()[0])
            traces = {p: os.path.join(out, p, "steps.csv") for p in POLICIES}
            with open(traces["minmax"]) as f:
                rows = [line for line in f if not line.startswith("#")]
            self.assertEqual(len(rows), 1 + STEPS * G)
            with open(traces["minmax"]) as f:  # DDP reduces the fp32 parameters' gradients
                self.assertIn("# grad_dtype=fp32\n", f.read())
            replayed = common.run([ddpsim_cli, "replay", traces["minmax"], "--model", os.path.join(out, "model.json"),
                        "--out", os.path.join(out, "replayed")])
            self.assertIn("gradients: fp32 (4 B a parameter; the model's); the trace recorded fp32\n", replayed)
            with open(os.path.join(out, "replayed", "steps.csv")) as f:  # every traced step, predicted
                self.assertEqual(sum(1 for line in f if not line.startswith("#")), 1 + STEPS * G)
            # The profile of the runs' own minutes, as ddptrain --profile-alongside takes it: the one
            # this shared machine's drift leaves comparable (a profile before the runs missed them
            # by up to 54% here, by 2% to 46% since the ranks are pinned).
            common.run([ddpsim_cli, "calibrate", os.path.join(out, "alongside.csv"), "--base",
                        os.path.join(out, "layout.json"), "--out", os.path.join(out, "alongside.json")])
            errors = {}
            for model in ("model", "alongside"):
                folder = os.path.join(out, "validation-" + model)
                report = common.run([ddpsim_cli, "validate", "--measured", traces["minmax"], "--baseline",
                                     traces["static"], "--model", os.path.join(out, model + ".json"), "--out",
                                     folder])
                print(f"== validated against {model}.json\n{report}")
                with open(os.path.join(folder, "validation.json")) as f:
                    validation = json.load(f)
                self.assertEqual(set(validation["policies"]), {"minmax"})
                errors[model] = {"minmax": validation["policies"]["minmax"]["mean_error_pct"],
                                 "static": validation["baseline"]["figures"]["mean_error_pct"]}
            print("mean step time error, % (profile before the runs; alongside them):", errors)
            # A sanity bound, not an accuracy target: 30% held on an idle 2-core VM earlier, but on
            # another day the same VM, idle, gave -18 to -45% over eight runs with the simulator of
            # before and after a change alike (the exposed gradient wait most: Gloo's threads share
            # each pinned rank's core). So it is ddptrain's round trip's.
            bound = 60
            print(f"load average {load[0]:.1f} before the runs, {load[1]:.1f} after, {os.cpu_count()} cores: "
                  f"bound {bound}%")
            for label, error in errors["alongside"].items():
                self.assertLessEqual(abs(error), bound, f"{label}: mean step time {error:+.1f}% off the measurement")

    def test_interrupted_run_leaves_nothing(self):
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "run", "steps.csv")
            done = subprocess.run([sys.executable, "-c", INTERRUPTED, path], capture_output=True, text=True)
            self.assertNotEqual(done.returncode, 0)
            self.assertIn("KeyboardInterrupt", done.stderr)
            self.assertEqual([f for _, _, files in os.walk(out) for f in files], [])
            # The same run to the end writes the trace; the folder holds nothing else.
            finished = INTERRUPTED.replace("os.kill(os.getpid(), signal.SIGINT)", "pass")
            subprocess.run([sys.executable, "-c", finished, path], check=True)
            self.assertEqual(os.listdir(os.path.dirname(path)), ["steps.csv"])
            with open(path) as f:
                self.assertEqual(sum(1 for line in f if not line.startswith("#")), 101)

    def test_one_process_profile(self):
        """profile() without torch.distributed: one rank, no allreduce rows, a trace calibrate fits."""
        with tempfile.TemporaryDirectory() as out:
            model = common.small_transformer()
            write_layout(model, os.path.join(out, "layout.json"))
            profile(model, torch.optim.SGD(model.parameters(), lr=0.01), full_batch, loss_of,
                    os.path.join(out, "profile.csv"), batches=[1, 4, 8], lengths=[8, 32, 64], reps=2, warmup=1)
            with open(os.path.join(out, "profile.csv")) as f:
                text = f.read()
            self.assertIn("# profile=warmup 1 (9 runs in all), repetitions 2, 9 points in a seeded random order\n", text)
            self.assertIn("# world_size=1\n", text)
            self.assertEqual(text.count(",profile,"), 9 * 2)
            self.assertNotIn("allreduce_ms", text)
            self.assertNotIn("# allgather=", text)  # one rank gathers nothing
            self.assertIn("# optimizer_update_share=", text)
            if os.uname().machine == "x86_64":
                self.assertRegex(meta_line(text, "cpu"), r".+ \(family \d+, model \d+\)$")
            # The setup installs OpenBLAS for PyTorch: which kernels it chose is what the line is for.
            # (A machine whose OpenBLAS predates its CPU may set OPENBLAS_CORETYPE for every process.)
            forced = ", set by OPENBLAS_CORETYPE" if os.environ.get("OPENBLAS_CORETYPE") else ""
            self.assertRegex(meta_line(text, "blas"), r"^OpenBLAS [\d.]+, \w+ kernels" + forced + "$")
            self.assertTrue(meta_line(text, "malloc").startswith("glibc's defaults"))  # keep_freed_memory not called
            common.run([common.tool("ddpsim"), "calibrate", os.path.join(out, "profile.csv"), "--base",
                        os.path.join(out, "layout.json"), "--out", os.path.join(out, "model.json")])
            with self.assertRaises(ddpsim.UsageError):
                profile(model, None, full_batch, loss_of, os.path.join(out, "p.csv"), batches=[0], lengths=[8])
            with self.assertRaisesRegex(ddpsim.UsageError, "zero_gather: 'allgather'; ZeRO-1's gather is timed as"):
                profile(model, torch.optim.SGD(model.parameters(), lr=0.01), full_batch, loss_of,
                        os.path.join(out, "p.csv"), batches=[1], lengths=[8], zero_gather="allgather")
            self.assertFalse(os.path.exists(os.path.join(out, "p.csv")))

    def test_blas_kernels_chosen_by_hand(self):
        """OPENBLAS_CORETYPE picks OpenBLAS's kernels in place of its own detection: the trace's
        blas line names the ones that ran, and says they were chosen by hand."""
        code = "import torch; from ddpsim.torch.machine import blas_kernels; print(blas_kernels())"
        chosen = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, OPENBLAS_CORETYPE="Haswell"),
                                check=True, capture_output=True, text=True).stdout.strip()
        self.assertRegex(chosen, r"^OpenBLAS [\d.]+, Haswell kernels, set by OPENBLAS_CORETYPE$")
        own = subprocess.run([sys.executable, "-c", code], env={k: v for k, v in os.environ.items()
                                                                 if k != "OPENBLAS_CORETYPE"},
                             check=True, capture_output=True, text=True).stdout.strip()
        self.assertNotIn("OPENBLAS_CORETYPE", own)

    def test_keep_freed_memory(self):
        """keep_freed_memory sets glibc's malloc as ddptrain does, and the trace's malloc line says so."""
        code = ("from ddpsim.torch import keep_freed_memory; from ddpsim.torch.machine import malloc_setting; "
                "print(malloc_setting()); print(keep_freed_memory()); print(malloc_setting())")
        said = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        before, kept, after = said.splitlines()
        self.assertTrue(before.startswith("glibc's defaults"), before)
        self.assertEqual(kept, "True")
        self.assertEqual(after, "freed memory kept (mmap threshold 32 MiB, trim threshold 1 GiB, top pad 256 MiB)")

    def test_refuses_a_sharded_optimizer(self):
        with tempfile.TemporaryDirectory() as out:
            common.spawn(sharded_optimizer_worker, 1, os.path.join(out, "profile.csv"))
            self.assertEqual(os.listdir(out), [])

    def test_emulated_ranks(self):
        """emulate_ranks: G rank-steps in one process a step, as ddptrain --emulate-ranks writes them
        (each rank waits for the slowest plus the modelled allreduce; the optimizer is the step's),
        a trace validate reads; the misuses refused."""
        model = common.small_transformer()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        samplers = [BalancedBatchSampler(LENGTHS, world_size=2, rank=g, global_batch=8, policy="minmax",
                                         max_length=MAX_LENGTH) for g in range(2)]
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "steps.csv")
            with StepTracer(path, policy=samplers[0].policy, global_batch=8, emulate_ranks=2,
                            allreduce_ms=7.5) as tracer:
                for step in range(4):
                    for rank in range(2):
                        shape = samplers[rank].shape(step)
                        with tracer.step(**shape) as s:
                            with s.phase("fwd"):
                                loss = loss_of(model, full_batch(shape["batch_size"], shape["max_len"]))
                            with s.phase("bwd"):
                                loss.backward()
                            if rank == 1:
                                with s.phase("opt"):
                                    optimizer.step()
                                    optimizer.zero_grad()
                            s.loss = loss
                self.assertEqual([(r["step"], r["rank"]) for r in tracer.rows()], [(i // 2, i % 2) for i in range(8)])
            with open(path) as f:
                lines = f.read().splitlines()
            self.assertIn("# emulated_ranks=2", lines)
            self.assertIn("# ddpsim=" + ddpsim.__version__, lines)
            self.assertIn("# world_size=1", lines)
            header = next(line for line in lines if not line.startswith("#")).split(",")
            rows = [dict(zip(header, line.split(","))) for line in lines if line[0].isdigit()]
            self.assertEqual([(r["step"], r["rank"]) for r in rows], [(str(i // 2), str(i % 2)) for i in range(8)])
            for a, b in zip(rows[::2], rows[1::2]):
                own = [float(r["fwd_ms"]) + float(r["bwd_ms"]) for r in (a, b)]
                for r, mine in zip((a, b), own):
                    self.assertAlmostEqual(float(r["comm_wait_ms"]), max(own) - mine + 7.5, places=3)
                    self.assertAlmostEqual(float(r["step_ms"]), max(own) + 7.5 + float(r["opt_ms"]), places=3)
                self.assertEqual(a["opt_ms"], b["opt_ms"])
                self.assertGreater(float(a["opt_ms"]), 0)
            report = common.run([common.tool("ddpsim"), "validate", "--measured", path, "--model",
                                 "rtx3090-distilbert"])
            self.assertIn("minmax", report)
            with self.assertRaisesRegex(ddpsim.UsageError, "3 rank-steps traced, not a whole number of steps"):
                with StepTracer(os.path.join(out, "odd.csv"), emulate_ranks=2) as odd:
                    for _ in range(3):
                        with odd.step(batch_size=2, max_len=8):
                            pass
            self.assertFalse(os.path.exists(os.path.join(out, "odd.csv")))
        with self.assertRaisesRegex(ddpsim.InputError, "emulate_ranks 1: one rank takes no turns"):
            StepTracer("x.csv", emulate_ranks=1)
        with self.assertRaisesRegex(ddpsim.UsageError, "rank 1: under emulate_ranks the tracer numbers the ranks"):
            StepTracer("x.csv", emulate_ranks=2, rank=1)
        with self.assertRaisesRegex(ddpsim.UsageError, "allreduce_ms is the modelled allreduce of emulated ranks"):
            StepTracer("x.csv", allreduce_ms=3)
        with self.assertRaisesRegex(ddpsim.InputError, "allreduce_ms: expected a finite number"):
            StepTracer("x.csv", emulate_ranks=2, allreduce_ms=-1)

    def test_packed_steps(self):
        lengths = ddpsim.synthetic_lengths("sst2", 400, 64, 0)
        sampler = BalancedBatchSampler(lengths, world_size=1, rank=0, global_batch=6, policy="minmax:cost=workload",
                                       max_length=64, micro_batches=2, attention="packed")
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "steps.csv")
            with StepTracer(path, policy=sampler.policy, attention="packed") as tracer:
                for step, indices in enumerate(sampler):
                    if step == 3:
                        break
                    shape = sampler.shape(step)
                    self.assertEqual(shape["sq_tokens"], sum(lengths[i] ** 2 for i in indices))
                    self.assertEqual(shape["padded_tokens"], shape["real_tokens"])
                    with tracer.step(**shape) as s, s.phase("fwd"):
                        pass
            with open(path) as f:
                lines = [line for line in f.read().splitlines() if not line.startswith("#")]
            header = lines[0].split(",")
            self.assertEqual(header[-2:], ["sq_tokens", "micro_sq_tokens"])
            for step, row in enumerate(lines[1:]):
                fields = dict(zip(header, row.split(",")))
                self.assertEqual(int(fields["sq_tokens"]), sampler.shape(step)["sq_tokens"])
                self.assertEqual(sum(int(x) for x in fields["micro_sq_tokens"].split(";")), int(fields["sq_tokens"]))
        tracer = StepTracer("x.csv", attention="packed")
        with self.assertRaisesRegex(ddpsim.UsageError, "a packed step needs real_tokens"):
            with tracer.step(batch_size=2, max_len=8):
                pass
        with self.assertRaisesRegex(ddpsim.InputError, "sq_tokens 10: Σ s² is impossible for 2 samples of 12 tokens"):
            with tracer.step(batch_size=2, max_len=8, real_tokens=12, sq_tokens=10):
                pass
        with self.assertRaisesRegex(ddpsim.InputError, "padded_tokens 16: packed sequences have no padding"):
            with tracer.step(batch_size=2, max_len=8, real_tokens=12, padded_tokens=16, sq_tokens=80):
                pass
        with self.assertRaisesRegex(ddpsim.UsageError, r'sq_tokens is Σ s² of packed sequences; trace them with'):
            with StepTracer("x.csv").step(batch_size=2, max_len=8, sq_tokens=80):
                pass
        for real, pairs in ((12, 100), (1, 1)):  # Σ s² above max_len·Σ s; fewer tokens than samples
            with self.assertRaisesRegex(ddpsim.InputError, f"sq_tokens {pairs}: Σ s² is impossible for 2 samples"):
                with tracer.step(batch_size=2, max_len=8, real_tokens=real, sq_tokens=pairs):
                    pass
        with self.assertRaisesRegex(ddpsim.InputError, r"micro\[0\] \(1, 8, 6\): expected \(batch_size, max_len, "
                                                       r"real_tokens, sq_tokens\)"):
            with tracer.step(batch_size=2, max_len=8, real_tokens=12, sq_tokens=72, micro=[(1, 8, 6), (1, 8, 6)]):
                pass
        with self.assertRaisesRegex(ddpsim.InputError, 'attention "varlen": expected padded or packed'):
            StepTracer("x.csv", attention="varlen")
        with self.assertRaisesRegex(ddpsim.InputError, 'attention "varlen": expected padded or packed'):
            BalancedBatchSampler(lengths, world_size=1, rank=0, global_batch=6, attention="varlen")

    def test_refuses_a_folder(self):
        with tempfile.TemporaryDirectory() as out, self.assertRaises(ddpsim.UsageError):
            StepTracer(out)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    unittest.main()
