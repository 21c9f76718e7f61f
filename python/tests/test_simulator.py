"""ddpsim.run and ddpsim.compare against the binary: the same files byte for byte (the default
config, a micro-batched run, a pipeline job), the same refusals, progress and a clean stop."""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import warnings

import common
import ddpsim

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def measured_apart(files):
    """The files less the scheduler's measured decision times (wall-clock, as in two runs of the
    binary): every other byte is the simulation's."""
    return {name: "".join(line for line in text.splitlines(keepends=True) if "_sched_us" not in line)
            for name, text in files.items()}


def binary(verb, args):
    """The binary's files for `ddpsim VERB ARGS --out DIR`, by name."""
    with tempfile.TemporaryDirectory() as out:
        common.run([common.tool("ddpsim"), verb, *args, "--out", out])
        files = {}
        for name in sorted(os.listdir(out)):
            with open(os.path.join(out, name), encoding="utf-8") as f:
                files[name] = f.read()
        return measured_apart(files)


def refusal(verb, args):
    """The binary's message for a refused command, without its "ddpsim VERB: " prefix."""
    done = subprocess.run([common.tool("ddpsim"), verb, *args], capture_output=True, text=True)
    assert done.returncode in (1, 2), done
    return done.stderr.strip().split(": ", 1)[1]


class SameAsTheBinary(unittest.TestCase):
    def test_default_config(self):
        result = ddpsim.compare(steps=40, policies="static,minmax,sorted", progress=False)
        self.assertEqual(measured_apart(result.files), binary("compare", ["--steps", "40", "--policies", "static,minmax,sorted"]))
        self.assertEqual(result.policies, ["static", "minmax", "sorted"])
        self.assertIn("max step time, mean (ms)", result.table())
        self.assertEqual(result.provenance["model"], "built-in rtx3090-distilbert")
        frames = result.to_pandas()
        self.assertEqual(len(frames.steps), 3 * 40 * 4)  # policies × steps × ranks
        self.assertEqual(list(frames.policies["policy"]), result.policies)
        first = frames.policies["mean_max_step_ms"][0]
        self.assertAlmostEqual(result.gain("sorted"), 100 * (1 - frames.policies["mean_max_step_ms"][2] / first))

    def test_configs_against_each_other(self):
        against = {"zero1": {"training.data_parallel": "zero1"},
                   "8gpus": {"training.world_size": 8, "platform": {"topology": "nvlink"}}}
        result = ddpsim.compare(steps=30, policies="sorted", against=against, replicates=2, progress=False)
        self.assertEqual(measured_apart(result.files), binary("compare", [
            "--steps", "30", "--policies", "sorted", "--replicates", "2", "--against", "zero1:training.data_parallel=zero1",
            "--against", "8gpus:training.world_size=8", "--against", '8gpus:platform={"topology": "nvlink"}']))
        self.assertEqual(result.policies, ["base", "zero1", "8gpus"])
        self.assertEqual(result.summary["columns"]["8gpus"]["config"]["training"]["world_size"], 8)
        frames = result.to_pandas()
        self.assertIsNone(frames.steps)
        self.assertEqual(list(frames.policies["column"]), result.policies)
        own = ddpsim.compare(steps=30, policies="sorted", progress=False, **{"training.data_parallel": "zero1"})
        base = ddpsim.compare(steps=30, policies="sorted", progress=False)
        self.assertAlmostEqual(result.gain("zero1"), 100 * (1 - own.summary["policies"]["sorted"]["mean_max_step_ms"] /
                                                            base.summary["policies"]["sorted"]["mean_max_step_ms"]))
        self.assertIn("network", result.summary["replicates"]["columns"]["8gpus"]["gain"]["terms_half_width_pp"])
        for bad in ({}, {"a:b": {"training.world_size": 8}}, {"base": {"training.world_size": 8}}):
            with self.assertRaisesRegex(ddpsim.UsageError, "against: "):
                ddpsim.compare(steps=5, policies="sorted", against=bad)
        with self.assertRaisesRegex(ddpsim.UsageError, r"against: expected \{label: \{key: value"):
            ddpsim.compare(steps=5, policies="sorted", against={"zero1": "training.data_parallel=zero1"})
        with self.assertRaisesRegex(ddpsim.UsageError, "compares configs under one policy"):
            ddpsim.compare(steps=5, policies="static,sorted", against=against, progress=False)

    def test_micro_batches_and_overrides(self):
        overrides = {"training.micro_batches": 2, "training.world_size": 2, "model": "h100-distilbert"}
        result = ddpsim.run(steps=20, progress=False, **overrides)
        args = ["--steps", "20"] + [a for k, v in overrides.items() for a in ("--set", f"{k}={v}")]
        self.assertEqual(measured_apart(result.files), binary("run", args))
        self.assertIn("micro_batches", result.to_pandas().steps.columns)

    def test_pipeline_job(self):
        config = os.path.join(SOURCE, "configs", "pipeline-study.json")
        result = ddpsim.run(config, progress=False)
        self.assertEqual(measured_apart(result.files), binary("run", [config]))
        self.assertEqual(sorted(result.files), ["pipeline_steps.csv", "summary.json"])

    def test_a_dict_config_is_a_file_config(self):
        config = {"training": {"world_size": 2, "global_batch": 16, "steps": 30}, "policies": ["static", "kk"]}
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "c.json")
            with open(path, "w") as f:
                json.dump(config, f)
            from_file = ddpsim.compare(path, progress=False)
        from_dict = ddpsim.compare(config, progress=False)
        self.assertEqual(measured_apart(from_dict.files)["steps.csv"].replace("config dict", path),
                         measured_apart(from_file.files)["steps.csv"])
        self.assertTrue(from_dict.report.startswith("ddpsim compare: config dict\n"))

    def test_replicates_carry_the_intervals(self):
        result = ddpsim.compare(steps=20, policies=["static", "minmax"], replicates=3, progress=False)
        gain = result.summary["replicates"]["policies"]["minmax"]["gain"]
        self.assertEqual(result.summary["replicates"]["seeds"], [0, 2])
        self.assertLess(gain["prediction_interval"][0], gain["gain_pct"])
        self.assertLess(gain["gain_pct"], gain["prediction_interval"][1])
        # The same as a DataFrame, each mean step inside its interval, the first policy without a gain.
        table = result.predictions()
        self.assertEqual(list(table["policy"]), ["static", "minmax"])
        for _, row in table.iterrows():
            self.assertLess(row["step_pi_low"], row["mean_step_ms"])
            self.assertLess(row["mean_step_ms"], row["step_pi_high"])
            self.assertLessEqual(row["step_pi_low"], row["step_seeds_low"])
        self.assertTrue(table["gain_pct"].isna()[0])
        self.assertAlmostEqual(table["gain_pct"][1], gain["gain_pct"])
        self.assertAlmostEqual(table["step_pi_high"][1],
                               result.summary["replicates"]["policies"]["minmax"]["step"]["prediction_interval_ms"][1])
        with self.assertRaisesRegex(ddpsim.UsageError, "replicates=R"):
            ddpsim.compare(steps=5, policies=["static", "minmax"], progress=False).predictions()


