"""BalancedBatchSampler in a DataLoader with two worker processes: the batches arrive as the
sampler plans them, every sample at most once per epoch (all but those still in the prefetch
buffers at the epoch's end), set_epoch reorders deterministically, and a run resumed at step k
gets the remaining batches of the straight run."""

import unittest

import common

common.need_torch()

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import ddpsim  # noqa: E402
from ddpsim.torch import BalancedBatchSampler  # noqa: E402

G, B, N = 2, 32, 1000
LENGTHS = ddpsim.synthetic_lengths("sst2", N, 128, 3)


class Indexed(Dataset):
    """Sample i is its index and its length, so a batch shows what was loaded."""

    def __len__(self):
        return N

    def __getitem__(self, i):
        return torch.tensor([i, LENGTHS[i]])


def sampler(rank, policy="minmax", **kwargs):
    return BalancedBatchSampler(LENGTHS, world_size=G, rank=rank, global_batch=B, policy=policy, seed=11, **kwargs)


def loaded(s):
    loader = DataLoader(Indexed(), batch_sampler=s, num_workers=2)
    return [batch[:, 0].tolist() for batch in loader]


class DataLoaderRuns(unittest.TestCase):
    def test_epoch_covers_the_data_once(self):
        for policy in ("minmax", "token_budget", "verl"):
            with self.subTest(policy=policy):
                ranks = [sampler(g, policy) for g in range(G)]
                batches = [loaded(s) for s in ranks]
                for g in range(G):
                    self.assertEqual(batches[g], list(ranks[g]))
                    self.assertEqual(len(batches[g]), len(ranks[g]))
                seen = [i for per_rank in batches for batch in per_rank for i in batch]
                self.assertEqual(len(seen), len(set(seen)), "a sample came twice in one epoch")
                left = N - len(seen)
                self.assertLessEqual(left, G * ranks[0].buffer_size + N % G + B)
                self.assertGreater(len(ranks[0]), 0)
                for step in range(len(ranks[0])):  # the ranks' weights average to 1: the global mean
                    self.assertAlmostEqual(sum(s.loss_weight(step) for s in ranks) / G, 1.0, places=9)
                    sizes = [len(batches[g][step]) for g in range(G)]
                    self.assertEqual(ranks[0].shape(step)["global_batch"], sum(sizes))
                    if policy != "token_budget":
                        self.assertEqual(sum(sizes), B)

    def test_set_epoch(self):
        s = sampler(0)
        first = loaded(s)
        s.set_epoch(1)
        second = loaded(s)
        self.assertNotEqual(first, second)
        again = sampler(0)
        again.set_epoch(1)
        self.assertEqual(loaded(again), second)  # a fresh sampler at epoch 1: the same order
        again.set_epoch(0)
        self.assertEqual(loaded(again), first)

    def test_resume_at_step(self):
        straight = sampler(1)
        straight.set_epoch(2)
        batches = loaded(straight)
        k = len(batches) // 3
        resumed = sampler(1, start_step=k)
        resumed.set_epoch(2, start_step=k)
        self.assertEqual(len(resumed), len(batches) - k)
        self.assertEqual(loaded(resumed), batches[k:])
        self.assertEqual(resumed.loss_weight(k), straight.loss_weight(k))

    def test_micro_batches(self):
        s = sampler(0, "verl")
        for step, batch in enumerate(s):
            sizes = s.micro_sizes(step)
            self.assertEqual(sum(sizes), len(batch))
            loss = torch.tensor(2.0)
            parts = [s.scale_loss(loss, step, micro=k).item() for k in range(len(sizes))]
            self.assertAlmostEqual(sum(parts), s.scale_loss(loss, step).item(), places=5)


if __name__ == "__main__":
    unittest.main()
