"""RNNLM: a stacked-LSTM word language model (Zaremba, Sutskever & Vinyals 2014, "Recurrent
neural network regularization"; the RNNLM workload of GDP and GO).

Token embedding → ``layers`` LSTM layers unrolled over ``steps`` time steps (scopes
``layer_{i}/step_{t}``) → a softmax projection of every step's top hidden state. Training
minimises next-token cross-entropy.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.workloads import layers as L

CONFIGS = {
    "small": {"layers": 2, "steps": 8, "hidden": 8, "vocab": 32, "batch": 2},
    "medium": {"layers": 4, "steps": 24, "hidden": 8, "vocab": 32, "batch": 2},
    "large": {"layers": 8, "steps": 96, "hidden": 8, "vocab": 32, "batch": 2},
}


def spec(cfg: dict) -> dict:
    h = cfg["hidden"]
    return {"embed": L.weight(cfg["vocab"], h, fan_in=1),
            "lstm": [L.lstm_params(h, h) for _ in range(cfg["layers"])],
            "softmax": L.dense_params(h, cfg["vocab"])}


def forward(params: dict, ids, cfg: dict):
    """Logits ``[batch, steps, vocab]``."""
    batch, steps = ids.shape
    h = cfg["hidden"]
    with jax.named_scope("embedding"):
        xs = [L.embed(params["embed"], ids[:, t]) for t in range(steps)]
    for i, p in enumerate(params["lstm"]):
        with jax.named_scope(f"layer_{i}"):
            state = (jnp.zeros((batch, h)), jnp.zeros((batch, h)))
            outs = []
            for t, x in enumerate(xs):
                with jax.named_scope(f"step_{t}"):
                    state = L.lstm_cell(p, x, state)
                    outs.append(state[0])
            xs = outs
    with jax.named_scope("softmax"):
        return L.dense(params["softmax"], jnp.stack(xs, axis=1))


def build(size: str, mode: str):
    cfg = CONFIGS[size]
    ids = L.tokens((cfg["batch"], cfg["steps"] + 1), cfg["vocab"], salt=1)
    inputs, targets = ids[:, :-1], ids[:, 1:]

    def fwd(params, ids):
        return forward(params, ids, cfg)

    def loss(params, ids, targets):
        return L.cross_entropy(forward(params, ids, cfg), targets)

    return L.model_program(f"rnnlm_{size}_{mode}", mode, spec(cfg), (inputs,), targets, fwd,
                           loss)
