"""GPT: a decoder-only Transformer language model (Radford et al. 2019, "Language models are
unsupervised multitask learners" — GPT-2's pre-layer-norm blocks; an addition to the GDP/GO
workloads, as today's dominant model family).

Token + learned position embeddings → ``layers`` blocks (pre-LN causal multi-head
self-attention with heads sliced out one by one, pre-LN GELU MLP, residuals) → final layer
norm → logits with the token embedding tied as the output projection. Scopes
``layer_{i}/attention/head_{h}``, ``layer_{i}/mlp``.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"layers": 2, "heads": 2, "d_model": 8, "seq": 8, "vocab": 32, "batch": 2},
    "medium": {"layers": 12, "heads": 4, "d_model": 8, "seq": 8, "vocab": 32, "batch": 2},
    "large": {"layers": 48, "heads": 12, "d_model": 24, "seq": 8, "vocab": 32, "batch": 2},
}


def spec(cfg: dict) -> dict:
    d = cfg["d_model"]

    def block():
        return {"ln1": L.layer_norm_params(d), "qkv": L.dense_params(d, 3 * d),
                "proj": L.dense_params(d, d), "ln2": L.layer_norm_params(d),
                "fc": L.dense_params(d, 4 * d), "fc_proj": L.dense_params(4 * d, d)}

    return {"wte": L.weight(cfg["vocab"], d, fan_in=d),
            "wpe": L.weight(cfg["seq"], d, fan_in=d),
            "blocks": [block() for _ in range(cfg["layers"])],
            "ln_f": L.layer_norm_params(d)}


def attention(p: dict, x, heads: int, mask):
    d = x.shape[-1]
    dh = d // heads
    qkv = L.dense(p["qkv"], x)
    outs = []
    for j in range(heads):
        with jax.named_scope(f"head_{j}"):
            q = qkv[..., j * dh:(j + 1) * dh]
            k = qkv[..., d + j * dh:d + (j + 1) * dh]
            v = qkv[..., 2 * d + j * dh:2 * d + (j + 1) * dh]
            score = jnp.einsum("bid,bjd->bij", q, k) * (1.0 / math.sqrt(dh))
            score = jnp.where(mask, score, -1e30)
            outs.append(jnp.einsum("bij,bjd->bid", L.softmax(score), v))
    return L.dense(p["proj"], jnp.concatenate(outs, axis=-1))


def forward(params: dict, ids, cfg: dict):
    """Logits ``[batch, seq, vocab]``."""
    seq = ids.shape[1]
    mask = L.causal_mask(seq, seq)
    with jax.named_scope("embedding"):
        x = L.embed(params["wte"], ids) + params["wpe"][:seq]
    for i, p in enumerate(params["blocks"]):
        with jax.named_scope(f"layer_{i}"):
            with jax.named_scope("attention"):
                x = x + attention(p, L.layer_norm(p["ln1"], x), cfg["heads"], mask)
            with jax.named_scope("mlp"):
                h = jax.nn.gelu(L.dense(p["fc"], L.layer_norm(p["ln2"], x)))
                x = x + L.dense(p["fc_proj"], h)
    with jax.named_scope("head"):
        return L.layer_norm(params["ln_f"], x) @ params["wte"].T


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    ids = L.tokens((cfg["batch"], cfg["seq"] + 1), cfg["vocab"], salt=1)
    inputs, targets = ids[:, :-1], ids[:, 1:]

    def fwd(params, ids):
        return forward(params, ids, cfg)

    def loss(params, ids, targets):
        return L.cross_entropy(forward(params, ids, cfg), targets)

    return L.model_program(f"gpt_{size}_{mode}", mode, spec(cfg), (inputs,), targets, fwd,
                           loss)
