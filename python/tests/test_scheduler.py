"""Same decisions: for every policy and three seeds, each rank's BalancedBatchSampler yields the
batches the C++ scheduler plans, and those are the batches a ddptrain run of the same setting
trained on (its trace's per-rank batch size, padded length, tokens, B_t, loss weight and
micro-batches)."""

import csv
import os
import tempfile
import unittest

import common

common.need_torch()

import ddpsim  # noqa: E402
from ddpsim.torch import BalancedBatchSampler  # noqa: E402

POLICIES = ["static", "minmax", "kk", "sorted", "token_budget", "verl"]
G, B, SAMPLES, MAX_LENGTH, STEPS = 4, 16, 3000, 64, 4


def read_trace(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


class SameDecisions(unittest.TestCase):
    def test_policies_by_seed(self):
        ddptrain = common.tool("ddptrain")
        for seed in (0, 1, 2):
            lengths = ddpsim.synthetic_lengths("sst2", SAMPLES, MAX_LENGTH, seed)
            with tempfile.TemporaryDirectory() as out:
                # Every policy in one process, a step of each in turn (as ddptrain --policy A,B runs them).
                common.run([ddptrain, "--model", "tiny", "--max-length", str(MAX_LENGTH), "--synthetic-lengths",
                            "sst2", "--synthetic-samples", str(SAMPLES), "--emulate-ranks", str(G),
                            "--global-batch", str(B), "--steps", str(STEPS), "--seed", str(seed), "--threads", "1",
                            "--log-every", "100", "--policy", ",".join(POLICIES), "--out", out])
                for policy in POLICIES:
                    with self.subTest(seed=seed, policy=policy):
                        self.check(policy, seed, lengths, read_trace(os.path.join(out, policy, "steps.csv")))

    def check(self, policy, seed, lengths, trace):
        scheduler = ddpsim.Scheduler(lengths, world_size=G, global_batch=B, policy=policy, seed=seed,
                                     max_length=MAX_LENGTH)
        samplers = [BalancedBatchSampler(lengths, world_size=G, rank=g, global_batch=B, policy=policy, seed=seed,
                                         max_length=MAX_LENGTH) for g in range(G)]
        yielded = [list(s) for s in samplers]
        self.assertEqual(len(trace), STEPS * G)
        for step in range(STEPS):
            plan = scheduler.next()
            self.assertAlmostEqual(sum(plan.loss_weights) / G, 1.0, places=9)
            for g in range(G):
                indices = plan.indices(g)
                # The sampler of rank g, alone, plans what the library plans for all ranks.
                self.assertEqual(yielded[g][step], indices)
                self.assertEqual(samplers[g].loss_weight(step), plan.loss_weight(g))
                self.assertEqual(samplers[g].micro_sizes(step), plan.micro_sizes(g))
                # ... and what ddptrain trained on: the row of (step, rank g) in its trace.
                row = trace[step * G + g]
                self.assertEqual((int(row["step"]), int(row["rank"])), (step, g))
                mine = [lengths[i] for i in indices]
                self.assertEqual(int(row["batch_size"]), len(indices))
                self.assertEqual(int(row["max_len"]), max(mine, default=0))
                self.assertEqual(int(row["real_tokens"]), sum(mine))
                self.assertEqual(int(row["global_batch"]), plan.global_batch)
                self.assertAlmostEqual(float(row["loss_weight"]), plan.loss_weight(g), places=6)
                if "micro_sizes" in row:
                    self.assertEqual([int(x) for x in row["micro_sizes"].split(";")], plan.micro_sizes(g))
                self.assertEqual(plan.row(g)["real_tokens"], sum(mine))
        self.assertEqual(scheduler.steps_done, STEPS)

    def test_policy_parser(self):
        self.assertEqual(ddpsim.parse_policy("minmax:cost=tokens_sq:buffer=32").label, "minmax:buffer=32:cost=tokens_sq")
        self.assertEqual(ddpsim.parse_policy("kk").options, {})
        self.assertEqual(ddpsim.policy_names(), POLICIES)
        resolved = ddpsim.Scheduler([8] * 64, world_size=2, global_batch=8, policy="minmax").resolved_policy
        self.assertTrue(resolved.startswith("minmax:buffer="), resolved)

    def test_seeded_and_resumable(self):
        lengths = ddpsim.synthetic_lengths("sst2", 2000, 128, 5)
        a = ddpsim.Scheduler(lengths, world_size=8, global_batch=64, policy="kk", seed=5)
        b = ddpsim.Scheduler(lengths, world_size=8, global_batch=64, policy="kk", seed=5)
        every = lambda plan: [plan.indices(g) for g in range(8)]  # noqa: E731
        first = [every(a.next()) for _ in range(10)]
        b.skip(6)
        self.assertEqual(every(b.next()), first[6])
        other = ddpsim.Scheduler(lengths, world_size=8, global_batch=64, policy="kk", seed=6).next()
        self.assertNotEqual(every(other), first[0])


if __name__ == "__main__":
    unittest.main()