class TheOtherVerbs(unittest.TestCase):
    SPEC = {"set": {"training.steps": 20}, "axes": {"training.world_size": [2, 4], "training.global_batch": [16, 32]},
            "policies": ["static", "minmax"]}

    def test_sweep_as_the_binary(self):
        result = ddpsim.sweep(self.SPEC, progress=False)
        self.assertEqual(len(result.rows), 4 * 2)  # cells × policies
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "sweep.json")
            with open(path, "w") as f:
                json.dump(self.SPEC, f)
            out = os.path.join(folder, "out")
            common.run([common.tool("ddpsim"), "sweep", path, "--out", out])
            with open(os.path.join(out, "results.csv")) as f:
                self.assertEqual(result.files["results.csv"], f.read())
        self.assertIn("gain_pct", result.to_pandas().columns)

    def test_an_interrupted_sweep_resumes(self):
        def stop_after_one(what, done, total):
            if what == "sweeping" and done >= 1:
                raise KeyboardInterrupt

        with tempfile.TemporaryDirectory() as folder:
            out = os.path.join(folder, "out")
            # 32 cells, long enough that progress is heard while cells remain (it is heard at most
            # ten times a second: 8 cells once finished within that, and nothing was left to stop).
            spec = dict(self.SPEC, set={"training.steps": 800})
            spec["axes"] = {"training.world_size": [2, 4], "training.global_batch": [8 * k for k in range(1, 17)]}
            with self.assertRaises(KeyboardInterrupt):
                ddpsim.sweep(spec, out, jobs=1, progress=stop_after_one)
            kept = len(os.listdir(os.path.join(out, "cells")))
            self.assertLess(kept, 32)
            resumed = ddpsim.sweep(spec, out, jobs=1, progress=False)
            self.assertIn(f"{kept} already done", resumed.report)
            self.assertEqual(resumed.files["results.csv"], ddpsim.sweep(spec, progress=False).files["results.csv"])

    def test_a_registered_prediction_scored_without_a_model(self):
        folder = os.path.join(SOURCE, "traces", "cpu", "prereg8")
        measured, baseline = (os.path.join(folder, "runs", p, "steps.csv")
                              for p in ("verl-max_token_len-128", "static"))
        v = ddpsim.validate(measured, registered=os.path.join(folder, "prediction.json"), baseline=baseline,
                            progress=False)
        score = v.validation["registered"]["policies"]["verl:max_token_len=128"]
        with open(os.path.join(folder, "validation", "verl-max_token_len-128", "validation.json")) as f:
            committed = json.load(f)["registered"]["policies"]["verl:max_token_len=128"]
        for key in ("measured_gain_pct", "registered_gain_pct", "registered_prediction_interval", "gain_error_pp"):
            self.assertEqual(score[key], committed[key], key)
        self.assertTrue(score["measured_in_prediction_interval"])
        table = v.registered()
        self.assertEqual(list(table.index), ["static", "verl:max_token_len=128"])
        row = table.loc["verl:max_token_len=128"]
        self.assertEqual(row["measured_gain_pct"], committed["measured_gain_pct"])
        self.assertTrue(row["gain_inside"])
        self.assertAlmostEqual(row["tail_error_pct"],
                               100 * (row["registered_p95_over_mean"] / row["measured_p95_over_mean"] - 1))
        steady = v.registered(steady=True)  # the runs' warm-up left out
        self.assertNotEqual(steady.loc["static", "measured_mean_ms"], table.loc["static", "measured_mean_ms"])
        with self.assertRaisesRegex(ddpsim.UsageError, "scored no registered prediction"):
            ddpsim.validate(measured, os.path.join(folder, "model-1core-training.json"), baseline=baseline,
                            progress=False).registered()

    def test_validate_and_calibrate_as_the_binary(self):
        runs = os.path.join(SOURCE, "traces", "cpu", "prereg2", "runs")
        model = os.path.join(SOURCE, "traces", "cpu", "prereg", "model-1core.json")
        sets = {"platform.link_GBps": 10, "platform.latency_us": 5, "platform.host_GBps": 0}
        measured, baseline = (os.path.join(runs, p, "steps.csv") for p in ("minmax-cost-tokens", "static"))
        v = ddpsim.validate(measured, model, baseline=baseline, set=sets, progress=False)
        args = ["--measured", measured, "--model", model, "--baseline", baseline]
        for key, value in sets.items():
            args += ["--set", f"{key}={value}"]
        self.assertEqual(measured_apart(v.files), binary("validate", args))
        self.assertIn("measured_gain_pct", json.dumps(v.validation))
        profile = os.path.join(SOURCE, "traces", "cpu", "prereg", "profile-1core", "steps.csv")
        layout = os.path.join(SOURCE, "traces", "cpu", "experiments", "fresh", "layout.json")
        with tempfile.TemporaryDirectory() as folder:
            fitted = ddpsim.calibrate(profile, os.path.join(folder, "m.json"), base=layout, folds=3, progress=False)
            common.run([common.tool("ddpsim"), "calibrate", profile, "--base", layout, "--folds", "3", "--out",
                        os.path.join(folder, "b.json")])
            with open(os.path.join(folder, "m.json")) as m, open(os.path.join(folder, "b.json")) as b:
                self.assertEqual(m.read(), b.read())
        self.assertIn("forward_ms", fitted.model)
        with self.assertRaisesRegex(ddpsim.InputError, "no-such.csv"):
            ddpsim.calibrate("no-such.csv")

    def test_calibrate_pools_earlier_run_levels_from_a_list(self):
        cpu = os.path.join(SOURCE, "traces", "cpu")
        runs = [os.path.join(cpu, "prereg4", "pre-run", p, "steps.csv") for p in ("static", "sorted")]
        earlier = os.path.join(cpu, "prereg5", "model-1core-training.json")
        fitted = ddpsim.calibrate(os.path.join(cpu, "prereg3", "profile-1core", "steps.csv"), training=runs,
                                  base=os.path.join(cpu, "layout.json"), pool_run_levels=[earlier], progress=False)
        self.assertEqual(fitted.model["run_level"]["pooled"], [{"model": earlier, "levels": 6}])
        self.assertNotEqual(fitted.model["run_level"]["spread"], fitted.model["run_level"]["alone"])


