"""GNMT: an LSTM encoder–decoder with attention (Wu et al. 2016, "Google's neural machine
translation system"; the GNMT workload of GDP and GO).

As in GNMT: the bottom encoder layer is bidirectional (forward and backward LSTMs,
concatenated), the others unidirectional; residual connections from the third layer on (in
both stacks); the decoder's bottom layer output queries an additive (Bahdanau) attention over
the encoder's top layer, and the context is fed to every decoder layer at the same step. All
loops are unrolled in Python: encoder scopes ``encoder/layer_{i}/step_{t}``, decoder scopes
``decoder/step_{t}/layer_{i}`` (the decoder runs step by step through all its layers, as the
attention feeds back) and ``decoder/step_{t}/attention``. Training uses teacher forcing and
cross-entropy on the target tokens.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"layers": 2, "src_steps": 4, "tgt_steps": 4, "hidden": 8, "vocab": 32,
              "batch": 2},
    "medium": {"layers": 4, "src_steps": 12, "tgt_steps": 12, "hidden": 8, "vocab": 32,
               "batch": 2},
    "large": {"layers": 8, "src_steps": 40, "tgt_steps": 40, "hidden": 8, "vocab": 32,
              "batch": 2},
}

RESIDUAL_FROM = 2  # layer index from which a layer adds its input (GNMT: the third layer)


def spec(cfg: dict) -> dict:
    h, n = cfg["hidden"], cfg["layers"]
    encoder = [{"fw": L.lstm_params(h, h), "bw": L.lstm_params(h, h)}]
    encoder += [L.lstm_params(2 * h if i == 1 else h, h) for i in range(1, n)]
    decoder = [L.lstm_params(2 * h, h) for _ in range(n)]  # input: [x; context]
    return {"src_embed": L.weight(cfg["vocab"], h, fan_in=1),
            "tgt_embed": L.weight(cfg["vocab"], h, fan_in=1),
            "encoder": encoder, "decoder": decoder,
            "attention": {"query": L.weight(h, h), "key": L.weight(h, h), "v": L.weight(h)},
            "softmax": L.dense_params(2 * h, cfg["vocab"])}


def _lstm_layer(p, xs, batch: int, hidden: int, reverse: bool = False):
    state = (jnp.zeros((batch, hidden)), jnp.zeros((batch, hidden)))
    outs = [None] * len(xs)
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    for t in order:
        with jax.named_scope(f"step_{t}"):
            state = L.lstm_cell(p, xs[t], state)
            outs[t] = state[0]
    return outs


def encode(params: dict, src, cfg: dict):
    batch, steps = src.shape
    h = cfg["hidden"]
    with jax.named_scope("embedding"):
        xs = [L.embed(params["src_embed"], src[:, t]) for t in range(steps)]
    for i, p in enumerate(params["encoder"]):
        with jax.named_scope(f"layer_{i}"):
            if i == 0:
                with jax.named_scope("forward"):
                    fw = _lstm_layer(p["fw"], xs, batch, h)
                with jax.named_scope("backward"):
                    bw = _lstm_layer(p["bw"], xs, batch, h, reverse=True)
                outs = [jnp.concatenate([f, b], axis=-1) for f, b in zip(fw, bw)]
            else:
                outs = _lstm_layer(p, xs, batch, h)
                if i >= RESIDUAL_FROM:
                    outs = [o + x for o, x in zip(outs, xs)]
            xs = outs
    return jnp.stack(xs, axis=1)  # [batch, src_steps, hidden]


def attend(p: dict, query, keys, values):
    """Additive attention: ``softmax(v · tanh(W_q q + K)) · values``, ``K`` precomputed."""
    scores = jnp.tanh((query @ p["query"])[:, None, :] + keys) @ p["v"]  # [batch, src]
    weights = L.softmax(scores, axis=-1)
    return jnp.einsum("bs,bsh->bh", weights, values)


def forward(params: dict, src, tgt_in, cfg: dict):
    """Logits ``[batch, tgt_steps, vocab]`` (teacher forcing on ``tgt_in``)."""
    batch, steps = tgt_in.shape
    h = cfg["hidden"]
    with jax.named_scope("encoder"):
        memory = encode(params, src, cfg)
    with jax.named_scope("decoder"):
        with jax.named_scope("attention_keys"):
            keys = memory @ params["attention"]["key"]
        states = [(jnp.zeros((batch, h)), jnp.zeros((batch, h))) for _ in params["decoder"]]
        context = jnp.zeros((batch, h))
        logits = []
        for t in range(steps):
            with jax.named_scope(f"step_{t}"):
                with jax.named_scope("embedding"):
                    x = L.embed(params["tgt_embed"], tgt_in[:, t])
                for i, p in enumerate(params["decoder"]):
                    with jax.named_scope(f"layer_{i}"):
                        states[i] = L.lstm_cell(p, jnp.concatenate([x, context], -1),
                                                states[i])
                        y = states[i][0] + x if i >= RESIDUAL_FROM else states[i][0]
                    if i == 0:
                        with jax.named_scope("attention"):
                            context = attend(params["attention"], y, keys, memory)
                    x = y
                with jax.named_scope("softmax"):
                    logits.append(L.dense(params["softmax"],
                                          jnp.concatenate([x, context], -1)))
    return jnp.stack(logits, axis=1)


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    src = L.tokens((cfg["batch"], cfg["src_steps"]), cfg["vocab"], salt=1)
    tgt = L.tokens((cfg["batch"], cfg["tgt_steps"] + 1), cfg["vocab"], salt=2)
    tgt_in, targets = tgt[:, :-1], tgt[:, 1:]

    def fwd(params, src, tgt_in):
        return forward(params, src, tgt_in, cfg)

    def loss(params, src, tgt_in, targets):
        return L.cross_entropy(forward(params, src, tgt_in, cfg), targets)

    return L.model_program(f"gnmt_{size}_{mode}", mode, spec(cfg), (src, tgt_in), targets,
                           fwd, loss)
