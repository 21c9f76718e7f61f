"""A decoder LLM in plain PyTorch, built from a Hugging Face ``config.json`` (llama, mistral,
qwen2, qwen3): RMSNorm, rotary positions, SwiGLU, grouped-query attention through causal SDPA,
Qwen2's q/k/v biases, Qwen3's per-head q/k norms, tied or untied LM head. No ``transformers``:
an example model users recognise, whose parameters are named and registered as Hugging Face's
(so DDP's buckets match ddpsim's spec derivation, which a test holds), for measuring what a
spec-derived model predicts. Weights are freshly initialised: it is for timing, not for text.

    model = decoder_from_config("models/hf/qwen3-0.6b.json", device="cuda", dtype=torch.bfloat16)
    loss = model.loss(ids, mask)     # causal LM loss over the real tokens of a padded batch
    loss = model.loss(ids, lengths=lengths)  # or of sequences packed into one row (no padding)

Packed sequences are remove-padding training, as VeRL's ``use_remove_padding`` runs it: the
samples lie end to end in one row, the linear layers see only real tokens, and each sample
attends to itself alone with positions from 0, so a step costs per token and per attention pair
(ddpsim's ``training.attention: "packed"``). Each sample's attention is its own SDPA call, a cost
per sample that ddpsim's packed form does not hold (small on a CPU); a varlen kernel does the
same work in one launch.
"""

from __future__ import annotations

import json
import os
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

import ddpsim

FAMILIES = ("llama", "mistral", "qwen2", "qwen3")


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float, device=None):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size, device=device))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return (x.float() * scale).to(x.dtype) * self.weight


