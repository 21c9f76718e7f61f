"""Gradient equivalence: two Gloo processes training a small transformer under DDP, each on the
batch its BalancedBatchSampler gives it with the loss scaled by its weight, average to the
gradient of one process on the whole global batch (relative error ≤ 1e-5), for uneven batches,
a varying global batch (token_budget), verl's batches and three micro-batches per step
(gradient accumulation under no_sync). Without the weights the same steps miss it by far, which
shows the weights are what makes them equal."""

import unittest

import common

common.need_torch()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import ddpsim  # noqa: E402
from ddpsim.torch import BalancedBatchSampler  # noqa: E402

G, B, STEPS = 2, 24, 3
LENGTHS = ddpsim.synthetic_lengths("sst2", 500, 64, 4)


def flat_grad(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def relative_error(a, b):
    return ((a - b).norm() / b.norm()).item()


def ddp_gradient(model, sampler, step, indices, weighted):
    """This rank's step under DDP: micro-batches under no_sync but the last, each loss scaled."""
    sizes = sampler.micro_sizes(step)
    start = 0
    for k, size in enumerate(sizes):
        ids, mask, labels = common.collate(LENGTHS, indices[start:start + size])
        start += size
        loss = F.cross_entropy(model(ids, mask), labels)
        scaled = sampler.scale_loss(loss, step, micro=k) if weighted else loss / len(sizes)
        if k + 1 < len(sizes):
            with model.no_sync():
                scaled.backward()
        else:
            scaled.backward()
    return flat_grad(model.module)


def worker(rank, world_size, policy, micro_batches, errors):
    model = DDP(common.small_transformer(seed=1))
    reference = common.small_transformer(seed=1)
    reference.load_state_dict(model.module.state_dict())
    sampler = BalancedBatchSampler(LENGTHS, world_size=world_size, rank=rank, global_batch=B, policy=policy, seed=2,
                                   micro_batches=micro_batches)
    everyone = ddpsim.Scheduler(LENGTHS, world_size=world_size, global_batch=B, policy=policy, seed=2,
                                micro_batches=micro_batches)
    for step, indices in enumerate(sampler):
        if step == STEPS:
            break
        plan = everyone.next()
        assert plan.indices(rank) == indices
        whole = [i for g in range(world_size) for i in plan.indices(g)]
        ids, mask, labels = common.collate(LENGTHS, whole)
        reference.zero_grad()
        F.cross_entropy(reference(ids, mask), labels).backward()
        expected = flat_grad(reference)
        for weighted in (True, False):
            model.zero_grad()
            got = ddp_gradient(model, sampler, step, indices, weighted)
            sizes = [len(plan.indices(g)) for g in range(world_size)]
            if rank == 0:
                errors.append((policy, step, weighted, sizes, relative_error(got, expected)))
                assert micro_batches == 1 or len(sampler.micro_sizes(step)) == micro_batches
    if rank == 0:
        for policy, step, weighted, sizes, err in errors:
            print(f"{policy} step {step} batches {sizes} {'weighted' if weighted else 'unweighted'}: "
                  f"relative error {err:.2e}")
        weighted_errors = [e for *_, w, _, e in errors if w]
        assert max(weighted_errors) <= 1e-5, f"weighted DDP gradient off the global one: {errors}"
        uneven = [e for _, _, w, sizes, e in errors if not w and sizes[0] != sizes[1]]
        if policy != "verl":  # verl splits the samples evenly: its weights are all 1
            assert uneven and min(uneven) > 1e-3, f"uneven steps without weights should miss: {errors}"
    dist.barrier()


class GradientEquivalence(unittest.TestCase):
    def test_two_gloo_ranks(self):
        for policy, micro_batches in (("minmax", 1), ("token_budget", 1), ("verl", 1), ("minmax", 3)):
            with self.subTest(policy=policy, micro_batches=micro_batches):
                common.spawn(worker, G, policy, micro_batches, [])


if __name__ == "__main__":
    unittest.main()
