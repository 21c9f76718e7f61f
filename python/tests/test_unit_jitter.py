"""ddpsim.torch.unit_jitter: blocks that spin for log-normal times of a known σ give that σ back,
blocks that spin alike give about none, a real decoder's blocks give a finite σ that a config
takes, and what it refuses."""

import math
import random
import time
import unittest

import common

common.need_torch()

import torch  # noqa: E402

import ddpsim  # noqa: E402
from ddpsim.torch.decoder import decoder_from_config  # noqa: E402
from ddpsim.torch import unit_jitter  # noqa: E402


def spin(ms: float) -> None:
    until = time.perf_counter() + ms / 1e3
    while time.perf_counter() < until:
        pass


class _Spin(torch.autograd.Function):
    """Spins for a drawn time in forward and another in backward."""

    @staticmethod
    def forward(ctx, x, draw):
        ctx.draw = draw
        spin(draw())
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        spin(ctx.draw())
        return grad, None


class Block(torch.nn.Module):
    def __init__(self, ms: float, sigma: float, rng: random.Random):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))
        self.draw = lambda: ms * math.exp(sigma * rng.gauss(0, 1) - sigma * sigma / 2)

    def forward(self, x):
        return _Spin.apply(x * self.weight, self.draw)


def spinning(sigma: float, blocks: int = 8, input_grad: bool = True):
    rng = random.Random(3)
    model = torch.nn.Sequential(*[Block(1.0 + 0.5 * (i % 3), sigma, rng) for i in range(blocks)])

    def step():
        model(torch.ones(4, requires_grad=input_grad)).sum().backward()

    return model, step


class UnitJitterTest(unittest.TestCase):
    def test_known_sigma_comes_back(self):
        model, step = spinning(0.3)
        got = unit_jitter(list(model), step, steps=60, warmup=2)
        self.assertAlmostEqual(got["sigma"], 0.3, delta=0.05)
        self.assertAlmostEqual(got["forward_sigma"], 0.3, delta=0.06)
        self.assertAlmostEqual(got["backward_sigma"], 0.3, delta=0.06)
        self.assertEqual((got["blocks"], got["steps"], got["device"]), (8, 60, "cpu"))

    def test_a_first_block_without_input_gradient_is_left_out_of_backward(self):
        # Its backward hook fires before its backward runs: timed, it would read as no time at all.
        model, step = spinning(0.3, input_grad=False)
        got = unit_jitter(list(model), step, steps=60, warmup=2)
        self.assertAlmostEqual(got["backward_sigma"], 0.3, delta=0.06)

    def test_alike_blocks_give_little(self):
        # Halfway to the 0.3 above: this shared VM's own jitter gave 0.11 over 30 steps once.
        model, step = spinning(0.0)
        self.assertLess(unit_jitter(list(model), step, steps=60)["sigma"], 0.15)

    def test_a_decoder_gives_a_sigma_a_config_takes(self):
        torch.manual_seed(0)
        lm = decoder_from_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 4,
                                  "vocab_size": 300})
        ids = torch.randint(1, 300, (4, 64))

        def step():
            lm(ids).float().square().mean().backward()

        got = unit_jitter(lm.model.layers, step, steps=10, warmup=2)
        self.assertTrue(0 <= got["sigma"] < 3, got)
        config = {"training": {"data_parallel": "fsdp", "steps": 5}, "simulation": {"unit_jitter": got["sigma"]}}
        result = ddpsim.run(config)
        self.assertEqual(result.summary["config"]["simulation"]["unit_jitter"], got["sigma"])
        self.assertIn("unit jitter", result.report)

    def test_refusals(self):
        model, step = spinning(0.0, blocks=2)
        with self.assertRaisesRegex(ddpsim.InputError, "blocks: at least 3"):
            unit_jitter(list(model), step)
        model, step = spinning(0.0)
        with self.assertRaisesRegex(ddpsim.InputError, "steps is an integer of at least 3"):
            unit_jitter(list(model), step, steps=2)
        with self.assertRaisesRegex(ddpsim.InputError, "block 1 ran forward 0 and backward 0 times in a step"):
            unit_jitter(list(model), lambda: model[0](torch.ones(2, requires_grad=True)).sum().backward())
        with self.assertRaisesRegex(ddpsim.InputError, "block 0 ran forward 2 and backward 2 times"):
            unit_jitter(list(model), lambda: (step(), step()))  # two micro-batches a step
        with self.assertRaisesRegex(ddpsim.InputError, "blocks: a module is listed twice"):
            unit_jitter([model[0]] + list(model), step)
        with self.assertRaisesRegex(ddpsim.InputError, "the backward of only 1 block can be timed"):
            short, step = spinning(0.0, blocks=3, input_grad=False)
            unit_jitter(list(short), step)


if __name__ == "__main__":
    unittest.main()