def _attention(q, k, v, keep):
    """Attention of queries to the keys ``keep`` allows (None: causal): PyTorch's SDPA where it
    has one (2.0 on), else its computation written out (Debian's 1.13)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=keep is None)
    L = q.shape[-2]
    if keep is None:
        keep = torch.ones(L, L, dtype=torch.bool, device=q.device).tril()
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    return torch.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1) @ v


def _keep(L: int, window: int, device) -> Optional[torch.Tensor]:
    """The keys each of L queries sees: None (causal) unless a window of ``window`` tokens is shorter."""
    if not window or L <= window:
        return None
    i = torch.arange(L, device=device)
    return (i[None, :] <= i[:, None]) & (i[:, None] - i[None, :] < window)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions on the two halves of each head's dimensions, as Llama applies them."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        d = c["device"]
        h, self.heads, self.kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.head_dim = c["head_dim"]
        qkv_bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
        o_bias = c["model_type"] != "qwen2" and c.get("attention_bias", False)
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=qkv_bias, device=d)
        self.k_proj = nn.Linear(h, self.kv * self.head_dim, bias=qkv_bias, device=d)
        self.v_proj = nn.Linear(h, self.kv * self.head_dim, bias=qkv_bias, device=d)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=o_bias, device=d)
        if c["model_type"] == "qwen3":  # registered after the projections, as Qwen3Attention does
            self.q_norm = RMSNorm(self.head_dim, c["rms_norm_eps"], d)
            self.k_norm = RMSNorm(self.head_dim, c["rms_norm_eps"], d)
        self.window = c["window"]

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, lengths=None) -> torch.Tensor:
        b, L, _ = x.shape
        q = self.q_proj(x).view(b, L, self.heads, self.head_dim)
        k = self.k_proj(x).view(b, L, self.kv, self.head_dim)
        v = self.v_proj(x).view(b, L, self.kv, self.head_dim)
        if hasattr(self, "q_norm"):
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k = k.repeat_interleave(self.heads // self.kv, dim=1)  # each key/value head serves its group
        v = v.repeat_interleave(self.heads // self.kv, dim=1)
        if lengths is None:
            out = _attention(q, k, v, _keep(L, self.window, x.device))
        else:  # packed: each sample attends to itself alone
            pieces, start = [], 0
            for n in lengths:
                part = slice(start, start + n)
                pieces.append(_attention(q[:, :, part], k[:, :, part], v[:, :, part], _keep(n, self.window, x.device)))
                start += n
            out = torch.cat(pieces, dim=2)
        return self.o_proj(out.transpose(1, 2).reshape(b, L, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        h, ff, bias, d = c["hidden_size"], c["intermediate_size"], c.get("mlp_bias", False), c["device"]
        self.gate_proj = nn.Linear(h, ff, bias=bias, device=d)
        self.up_proj = nn.Linear(h, ff, bias=bias, device=d)
        self.down_proj = nn.Linear(ff, h, bias=bias, device=d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c: dict, windowed: bool):
        super().__init__()
        self.self_attn = Attention(dict(c, window=c["window"] if windowed else 0))
        self.mlp = MLP(c)
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], c["device"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], c["device"])

    def forward(self, x, cos, sin, lengths=None):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, lengths)
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderModel(nn.Module):
    def __init__(self, c: dict):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"], device=c["device"])
        self.layers = nn.ModuleList(DecoderLayer(c, i in c["windowed"]) for i in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"], c["device"])


class DecoderForCausalLM(nn.Module):
    """``model`` (embeddings, layers, final norm) and ``lm_head`` (absent when tied), named as
    Hugging Face names them."""

    def __init__(self, c: dict):
        super().__init__()
        self.config = c
        self.model = DecoderModel(c)
        if not c.get("tie_word_embeddings", False):
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False, device=c["device"])
        half = c["head_dim"] // 2
        exponents = torch.arange(0, half, dtype=torch.float32, device=c["device"]) / half
        inverse = 1.0 / (c.get("rope_theta", 10000.0) ** exponents)
        self.register_buffer("inverse_frequency", inverse, persistent=False)

    def forward(self, ids: torch.Tensor, lengths=None) -> torch.Tensor:
        """Logits for each position of ``ids``: b × L padded, or, with ``lengths``, one row of the
        samples of those lengths packed end to end (1 × Σ lengths)."""
        x = self.model.embed_tokens(ids)
        if lengths is None:
            positions = torch.arange(ids.shape[1], device=ids.device, dtype=torch.float32)
        else:
            lengths = _packed_lengths(ids, lengths)
            positions = torch.cat([torch.arange(n, device=ids.device, dtype=torch.float32) for n in lengths])
        angles = positions[:, None] * self.inverse_frequency
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        for layer in self.model.layers:
            x = layer(x, cos, sin, lengths)
        x = self.model.norm(x)
        head = self.lm_head.weight if hasattr(self, "lm_head") else self.model.embed_tokens.weight
        return x @ head.t()

    def loss(self, ids: torch.Tensor, mask: Optional[torch.Tensor] = None, lengths=None) -> torch.Tensor:
        """Mean next-token cross-entropy over the real tokens (``mask`` true) of a padded batch,
        or within each sample of a packed row (``lengths``)."""
        if lengths is not None:
            return packed_lm_loss(self(ids, lengths), ids, lengths)
        return causal_lm_loss(self(ids), ids, mask)


def _packed_lengths(ids: torch.Tensor, lengths) -> list[int]:
    """``lengths`` as ints that tile the packed row ``ids`` exactly."""
    lengths = [int(n) for n in lengths]
    if not lengths or ids.dim() != 2 or ids.shape[0] != 1 or min(lengths) < 1 or sum(lengths) != ids.shape[1]:
        raise ddpsim.InputError(f"lengths {lengths}: a packed batch is one row (1 × Σ lengths) of samples of at least "
                                f"one token; ids is {tuple(ids.shape)}")
    return lengths


def causal_lm_loss(logits: torch.Tensor, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of ``logits`` over the real tokens of ``ids``: for a model
    wrapped in DDP, whose forward (not ``loss``) must run for DDP to see every parameter used."""
    logits = logits[:, :-1].float()
    targets = ids[:, 1:].masked_fill(~mask[:, 1:], -100)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=-100)