def refused_as_the_binary(test, verb, args, call):
    expected = refusal(verb, args)
    with test.assertRaises((ddpsim.InputError, ddpsim.UsageError)) as caught:
        call()
    test.assertIn(str(caught.exception), expected)


class Refusals(unittest.TestCase):
    def check(self, verb, args, call):
        refused_as_the_binary(self, verb, args, call)

    def test_bad_overrides_and_configs(self):
        self.check("run", ["--set", "training.world_size=0"], lambda: ddpsim.run(**{"training.world_size": 0}))
        self.check("run", ["--set", "training.grad_dtype=int8"], lambda: ddpsim.run(**{"training.grad_dtype": "int8"}))
        self.check("compare", ["--policies", "static,minmx"], lambda: ddpsim.compare(policies="static,minmx"))
        self.check("run", ["--steps", "0"], lambda: ddpsim.run(steps=0))
        with self.assertRaisesRegex(ddpsim.InputError, r"^config dict: training: key \"steps\""):
            ddpsim.run({"training": {"steps": -1}})
        with self.assertRaisesRegex(ddpsim.UsageError, "config: expected a file path, a dict or None"):
            ddpsim.run(42)
        with self.assertRaisesRegex(ddpsim.InputError, "missing.json"):
            ddpsim.run("missing.json")


