"""Segment-level recurrent attention (Transformer-XL, Dai et al. 2019) as GDP §3.2 / GO §4.2 use it.

The nodes, sorted in topological order, are cut into segments of ``segment`` nodes
(:func:`segment_recurrent`, a ``lax.scan`` over segments). Each layer attends from the current
segment to the keys / values of the current segment *and* the previous one, whose layer input
is cached with gradients stopped (``jax.lax.stop_gradient``), so the context reaches back one
segment per layer. The memory length is one segment. As in GDP / GO:

* **no positional embedding** (neither absolute nor Transformer-XL's relative one: the graph
  embedding carries the topology);
* **bidirectional** attention inside the context (all nodes are decided in one pass), limited
  only by the key mask (padded nodes are never keys; an all-masked row, i.e. a padded query,
  gets uniform weights instead of NaN because masked logits are ``finfo.min``).

A :class:`TransformerXLLayer` is **post-LN**, Transformer-XL's default: ``a = LN(h + MHA(h))``
(:class:`SegmentAttention`), ``y = LN(a + W₂ ReLU(W₁ a))``. Its dense layers are the
query / key / value projection (one input), the output projection, and the two FFN layers;
**parameter superposition** (GDP eq. 5) multiplies each of their inputs elementwise by a
per-node gain (``gains``: one ``[S, size]`` array per dense input, sizes ``gain_sizes``). The
cache holds the *modulated* key / value input, i.e. what the key / value projection reads.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import equinox as eqx
import jax
import jax.numpy as jnp

Gains = tuple[jnp.ndarray, ...]  # one per-node gain array [S, size] per dense input


def dense(linear: eqx.nn.Linear, x: jnp.ndarray, gain: jnp.ndarray | None = None
          ) -> jnp.ndarray:
    """``linear`` on ``x [..., in]`` (rows), its input multiplied by ``gain [..., in]`` if given."""
    if gain is not None:
        x = x * gain
    return x @ linear.weight.T + linear.bias


class RecurrentLayer(Protocol):
    """What :func:`segment_recurrent` runs: ``(h [S, d], memory [S, d], memory_mask [S],
    mask [S], gains) → (out [S, d], cache [S, d])``."""

    gain_sizes: tuple[int, ...]

    def __call__(self, h: jnp.ndarray, memory: jnp.ndarray, memory_mask: jnp.ndarray,
                 mask: jnp.ndarray, gains: Gains | None) -> tuple[jnp.ndarray, jnp.ndarray]:
        ...


class SegmentAttention(eqx.Module):
    """Post-LN multi-head attention sublayer over the segment and its memory."""

    query: eqx.nn.Linear
    key_value: eqx.nn.Linear
    project: eqx.nn.Linear
    norm: eqx.nn.LayerNorm
    n_head: int = eqx.field(static=True)
    d_head: int = eqx.field(static=True)

    def __init__(self, d_model: int, n_head: int, d_head: int, *, key: jax.Array):
        k_q, k_kv, k_o = jax.random.split(key, 3)
        self.query = eqx.nn.Linear(d_model, n_head * d_head, key=k_q)
        self.key_value = eqx.nn.Linear(d_model, 2 * n_head * d_head, key=k_kv)
        self.project = eqx.nn.Linear(n_head * d_head, d_model, key=k_o)
        self.norm = eqx.nn.LayerNorm(d_model)
        self.n_head, self.d_head = n_head, d_head

    @property
    def gain_sizes(self) -> tuple[int, int]:
        """Inputs of the dense layers: q/k/v (``d_model``), output projection (heads · d_head)."""
        return self.query.in_features, self.project.in_features

    def __call__(self, h: jnp.ndarray, memory: jnp.ndarray, memory_mask: jnp.ndarray,
                 mask: jnp.ndarray, gains: Gains | None = None
                 ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """``h [S, d]``, ``memory [M, d]`` (modulated key / value input of the previous
        segment), masks ``[M]`` / ``[S]`` → ``(LN(h + MHA) [S, d], cache [S, d])``."""
        gain_in, gain_out = gains if gains is not None else (None, None)
        x = h if gain_in is None else h * gain_in
        s, m = h.shape[0], memory.shape[0]
        q = dense(self.query, x).reshape(s, self.n_head, self.d_head)
        k, v = jnp.split(dense(self.key_value, jnp.concatenate([memory, x])), 2, axis=-1)
        k = k.reshape(m + s, self.n_head, self.d_head)
        v = v.reshape(m + s, self.n_head, self.d_head)
        logits = jnp.einsum("ihd,jhd->hij", q, k) / math.sqrt(self.d_head)
        key_mask = jnp.concatenate([memory_mask, mask])
        logits = jnp.where(key_mask, logits, jnp.finfo(logits.dtype).min)
        weights = jax.nn.softmax(logits, axis=-1)
        attended = jnp.einsum("hij,jhd->ihd", weights, v).reshape(s, self.n_head * self.d_head)
        out = jax.vmap(self.norm)(h + dense(self.project, attended, gain_out))
        return out, x


class TransformerXLLayer(eqx.Module):
    """Post-LN Transformer-XL layer without positional terms: attention, then the ReLU FFN."""

    attention: SegmentAttention
    ffn_in: eqx.nn.Linear
    ffn_out: eqx.nn.Linear
    norm: eqx.nn.LayerNorm

    def __init__(self, d_model: int, n_head: int, d_head: int, d_inner: int, *,
                 key: jax.Array):
        k_att, k_in, k_out = jax.random.split(key, 3)
        self.attention = SegmentAttention(d_model, n_head, d_head, key=k_att)
        self.ffn_in = eqx.nn.Linear(d_model, d_inner, key=k_in)
        self.ffn_out = eqx.nn.Linear(d_inner, d_model, key=k_out)
        self.norm = eqx.nn.LayerNorm(d_model)

    @property
    def gain_sizes(self) -> tuple[int, int, int, int]:
        """q/k/v, output projection, FFN in (``d_model``), FFN out (``d_inner``)."""
        return self.attention.gain_sizes + (self.ffn_in.in_features, self.ffn_out.in_features)

    def __call__(self, h: jnp.ndarray, memory: jnp.ndarray, memory_mask: jnp.ndarray,
                 mask: jnp.ndarray, gains: Gains | None = None
                 ) -> tuple[jnp.ndarray, jnp.ndarray]:
        """As :meth:`SegmentAttention.__call__`, followed by the FFN sublayer."""
        g = gains if gains is not None else (None,) * 4
        a, cache = self.attention(h, memory, memory_mask, mask,
                                  None if gains is None else g[:2])
        hidden = jax.nn.relu(dense(self.ffn_in, a, g[2]))
        return jax.vmap(self.norm)(a + dense(self.ffn_out, hidden, g[3])), cache


def segment_recurrent(layers: Sequence[RecurrentLayer], x: jnp.ndarray, mask: jnp.ndarray,
                      segment: int, gains: Sequence[Gains | None] | None = None) -> jnp.ndarray:
    """Runs ``layers`` over ``x [N, d]`` (nodes in topological order, padded nodes last;
    ``mask [N]`` True = real), ``min(segment, N)`` nodes at a time → ``[N, d]``.

    ``gains``: per layer, its per-node gain arrays ``[N, size]`` (``layer.gain_sizes``) or
    None (unmodulated); None for all layers. ``N`` must be a multiple of ``min(segment, N)``
    (powers of two are). Real results do not depend on ``N``: with ``N ≥ segment`` the real
    segments are the same, and with ``N < segment`` every real node lies in the one segment
    either way."""
    n, d = x.shape
    size = min(segment, n)
    if n % size:
        raise ValueError(f"{n} nodes do not split into segments of {size}")
    count = n // size

    def segments(a):
        return a.reshape((count, size) + a.shape[1:])

    gains = (None,) * len(layers) if gains is None else tuple(gains)
    layer_gains = tuple(None if group is None else tuple(segments(g) for g in group)
                        for group in gains)

    def step(carry, inputs):
        memories, memory_mask = carry
        h, m, segment_gains = inputs
        caches = []
        for layer, memory, g in zip(layers, memories, segment_gains):
            h, cache = layer(h, memory, memory_mask, m, g)
            caches.append(jax.lax.stop_gradient(cache))
        return (tuple(caches), m), h

    init = (tuple(jnp.zeros((size, d), x.dtype) for _ in layers), jnp.zeros(size, bool))
    _, out = jax.lax.scan(step, init, (segments(x), segments(mask), layer_gains))
    return out.reshape(n, d)
