"""Bad input: a Python exception (ddpsim.InputError or UsageError, both ValueErrors) carrying the
library's message, the one the ddpsim command line prints for the same setting."""

import csv
import json
import os
import tempfile
import unittest

import common

common.need_torch()

import ddpsim  # noqa: E402
import torch  # noqa: E402
from ddpsim.torch import BalancedBatchSampler  # noqa: E402

LENGTHS = ddpsim.synthetic_lengths("sst2", 400, 64, 0)


def message(**kwargs):
    """The message the Scheduler raises for these arguments."""
    options = dict(world_size=4, global_batch=16, policy="static", max_length=64)
    options.update(kwargs)
    try:
        ddpsim.Scheduler(options.pop("lengths", LENGTHS), **options)
    except ValueError as e:
        return str(e)
    raise AssertionError(f"no exception for {kwargs}")


class BadInput(unittest.TestCase):
    def cli_says(self, text, *args):
        """ddpsim refuses the same setting with the same message (after what it names)."""
        out = common.run([common.tool("ddpsim"), "balance", "--steps", "2", *args], expect=1)
        self.assertIn(text, out)

    def test_lengths(self):
        for bad in (0, -3):
            lengths = list(LENGTHS)
            lengths[7] = bad
            self.assertEqual(message(lengths=lengths), f'lengths[7]: expected one positive integer length, got "{bad}"')
        self.assertEqual(message(lengths=[]), "lengths: empty dataset (no samples)")
        self.assertIn("max_length 16 is shorter than the longest sample", message(max_length=16))
        self.assertIn("fewer than global batch B=16", message(lengths=LENGTHS[:10]))
        with self.assertRaisesRegex(ddpsim.InputError, r"lengths\[0\]: expected an integer number of tokens from 1 to 2147483647, got 'x'"):
            ddpsim.Scheduler(["x"], world_size=1, global_batch=1)  # not a length at all, named

    def test_batch_smaller_than_world(self):
        text = message(global_batch=2)
        self.assertIn("infeasible: global batch B=2 is smaller than G=4", text)
        self.cli_says(text, "--set", "training.world_size=4", "--set", "training.global_batch=2")

    def test_batch_beyond_caps(self):
        text = message(policy="minmax", b_max=[2, 2, 2, 2])
        self.assertIn("infeasible: B=16 exceeds the 8 samples the ranks can take", text)
        self.cli_says(text, "--set", "training.world_size=4", "--set", "training.global_batch=16", "--set",
                      "training.b_max=[2,2,2,2]", "--policies", "minmax")

    def test_micro_batch_counts_the_command_line_refuses(self):
        text = message(micro_batches=5)
        self.assertEqual("micro_batches (5) is more than a rank's share of the global batch (16 over 4 ranks: 4): "
                         "every micro-batch needs a sample", text)
        self.cli_says(text, "--set", "training.global_batch=16", "--set", "training.micro_batches=5")
        self.assertIn("micro_batches 10001: expected an integer from 1 to 10000",
                      message(global_batch=400000, lengths=[3] * 400000, micro_batches=10001))
        self.assertIn("micro_batches 2: verl forms its own micro-batches", message(policy="verl", micro_batches=2))
        self.cli_says("training.micro_batches 2: verl forms its own micro-batches", "--policies", "verl",
                      "--set", "training.micro_batches=2")

    def test_unknown_policy(self):
        text = message(policy="minmux")
        self.assertIn('unknown policy "minmux" (did you mean "minmax"?)', text)
        self.cli_says(text, "--policies", "minmux")
        with self.assertRaises(ddpsim.InputError) as e:
            ddpsim.parse_policy("minmax:buffer")
        self.assertIn('option "buffer" must look like key=value', str(e.exception))
        self.assertIn('unknown option "bufer"', message(policy="minmax:bufer=8"))
        # parse_policy checks a policy as the command line does (issue 47 probe).
        for text, says in (("minmx", 'unknown policy "minmx"'), ("MINMAX", 'unknown policy "MINMAX"'),
                           ("minmax:cost=banana", "banana"), ("minmax:buffer=-3", "buffer"),
                           ("static ", "static")):
            with self.assertRaises(ddpsim.InputError, msg=text) as e:
                ddpsim.parse_policy(text)
            self.assertIn(says, str(e.exception))
        self.assertEqual(ddpsim.parse_policy("minmax:cost=model").label, "minmax:cost=model")
        self.assertEqual(ddpsim.parse_policy("token_budget:max_tokens=300").label, "token_budget:max_tokens=300")

    def test_sampler_arguments(self):
        """Each argument of the wrong kind is named with what it takes (issue 47 probe), never
        rounded: a fractional length, a string world size, a float seed, no policy, a negative start."""
        cases = (({"lengths": LENGTHS[:5] + [20.5] + LENGTHS[6:]}, "lengths[5]: expected an integer, got 20.5"),
                 ({"world_size": "2"}, "world_size: expected an integer, got '2'"),
                 ({"seed": 0.5}, "seed: expected an integer, got 0.5"),
                 ({"policy": None}, "policy: expected a policy string"),
                 ({"start_step": -1}, "start_step: expected an integer of at least 0, got -1"),
                 ({"lengths": LENGTHS[:3] + [float("nan")] + LENGTHS[4:]}, "lengths[3]: expected an integer"),
                 ({"lengths": LENGTHS[:3] + [None] + LENGTHS[4:]}, "lengths[3]: expected an integer, got None"))
        for change, says in cases:
            args = {"lengths": LENGTHS, "world_size": 4, "rank": 0, "global_batch": 16, "policy": "kk"}
            args.update(change)
            with self.assertRaises(ddpsim.InputError, msg=str(change)) as e:
                BalancedBatchSampler(args.pop("lengths"), **args)
            self.assertIn(says, str(e.exception))
        sampler = BalancedBatchSampler(LENGTHS, world_size=4, rank=0, global_batch=16, policy="kk")
        steps = sampler.steps_per_epoch()
        for read in (sampler.loss_weight, sampler.micro_sizes, sampler.shape):
            with self.assertRaisesRegex(ddpsim.InputError, f"step {steps}: epoch 0 has {steps} steps"):
                read(steps)

    def test_scheduler_argument_kinds(self):
        """A wrong kind of argument is named, not answered with pybind11's list of overloads."""
        for change, says in (({"world_size": "2"}, "world_size: expected an integer from -2147483648 to 2147483647, "
                                               "got '2' (str)"),
                             ({"seed": 0.5}, "seed: expected an integer from 0 to 18446744073709551615, got 0.5"),
                             ({"seed": 2**64}, "seed: expected an integer from 0 to 18446744073709551615"),
                             ({"seed": 2**64, "b_max": [4, 4, 4, 4]}, "seed: expected an integer from 0"),
                             ({"global_batch": 2**40}, "global_batch: expected an integer from -2147483648"),
                             ({"policy": None}, "policy: expected a string, got None"),
                             ({"wrld_size": 2}, "wrld_size: not an argument of Scheduler")):
            args = {"world_size": 4, "global_batch": 16}
            args.update(change)
            with self.assertRaises(ddpsim.InputError, msg=str(change)) as e:
                ddpsim.Scheduler(LENGTHS, **args)
            self.assertIn(says, str(e.exception))
            self.assertNotIn("Invoked with", str(e.exception))
        self.assertEqual(ddpsim.Scheduler(LENGTHS, world_size=4, global_batch=16).next().world_size, 4)

    def test_tracer_misuse(self):
        """A StepTracer used out of order, or told something that would break its trace, says so
        (issue 47 probe) and writes nothing."""
        from ddpsim.torch import StepTracer
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "steps.csv")
            tracer = StepTracer(path, world_size=1, rank=0)
            with self.assertRaisesRegex(ddpsim.UsageError, "steps do not nest"):
                with tracer.step(batch_size=2, max_len=8):
                    with tracer.step(batch_size=2, max_len=8):
                        pass
            with tracer.step(batch_size=2, max_len=8) as s:
                pass
            with self.assertRaisesRegex(ddpsim.UsageError, "its step has ended"):
                with s.phase("fwd"):
                    pass
            with self.assertRaisesRegex(ddpsim.InputError, "batch_size is an integer of at least 0, got -1"):
                with tracer.step(batch_size=-1, max_len=8):
                    pass
            tracer.close()
            with self.assertRaisesRegex(ddpsim.UsageError, "the tracer is closed"):
                with tracer.step(batch_size=2, max_len=8):
                    pass
            with self.assertRaisesRegex(ddpsim.InputError, "no line break"):
                StepTracer(path, world_size=1, rank=0, metadata={"note": "two\nlines"})
            with self.assertRaisesRegex(ddpsim.InputError, "metadata world_size=4, but the trace's ranks number 1"):
                StepTracer(path, world_size=1, rank=0, metadata={"world_size": 4})
            empty = os.path.join(out, "empty.csv")
            with self.assertRaisesRegex(ddpsim.UsageError, "no step was traced"):
                StepTracer(empty, world_size=1, rank=0).close()
            self.assertFalse(os.path.exists(empty))

    def test_profile_arguments(self):
        """profile() names a wrong argument before it times anything (issue 47 probe)."""
        from ddpsim.torch import profile, write_layout
        model = common.small_transformer()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "profile.csv")
            for change, says in (({"batches": [1, 2, 2]}, "batches: 2 given twice"),
                                 ({"warmup": -1}, "warmup: expected an integer of at least 0, got -1"),
                                 ({"max_warmup": 0}, "max_warmup: expected an integer of at least 1, got 0"),
                                 ({"reps": 2.5}, "reps: expected an integer of at least 1, got 2.5"),
                                 ({"batches": [1.5]}, r"batches\[0\]: expected an integer of at least 1, got 1.5")):
                args = {"batches": [1, 2], "lengths": [8], "reps": 1, "log": None}
                args.update(change)
                with self.assertRaisesRegex(ddpsim.UsageError, says, msg=str(change)):
                    profile(model, optimizer, common.full_batch, common.loss_of, path, **args)
            with self.assertRaisesRegex(ddpsim.UsageError, "model: None"):
                profile(None, optimizer, common.full_batch, common.loss_of, path, batches=[1], lengths=[8])
            for args, says in (({"points": [(1, 8)], "batches": [1]}, "give batches and lengths .* or points"),
                               ({"points": [(1, 8), (2,)]}, r"points\[1\]: expected a \(batch size, length\) pair"),
                               ({"points": [(1, 8), (1, 8)]}, r"points: \(1, 8\) given twice"),
                               ({"points": [(0, 8)]}, r"points\[0\]\[0\]: expected an integer of at least 1, got 0"),
                               ({"points": []}, "points: none given"),
                               ({"lengths": [8]}, "batches and lengths: the grid needs both")):
                with self.assertRaisesRegex(ddpsim.UsageError, says, msg=str(args)):
                    profile(model, optimizer, common.full_batch, common.loss_of, path, reps=1, log=None, **args)
            # points: only the shapes asked for, none of the grid they would span.
            profile(model, optimizer, common.full_batch, common.loss_of, path, points=[(2, 8), (1, 16)], reps=1,
                    warmup=0, log=None)
            with open(path) as f:
                rows = [r for r in csv.DictReader(line for line in f if not line.startswith("#"))]
            self.assertEqual(sorted({(int(r["batch_size"]), int(r["max_len"])) for r in rows}), [(1, 16), (2, 8)])
            os.remove(path)
            self.assertFalse(os.path.exists(path))
            with self.assertRaisesRegex(ddpsim.UsageError, "is a folder"):
                write_layout(model, out)
            self.assertEqual([f for f in os.listdir(out) if f.endswith(".tmp")], [])

    def test_layout_of_a_billion_parameter_model_calibrates(self):
        """A layout's backward shares stay shares when one tensor has more than 1e7 elements, as a
        1B decoder's embedding does: its first GPU profile was refused as a base (issue 46)."""
        from ddpsim.torch import write_layout
        model = torch.nn.Sequential(torch.nn.Embedding(1000, 64), torch.nn.Linear(64, 3200),
                                    torch.nn.Linear(3200, 3200, bias=False))  # 1.02e7 elements
        profile = os.path.join(os.path.dirname(__file__), "..", "..", "traces", "h200", "decoder",
                               "smollm-135m-profile.csv")
        with tempfile.TemporaryDirectory() as out:
            layout = os.path.join(out, "layout.json")
            write_layout(model, layout, name="SmolLM-135M")  # the profile's model, as calibrate asks
            with open(layout) as f:
                shares = [layer["bwd_fraction"] for layer in json.load(f)["layers"]]
            self.assertAlmostEqual(sum(shares), 1.0, places=9)
            report = common.run([common.tool("ddpsim"), "calibrate", profile, "--base", layout, "--folds", "2",
                                 "--out", os.path.join(out, "model.json")])
            self.assertIn("held-out MAPE", report)

    def test_rank_out_of_range(self):
        for rank in (4, -1):
            with self.assertRaises(ddpsim.InputError) as e:
                BalancedBatchSampler(LENGTHS, world_size=4, rank=rank, global_batch=16, policy="kk")
            self.assertEqual(str(e.exception), f"rank {rank} is out of range: world size G=4 (ranks 0 to 3)")
        plan = ddpsim.Scheduler(LENGTHS, world_size=4, global_batch=16).next()
        with self.assertRaises(ddpsim.InputError) as e:
            plan.indices(4)
        self.assertEqual(str(e.exception), "rank 4 is out of range: world size G=4 (ranks 0 to 3)")

    def test_errors_are_value_errors(self):
        self.assertTrue(issubclass(ddpsim.InputError, ValueError))
        self.assertTrue(issubclass(ddpsim.UsageError, ValueError))