class PythonArguments(unittest.TestCase):
    """What a notebook passes that the command line never sees: NumPy values, Python types."""

    def test_numpy_values_paths_and_generators_are_their_python_values(self):
        import numpy
        import pathlib

        model = os.path.join(SOURCE, "models", "h100-distilbert-measured.json")
        plain = ddpsim.run(steps=5, progress=False, policies=["static", "minmax"],
                           **{"training.world_size": 2, "training.seed": 3, "model": model})
        from_numpy = ddpsim.run(steps=numpy.int64(5), progress=False, policies=(p for p in ["static", "minmax"]),
                                **{"training.world_size": numpy.int64(2), "training.seed": numpy.array(3),
                                   "model": pathlib.Path(model)})
        self.assertEqual(measured_apart(plain.files), measured_apart(from_numpy.files))

    def test_a_value_is_refused_as_its_python_type(self):
        refused_as_the_binary(self, "run", ["--set", 'training.world_size="8"'],
                              lambda: ddpsim.run(**{"training.world_size": "8"}))
        refusals = {"NaN": lambda: ddpsim.run(**{"simulation.unit_jitter": float("nan")}),
                    "training.seed: object is not a config value": lambda: ddpsim.run(**{"training.seed": object()}),
                    "training.b_max: '\"model\"' is JSON text; pass the value itself":
                        lambda: ddpsim.run(**{"training.b_max": '"model"'}),
                    "steps: expected an integer, got str": lambda: ddpsim.run(steps="5"),
                    "replicates: expected an integer, got bool": lambda: ddpsim.run(replicates=True),
                    "policies: expected policy names": lambda: ddpsim.run(policies=[1, 2]),
                    "progress: expected a callable": lambda: ddpsim.run(progress=5),
                    "set: expected a dict": lambda: ddpsim.validate("m.csv", "model.json", set=["a"]),
                    "give model .*, or registered=": lambda: ddpsim.validate("m.csv"),
                    "registered= names the model .*: leave model out":
                        lambda: ddpsim.validate("m.csv", "model.json", registered="p.json")}
        for message, call in refusals.items():
            with self.assertRaisesRegex(ddpsim.UsageError, message):
                call()
        with self.assertRaisesRegex(ddpsim.InputError, r"^sweep dict: unknown key \"axis\""):
            ddpsim.sweep({"axis": {}}, progress=False)

    def test_gains_of_any_figure(self):
        result = ddpsim.compare(steps=20, policies="static,sorted", progress=False)
        static, ordered = (result.summary["policies"][p] for p in ("static", "sorted"))
        self.assertAlmostEqual(result.gain("sorted", "mean_samples_per_s"),
                               100 * (ordered["mean_samples_per_s"] / static["mean_samples_per_s"] - 1))
        self.assertGreater(result.gain("sorted", "mean_samples_per_s"), 0)  # faster is a gain either way
        self.assertGreater(result.gain("sorted"), 0)
        for figure in ("nope", "solver"):
            with self.assertRaisesRegex(ddpsim.UsageError, f"figure '{figure}': not a number"):
                result.gain("sorted", figure)
        pipeline = ddpsim.run(os.path.join(SOURCE, "configs", "pipeline-study.json"), steps=3, progress=False)
        self.assertEqual(pipeline.gain(pipeline.policies[0]), 0.0)  # its mean step, not a DDP figure

    def test_notes_stay_with_the_figures(self):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            noted = ddpsim.run(steps=3, progress=False, **{"training.data_parallel": "fsdp", "training.bucket_mb": 5})
        self.assertEqual(["note: " + n for n in noted.provenance["notes"]], noted.notes)
        self.assertNotIn("notes", ddpsim.run(steps=3, progress=False).provenance)
        # A model's measured range ends before the registered GPU setting's longest batch: the
        # prediction is its extrapolation, said with the figures too.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            beyond = ddpsim.run(os.path.join(SOURCE, "traces", "h100", "prereg", "config.json"), steps=3, progress=False)
        self.assertTrue(any("was measured up to b = 48, L = 66" in n for n in beyond.notes), beyond.notes)
        self.assertEqual(["note: " + n for n in beyond.provenance["notes"]],
                         [n for n in beyond.notes if n.startswith("note: ")])

    def test_other_threads_run_meanwhile(self):
        ticks, done = [0], threading.Event()

        def count():
            while not done.is_set():
                ticks[0] += 1
                time.sleep(0.005)

        counter = threading.Thread(target=count)
        counter.start()
        started = time.monotonic()
        ddpsim.run(steps=1000, policies="static", progress=False,
                   **{"simulation.mode": "full", "training.world_size": 64, "training.global_batch": 512,
                      "platform.topology": "cluster"})
        took = time.monotonic() - started
        done.set()
        counter.join()
        self.assertGreater(took, 0.2)  # long enough to tell
        self.assertGreater(ticks[0], took / 0.005 / 4)  # held, the GIL let it tick a few times at most


