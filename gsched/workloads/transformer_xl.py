"""Transformer-XL: segment-level recurrence with relative positional attention (Dai et al.
2019, "Transformer-XL: attentive language models beyond a fixed-length context"; the
Transformer-XL workload of GDP and GO).

The program processes ``segments`` (= 2) consecutive segments of ``seg_len`` tokens. Each
layer attends over ``[memory; current segment]``, where the memory is that layer's input from
the previous segment (``stop_gradient``, as in the paper; the first segment's memory is a
program input, and the last segment's new memories are program outputs). Attention uses the
paper's relative position encoding: content term ``(q + u)·k``, position term
``(q + v)·(R W_r)`` re-aligned by ``rel_shift``; post-layer-norm residual blocks and a ReLU
feed-forward network. Heads are sliced out one by one (scopes
``segment_{s}/layer_{i}/attention/head_{h}``).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"layers": 2, "heads": 2, "d_model": 8, "d_head": 4, "d_inner": 16,
              "seg_len": 4, "mem_len": 4, "segments": 2, "vocab": 32, "batch": 2},
    "medium": {"layers": 6, "heads": 4, "d_model": 8, "d_head": 4, "d_inner": 16,
               "seg_len": 8, "mem_len": 8, "segments": 2, "vocab": 32, "batch": 2},
    "large": {"layers": 18, "heads": 8, "d_model": 16, "d_head": 4, "d_inner": 32,
              "seg_len": 8, "mem_len": 8, "segments": 2, "vocab": 32, "batch": 2},
}


def spec(cfg: dict) -> dict:
    d, nh, dh = cfg["d_model"], cfg["heads"], cfg["d_head"]
    def layer():
        return {"qkv": L.weight(d, 3 * nh * dh), "r": L.weight(d, nh * dh),
                "u": L.zeros(nh, dh), "v": L.zeros(nh, dh), "o": L.weight(nh * dh, d),
                "ln1": L.layer_norm_params(d), "ff1": L.dense_params(d, cfg["d_inner"]),
                "ff2": L.dense_params(cfg["d_inner"], d), "ln2": L.layer_norm_params(d)}

    return {"embed": L.weight(cfg["vocab"], d, fan_in=d),
            "layers": [layer() for _ in range(cfg["layers"])],
            "softmax": L.dense_params(d, cfg["vocab"])}


def positional_embedding(k_len: int, d: int) -> np.ndarray:
    """Sinusoids of the relative distances ``k_len - 1, ..., 0`` (``[k_len, d]``)."""
    pos = np.arange(k_len - 1, -1, -1, dtype=np.float32)
    inv_freq = 1.0 / (10000 ** (np.arange(0, d, 2, dtype=np.float32) / d))
    angles = pos[:, None] * inv_freq[None, :]
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=-1).astype(np.float32)


def rel_shift(x):
    """Transformer-XL's shift: row ``i`` of ``x [batch, q, k]`` moved left so that column
    ``j`` holds relative distance ``q - 1 - i + ...`` (pad, reshape, slice, reshape)."""
    b, q, k = x.shape
    x = jnp.pad(x, ((0, 0), (0, 0), (1, 0)))
    x = x.reshape(b, k + 1, q)[:, 1:, :]
    return x.reshape(b, q, k)


def layer(p: dict, h, mem, pos_emb, mask, cfg: dict):
    nh, dh = cfg["heads"], cfg["d_head"]
    cat = jnp.concatenate([jax.lax.stop_gradient(mem), h], axis=1)  # [b, k, d]
    q_len = h.shape[1]
    with jax.named_scope("attention"):
        heads = cat @ p["qkv"]  # [b, k, 3 nh dh]
        r = pos_emb @ p["r"]  # [k, nh dh]
        outs = []
        for j in range(nh):
            with jax.named_scope(f"head_{j}"):
                q = heads[:, -q_len:, j * dh:(j + 1) * dh]
                k = heads[:, :, (nh + j) * dh:(nh + j + 1) * dh]
                v = heads[:, :, (2 * nh + j) * dh:(2 * nh + j + 1) * dh]
                rj = r[:, j * dh:(j + 1) * dh]
                ac = jnp.einsum("bid,bjd->bij", q + p["u"][j], k)
                bd = rel_shift(jnp.einsum("bid,jd->bij", q + p["v"][j], rj))
                score = jnp.where(mask, (ac + bd) * (1.0 / math.sqrt(dh)), -1e30)
                outs.append(jnp.einsum("bij,bjd->bid", L.softmax(score), v))
        attn = jnp.concatenate(outs, axis=-1) @ p["o"]
        h = L.layer_norm(p["ln1"], h + attn)
    with jax.named_scope("feed_forward"):
        ff = L.dense(p["ff2"], jax.nn.relu(L.dense(p["ff1"], h)))
        return L.layer_norm(p["ln2"], h + ff)


def forward(params: dict, ids, mems, cfg: dict):
    """``(logits [batch, segments·seg_len, vocab], new memories)``."""
    seg, m_len, d = cfg["seg_len"], cfg["mem_len"], cfg["d_model"]
    pos_emb = positional_embedding(seg + m_len, d)
    mask = L.causal_mask(seg, seg + m_len)
    mems = list(mems)
    logits = []
    for s in range(cfg["segments"]):
        with jax.named_scope(f"segment_{s}"):
            with jax.named_scope("embedding"):
                h = L.embed(params["embed"], ids[:, s * seg:(s + 1) * seg]) * math.sqrt(d)
            for i, p in enumerate(params["layers"]):
                with jax.named_scope(f"layer_{i}"):
                    new_mem = jax.lax.stop_gradient(
                        jnp.concatenate([mems[i], h], axis=1)[:, -m_len:])
                    h = layer(p, h, mems[i], pos_emb, mask, cfg)
                    mems[i] = new_mem
            with jax.named_scope("softmax"):
                logits.append(L.dense(params["softmax"], h))
    return jnp.concatenate(logits, axis=1), mems


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    total = cfg["segments"] * cfg["seg_len"]
    ids = L.tokens((cfg["batch"], total + 1), cfg["vocab"], salt=1)
    inputs, targets = ids[:, :-1], ids[:, 1:]
    mems = [jnp.zeros((cfg["batch"], cfg["mem_len"], cfg["d_model"]), jnp.float32)
            for _ in range(cfg["layers"])]

    def fwd(params, ids, mems):
        return forward(params, ids, mems, cfg)

    def loss(params, ids, mems, targets):
        return L.cross_entropy(forward(params, ids, mems, cfg)[0], targets)

    return L.model_program(f"transformer_xl_{size}_{mode}", mode, spec(cfg), (inputs, mems),
                           targets, fwd, loss)
