"""HDP's networks: a feed-forward grouper (op → group), a seq2seq placer (group → device).

Shapes are one graph's (``jax.vmap`` for batches): ``N`` ops, ``G`` groups, ``D`` devices,
``H`` the placer's hidden size. Parameters are plain pytrees (:class:`Params`), initialized
Glorot-uniform with LSTM forget biases 1, as in TF's ``hierarchical_controller`` (HDP's code).

* **Grouper** — ``logits [N, G] = x W_ff W_softmax`` (HDP: a feed-forward model and a softmax
  over the groups; its code has no nonlinearity between the two products, nor here), one
  categorical sample per op.
* **Placer** — a bidirectional LSTM encoder (``H / 2`` per direction) over the group
  embeddings in group order, and an LSTM decoder (``H``) whose input is the device embedding
  of the previous group's device (a learned "go" embedding first), with additive attention
  over the encoder states (``v · tanh(W₁ m_g + W₂ h)``); ``logits [D] = C · tanh([h, context]
  W_out / T)`` (HDP: ``T = 1``, ``C = 1``), one device per group in order.

While ``step ≤ NOISE_STEPS`` both add Gaussian noise to their logits, of standard deviation
``NOISE_STD ·`` the logits' root mean square (HDP's exploration; the noise's scale is not
differentiated). :func:`group` and :func:`place` sample their actions and return their
log-probabilities (summed over real ops / groups), differentiable in the parameters: a
REINFORCE update pulls its gradient back through the sampling pass (``jax.vjp``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

GROUPER_HIDDEN = 64
NOISE_STD = 0.5
NOISE_STEPS = 750
TANH_CONSTANT = 1.0
TEMPERATURE = 1.0
FORGET_BIAS = 1.0


class Params(NamedTuple):
    """Both networks' parameters (shapes in the comments)."""

    w_ff: jnp.ndarray  # [F, 64]
    w_group: jnp.ndarray  # [64, G]
    encoder_forward: jnp.ndarray  # [E + H/2, 2H]
    encoder_backward: jnp.ndarray  # [E + H/2, 2H]
    encoder_forget: jnp.ndarray  # [] forget-gate bias
    go: jnp.ndarray  # [H] the decoder's first input
    device_embeddings: jnp.ndarray  # [D, H]
    decoder: jnp.ndarray  # [2H, 4H]
    decoder_forget: jnp.ndarray  # []
    attention_memory: jnp.ndarray  # [H, H] W₁
    attention_query: jnp.ndarray  # [H, H] W₂
    attention_v: jnp.ndarray  # [H]
    device_softmax: jnp.ndarray  # [2H, D]


def init_params(key: jax.Array, op_features: int, group_features: int, *, num_groups: int,
                num_devices: int, hidden: int) -> Params:
    """Glorot-uniform weights, forget biases 1. ``hidden`` must be even (two directions)."""
    if hidden < 2 or hidden % 2:
        raise ValueError(f"hidden must be an even int >= 2, got {hidden!r}")
    half = hidden // 2
    shapes = {"w_ff": (op_features, GROUPER_HIDDEN), "w_group": (GROUPER_HIDDEN, num_groups),
              "encoder_forward": (group_features + half, 4 * half),
              "encoder_backward": (group_features + half, 4 * half),
              "go": (1, hidden), "device_embeddings": (num_devices, hidden),
              "decoder": (2 * hidden, 4 * hidden), "attention_memory": (hidden, hidden),
              "attention_query": (hidden, hidden), "attention_v": (hidden, 1),
              "device_softmax": (2 * hidden, num_devices)}
    glorot = jax.nn.initializers.glorot_uniform()
    keys = dict(zip(shapes, jax.random.split(key, len(shapes))))
    weights = {name: glorot(keys[name], shape, jnp.float32) for name, shape in shapes.items()}
    weights["go"] = weights["go"][0]
    weights["attention_v"] = weights["attention_v"][:, 0]
    forget = jnp.float32(FORGET_BIAS)
    return Params(encoder_forget=forget, decoder_forget=forget, **weights)


def _lstm(weights, forget_bias, x, state):
    """One LSTM step (gates i, f, o, g from one product, as HDP's cell); ``state = (c, h)``."""
    c, h = state
    i, f, o, g = jnp.split(jnp.concatenate([x, h]) @ weights, 4)
    c = jax.nn.sigmoid(i) * jnp.tanh(g) + jax.nn.sigmoid(f + forget_bias) * c
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return c, h


def _noisy(logits, key, step):
    """``logits`` plus exploration noise while ``step ≤ NOISE_STEPS``."""
    scale = jax.lax.stop_gradient(jnp.sqrt(jnp.mean(logits ** 2))) * NOISE_STD
    noise = jax.random.normal(key, logits.shape) * scale
    return logits + jnp.where(step <= NOISE_STEPS, noise, 0.0)


def _choose(logits, key):
    """``(actions, log-probabilities)`` sampled from ``logits [..., K]``."""
    actions = jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return actions, jnp.take_along_axis(logp, actions[..., None], axis=-1)[..., 0]


def group(params: Params, op_features: jnp.ndarray, op_mask: jnp.ndarray, key: jax.Array,
          step) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(groups [N] int32, log-probability [])`` of a sampled grouping (padded ops: group 0, not
    counted)."""
    k_noise, k_sample = jax.random.split(key)
    logits = _noisy(op_features @ params.w_ff @ params.w_group, k_noise, step)
    actions, logp = _choose(logits, k_sample)
    return jnp.where(op_mask, actions, 0), jnp.sum(jnp.where(op_mask, logp, 0.0))


def place(params: Params, group_features: jnp.ndarray, key: jax.Array,
          step) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(devices [G] int32, log-probability [])`` of a sampled placement of the groups."""
    half = params.encoder_forward.shape[1] // 4
    zeros = (jnp.zeros(half), jnp.zeros(half))

    def encode(weights):
        def cell(state, x):
            state = _lstm(weights, params.encoder_forget, x, state)
            return state, state[1]
        return cell

    (c_fw, h_fw), forward = jax.lax.scan(encode(params.encoder_forward), zeros, group_features)
    (c_bw, h_bw), backward = jax.lax.scan(encode(params.encoder_backward), zeros,
                                          group_features, reverse=True)
    memory = jnp.concatenate([forward, backward], axis=-1) @ params.attention_memory  # [G, H]
    state = (jnp.concatenate([c_fw, c_bw]), jnp.concatenate([h_fw, h_bw]))
    count = group_features.shape[0]

    def decode(carry, xs):
        state, previous = carry
        k, index = xs
        x = jnp.where(index == 0, params.go, params.device_embeddings[previous])
        state = _lstm(params.decoder, params.decoder_forget, x, state)
        h = state[1]
        score = jnp.tanh(h @ params.attention_query + memory) @ params.attention_v
        context = jax.nn.softmax(score) @ memory
        logits = jnp.tanh(jnp.concatenate([h, context]) @ params.device_softmax
                          / TEMPERATURE) * TANH_CONSTANT
        k_noise, k_sample = jax.random.split(k)
        device, logp = _choose(_noisy(logits, k_noise, step), k_sample)
        return (state, device), (device, logp)

    xs = (jax.random.split(key, count), jnp.arange(count))
    _, (devices, logp) = jax.lax.scan(decode, (state, jnp.int32(0)), xs)
    return devices, jnp.sum(logp)