class ProgressAndStop(unittest.TestCase):
    def test_every_call_is_a_fresh_simulator(self):
        first, second = (ddpsim.compare(steps=30, progress=False).files for _ in range(2))
        self.assertEqual(measured_apart(first), measured_apart(second))

    def test_progress_is_heard_and_an_exception_stops_the_work(self):
        heard = []
        ddpsim.run(steps=400, policies="static", progress=lambda what, done, total: heard.append((what, done, total)))
        self.assertTrue(heard)
        self.assertEqual(heard[-1][1], heard[-1][2])  # the end is always reported

        def stop(what, done, total):
            raise KeyboardInterrupt

        # A temporary folder of this test's own: the suite's other tests make ddpsim- folders too.
        with tempfile.TemporaryDirectory() as private:
            shared, tempfile.tempdir = tempfile.tempdir, private
            try:
                with self.assertRaises(KeyboardInterrupt):
                    ddpsim.run(steps=400, policies="static", progress=stop)
            finally:
                tempfile.tempdir = shared
            self.assertEqual(os.listdir(private), [])  # nothing half-written left behind
        self.assertEqual(len(ddpsim.run(steps=5, progress=False).files), 2)  # and the next run is whole
        self.assertEqual(len(ddpsim.run(steps=5, progress=True).files), 2)  # a bar where tqdm is, else none

    def test_notes_become_warnings(self):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = ddpsim.run(steps=5, progress=False, **{"simulation.first_use": "shared"})
        self.assertTrue(any("first_use has no effect" in str(w.message) for w in caught), result.notes)


class Version(unittest.TestCase):
    def test_version_is_the_binary_s(self):
        out = common.run([common.tool("ddpsim"), "--version"]).strip()
        self.assertEqual(out, "ddpsim " + ddpsim.__version__)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)