class SecondProbe(unittest.TestCase):
    """What a probe of the hardened surfaces still found (issue 47): each refused by name."""

    def test_scheduler_sampler_and_policy(self):
        with self.assertRaisesRegex(ddpsim.InputError, r"lengths\[0\]: expected an integer number of tokens from 1"):
            ddpsim.Scheduler([2**31], world_size=1, global_batch=1)
        with self.assertRaisesRegex(ddpsim.InputError, "policy: expected a string such as 'minmax:cost=tokens', got None"):
            ddpsim.parse_policy(None)
        with self.assertRaisesRegex(ddpsim.InputError, r"lengths: expected a list of integers \(one per sample\), got 5"):
            BalancedBatchSampler(5, world_size=1, rank=0, global_batch=4)
        with self.assertRaisesRegex(ddpsim.InputError, r"b_max: expected a list of integers \(one cap per rank\)"):
            BalancedBatchSampler(LENGTHS, world_size=1, rank=0, global_batch=4, b_max=4)
        sampler = BalancedBatchSampler(LENGTHS, world_size=2, rank=0, global_batch=8)
        with self.assertRaisesRegex(ddpsim.InputError, "micro 5: step 0 has 1 micro-batch"):
            sampler.scale_loss(torch.tensor(1.0), 0, micro=5)
        late = BalancedBatchSampler(LENGTHS, world_size=2, rank=0, global_batch=8, start_step=10**6)
        with self.assertRaisesRegex(ddpsim.InputError, "start_step 1000000: epoch 0 has 49 steps"):
            len(late)

    def test_tracer_values(self):
        from ddpsim.torch import StepTracer
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "steps.csv")
            tracer = StepTracer(path, world_size=1, rank=0)
            with self.assertRaisesRegex(ddpsim.UsageError, "no step was traced"):
                tracer.close()
            for shape, says in (({"real_tokens": -5}, "real_tokens is an integer of at least 0, got -5"),
                                ({"real_tokens": 100, "padded_tokens": 10}, "expected real ≤ padded ≤ batch_size"),
                                ({"loss_weight": float("nan")}, "loss_weight: expected a finite number ≥ 0, got nan"),
                                ({"loss_weight": "x"}, "loss_weight: expected a finite number ≥ 0, got 'x'"),
                                ({"global_batch": -1}, "global_batch is an integer of at least 1, got -1"),
                                ({"real_token": 5}, "real_token: not a column of the step")):
                with self.assertRaises((ddpsim.InputError, ddpsim.UsageError), msg=str(shape)) as e:
                    with tracer.step(batch_size=2, max_len=10, **shape):
                        pass
                self.assertIn(says, str(e.exception))
            with tracer.step(batch_size=2, max_len=10, step=0, rank=0):  # a failed close left it open
                pass
            tracer.close()
            self.assertTrue(os.path.exists(path))
            for args, says in (({"world_size": 7, "rank": 0}, "world_size 7: close() gathers every rank's rows"),
                               ({"world_size": "2"}, "world_size is an integer of at least 1, got '2'"),
                               ({"rank": 1.0}, "rank is an integer of at least 0, got 1.0"),
                               ({"metadata": ["a"]}, "metadata: expected a dict")):
                with self.assertRaises((ddpsim.InputError, ddpsim.UsageError), msg=str(args)) as e:
                    StepTracer(os.path.join(out, "other.csv"), **args)
                self.assertIn(says, str(e.exception))

    def test_profile_and_layout(self):
        from ddpsim.torch import profile, write_layout
        model = common.small_transformer()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        with tempfile.TemporaryDirectory() as out:
            path = os.path.join(out, "profile.csv")
            common_args = dict(make_batch=lambda b, L: None, loss_fn=lambda m, x: None, path=path, lengths=[8])
            for args, says in (({"batches": [1], "seed": "x"}, "seed: expected an integer of at least 0, got 'x'"),
                               ({"batches": [1], "interference_batch": 2.5}, "interference_batch: expected an integer"),
                               ({"batches": 4}, "batches: expected a list of integers")):
                with self.assertRaisesRegex(ddpsim.UsageError, says):
                    profile(model, optimizer, **common_args, **args)
            with self.assertRaisesRegex(ddpsim.UsageError, "model: it has no parameters"):
                profile(torch.nn.ReLU(), optimizer, batches=[1], **common_args)
            with self.assertRaisesRegex(ddpsim.UsageError, "model: expected a torch.nn.Module, got NoneType"):
                write_layout(None, os.path.join(out, "layout.json"))
            with self.assertRaisesRegex(ddpsim.UsageError, "model ReLU: no trained parameters"):
                write_layout(torch.nn.ReLU(), os.path.join(out, "layout.json"))
            self.assertEqual(os.listdir(out), [])


if __name__ == "__main__":
    unittest.main()