def packed_lm_loss(logits: torch.Tensor, ids: torch.Tensor, lengths) -> torch.Tensor:
    """Mean next-token cross-entropy of a packed row's ``logits``, each sample predicting only its
    own next tokens (its last token predicts none)."""
    lengths = _packed_lengths(ids, lengths)
    targets = ids.roll(-1, dims=1)
    ends = torch.tensor(lengths, device=ids.device).cumsum(0) - 1
    targets[0, ends] = -100
    return F.cross_entropy(logits[0].float(), targets[0], ignore_index=-100)


def _sample_ids(i: int, n: int, vocab_size: int) -> torch.Tensor:
    """Sample i's n token ids: random, but fixed by its index, so that a step's batch is the same on every run."""
    return torch.randint(1, vocab_size, (n,), generator=torch.Generator().manual_seed(i))


def packed_batch(lengths, indices, vocab_size: int) -> tuple[torch.Tensor, list[int]]:
    """The samples ``indices`` of ``lengths`` packed end to end into one row (1 × Σ s), and their
    lengths: :func:`random_batch`'s samples without padding."""
    sizes = [int(lengths[i]) for i in indices]
    if not sizes:
        raise ddpsim.InputError("packed_batch: no samples (indices is empty)")
    return torch.cat([_sample_ids(i, n, vocab_size) for i, n in zip(indices, sizes)])[None, :], sizes


def random_batch(lengths, indices, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids for the samples ``indices`` of ``lengths``, padded to the longest, and the padding
    mask: a batch to time the decoder on real lengths without a tokenizer."""
    L = max(lengths[i] for i in indices)
    ids = torch.zeros(len(indices), L, dtype=torch.long)
    mask = torch.zeros(len(indices), L, dtype=torch.bool)
    for row, i in enumerate(indices):
        n = lengths[i]
        ids[row, :n] = _sample_ids(i, n, vocab_size)
        mask[row, :n] = True
    return ids, mask


def _normalised(config: dict, origin: str) -> dict:
    """The keys the model reads, with Hugging Face's defaults and its sliding-window rules (as
    ddpsim's spec derivation reads them)."""
    family = config.get("model_type")
    if family not in FAMILIES:
        raise ddpsim.InputError(f"{origin}: model_type {family!r}: the decoder is built for {', '.join(FAMILIES)}")
    c = dict(config)
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size"):
        if not isinstance(c.get(key), int) or c[key] < 1:
            raise ddpsim.InputError(f"{origin}: a {family} config needs \"{key}\" as a positive integer")
    c.setdefault("num_key_value_heads", c["num_attention_heads"])
    c["num_key_value_heads"] = c["num_key_value_heads"] or c["num_attention_heads"]
    c["head_dim"] = c.get("head_dim") or (128 if family == "qwen3" else c["hidden_size"] // c["num_attention_heads"])
    c.setdefault("rms_norm_eps", 1e-6)
    c["rms_norm_eps"] = c["rms_norm_eps"] or 1e-6
    layers, window = c["num_hidden_layers"], c.get("sliding_window") or 0
    if c.get("layer_types"):
        windowed = {i for i, t in enumerate(c["layer_types"]) if t == "sliding_attention"}
    elif family == "mistral":
        windowed = set(range(layers)) if window else set()
    elif family in ("qwen2", "qwen3") and c.get("use_sliding_window"):
        windowed = set(range(c.get("max_window_layers", 28), layers))
    else:
        windowed = set()
    c["windowed"], c["window"] = windowed, window if windowed else 0
    return c


def decoder_from_config(config: Union[str, os.PathLike, dict], *, device=None,
                        dtype: torch.dtype = torch.float32) -> DecoderForCausalLM:
    """The decoder a Hugging Face config (a path or a dict) describes, with fresh weights, on
    ``device`` in ``dtype`` (``device="meta"`` builds it without memory, to inspect its layout)."""
    origin = "config"
    if not isinstance(config, dict):
        origin = os.fspath(config)
        with open(origin, encoding="utf-8") as f:
            config = json.load(f)
    c = dict(_normalised(config, origin), device=torch.device(device or "cpu"))
    return DecoderForCausalLM(c).to(dtype=dtype)
