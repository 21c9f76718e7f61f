"""What the Python tests share: torch or a skip (ctest exit code 77), the tools beside the
build, Gloo process groups of real processes, and a small transformer built from torch.nn."""

import os
import subprocess
import sys
import tempfile

SKIP = 77


def need_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skip: this python3 has no torch (Debian: apt-get install python3-torch)")
        sys.exit(SKIP)


def tool(name):
    """The ddpsim or ddptrain binary ctest passes in the environment."""
    path = os.environ.get(name.upper())
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"set {name.upper()} to the {name} binary (ctest does)")
    return path


def run(args, expect=0):
    """Runs a command; returns its combined output, failing on another exit code."""
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != expect:
        raise AssertionError(f"{' '.join(map(str, args))}: exit {done.returncode}, expected {expect}\n"
                             f"{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


def spawn(fn, world_size, *args, pin=False):
    """Runs fn(rank, world_size, *args) in `world_size` processes joined by Gloo; with `pin`,
    rank r on core r alone (as ddptrain pins its ranks), for timings."""
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "rendezvous")
        mp.spawn(_entry, args=(fn, world_size, init, pin, args), nprocs=world_size, join=True)


def _entry(rank, fn, world_size, init, pin, args):
    import torch
    import torch.distributed as dist

    cores = sorted(os.sched_getaffinity(0))
    if pin and len(cores) >= world_size:
        os.sched_setaffinity(0, {cores[rank]})
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world_size)
    try:
        fn(rank, world_size, *args)
    finally:
        dist.destroy_process_group()
    # Leaves without finalizing the interpreter: the group outlives destroy_process_group (the
    # models hold it), and where one of Gloo's threads is still releasing a collective's tensors
    # as the interpreter finalizes, torch 1.13 aborts the process (SIGABRT after a test passed,
    # 4 of 64 runs of py_tracer on a 2-core VM). A worker closes its files before it returns.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def small_transformer(vocab=1000, d_model=32, layers=2, classes=2, seed=0):
    """A sequence classifier from torch.nn: embeddings, a transformer encoder, mean pooling."""
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, d_model)
            self.position = nn.Embedding(512, d_model)
            layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=2 * d_model, dropout=0.0,
                                               batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, layers)
            self.head = nn.Linear(d_model, classes)

        def forward(self, ids, mask):
            x = self.embed(ids) + self.position(torch.arange(ids.shape[1]))
            x = self.encoder(x, src_key_padding_mask=~mask)
            x = (x * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
            return self.head(x)

    torch.manual_seed(seed)
    return Classifier()


def collate(lengths, indices, vocab=1000):
    """A padded batch of the samples: token ids drawn from each index (so a sample is always the
    same), a padding mask and a label."""
    import torch

    L = max(lengths[i] for i in indices)
    ids = torch.zeros(len(indices), L, dtype=torch.long)
    mask = torch.zeros(len(indices), L, dtype=torch.bool)
    labels = torch.tensor([i % 2 for i in indices])
    for row, i in enumerate(indices):
        g = torch.Generator().manual_seed(i)
        ids[row, : lengths[i]] = torch.randint(1, vocab, (lengths[i],), generator=g)
        mask[row, : lengths[i]] = True
    return ids, mask, labels


def loss_of(model, batch):
    """The classifier's loss on a (ids, mask, labels) batch, as profile() takes it."""
    import torch.nn.functional as F

    ids, mask, labels = batch
    return F.cross_entropy(model(ids, mask), labels)


def full_batch(b, L):
    """A b × L batch with no padding, the same for the same shape: profile()'s make_batch."""
    import torch

    ids = torch.randint(1, 1000, (b, L), generator=torch.Generator().manual_seed(b * 1000 + L))
    return ids, torch.ones(b, L, dtype=torch.bool), torch.zeros(b, dtype=torch.long)


def traced_step(tracer, sampler, step, optimizer, loss_fn):
    """One training step under the tracer, as a user writes it: forward, the loss scaled for
    DDP and backward, the optimizer, each its phase, the step's shape from the sampler."""
    with tracer.step(**sampler.shape(step)) as s:
        with s.phase("fwd"):
            loss = loss_fn()
        with s.phase("bwd"):
            sampler.scale_loss(loss, step).backward()
        with s.phase("opt"):
            optimizer.step()
            optimizer.zero_grad()
        s.loss = loss
