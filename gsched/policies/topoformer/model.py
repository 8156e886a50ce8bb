"""Topoformer encoder and priority head (NTO §4.1, §4.2 eq. 7, appendix C.2), in Equinox.

``h⁰ = W x + b``; then ``num_layers`` pre-layer-norm Transformer layers (eqs. 4–5 with layer
norm on the MHA and MLP inputs), whose attention has ``heads_per_relation`` heads of size
``head_dim`` *per relation* of ``config.relations`` (see ``gsched.policies.topoformer.relations``),
each head group masked by its relation; all heads are concatenated and projected back to
``dim`` (equivalently: each relation's MHA has its own output projection and they are
summed). The MLP is ``Linear(dim, dim) → GELU → Linear(dim, dim)``. A final layer norm feeds
the priority head ``Linear(dim, dim) → ReLU → Linear(dim, 1)``; priorities are normalized over
the real ops as ``α (y − mean) / std`` (eq. 17).

A query row with no key in its relation (e.g. a source op in a forward relation) gets a zero
output from that head group; padded ops attend to nothing and no real op attends to them, so
real ops' embeddings do not depend on the padding.

Memory: each layer materializes ``[R · heads, N, N]`` attention weights per graph (float32),
so the working set grows as ``N²``. XLA's compiled estimate for greedy inference of one graph
with the paper's model (70 heads) is 0.22 / 0.85 / 3.4 / 13.4 GiB at N = 512 / 1024 / 2048 /
4096 (≈ 0.8 KiB · N²); a training step (batch 8, N = 512) needs 8.4 GiB. So N = 4096 (the
default ``max_nodes``) fits one graph on a 24 GiB CPU, and an 80 GB GPU fits one graph up to
N = 8192 (≈ 54 GiB). :func:`check_size` refuses larger buckets with an error naming ``N`` and
the limit.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.policies.topoformer.features import node_features, num_features
from gsched.policies.topoformer.relations import (
    ENCODERS,
    check_relations,
    relation_masks,
)

STD_EPSILON = 1e-6


@dataclasses.dataclass(frozen=True)
class TopoformerConfig:
    """Model sizes (defaults: the paper's, appendix C.2)."""

    encoder: str = "topoformer"  # a key of relations.ENCODERS (Table 3's encoders)
    num_layers: int = 4
    dim: int = 256
    heads_per_relation: int = 10
    head_dim: int = 64
    pe_dim: int = 20  # Laplacian positional-encoding dimensions (C.5)
    alpha: float = 5.0  # priority scale of eq. 17
    max_nodes: int = 4096  # largest op bucket accepted (N² attention memory)

    def __post_init__(self):
        if self.encoder not in ENCODERS:
            raise ValueError(f"unknown encoder {self.encoder!r}; expected one of "
                             f"{tuple(ENCODERS)}")
        for name in ("num_layers", "dim", "heads_per_relation", "head_dim", "max_nodes"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be an int >= 1, got {getattr(self, name)!r}")
        if not isinstance(self.pe_dim, int) or self.pe_dim < 0:
            raise ValueError(f"pe_dim must be an int >= 0, got {self.pe_dim!r}")
        if not self.alpha > 0:
            raise ValueError(f"alpha must be > 0, got {self.alpha!r}")

    @property
    def relations(self) -> tuple[str, ...]:
        return ENCODERS[self.encoder]


def check_size(config: TopoformerConfig, num_nodes: int) -> None:
    """Raises ``ValueError`` if a bucket of ``num_nodes`` ops exceeds ``config.max_nodes``."""
    if num_nodes > config.max_nodes:
        heads = max(len(config.relations), 1) * config.heads_per_relation
        gib = heads * num_nodes**2 * 4 / 2**30
        raise ValueError(
            f"graph bucket has N={num_nodes} ops, above the Topoformer limit max_nodes="
            f"{config.max_nodes}: its attention needs [{heads}, N, N] float32 weights "
            f"(~{gib:.1f} GiB per graph and layer); raise max_nodes on a device with more "
            "memory")


class GraphInputs(NamedTuple):
    """What the encoder reads from one graph (a leading ``[B]`` when batched)."""

    features: jnp.ndarray  # [N, F] float32
    masks: jnp.ndarray  # [R, N, N] bool
    op_mask: jnp.ndarray  # [N] bool


def graph_inputs(graph: PaddedGraph, config: TopoformerConfig) -> GraphInputs:
    """Features and relation masks of one padded graph (traceable; ``vmap`` for batches)."""
    check_size(config, graph.op_mask.shape[-1])
    return GraphInputs(node_features(graph, config.pe_dim),
                       relation_masks(graph, config.relations), graph.op_mask)


class Layer(eqx.Module):
    """One pre-LN layer: relation-masked multi-head attention, then the GELU MLP."""

    attention_norm: eqx.nn.LayerNorm | None
    qkv: eqx.nn.Linear | None
    project: eqx.nn.Linear | None
    mlp_norm: eqx.nn.LayerNorm
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear
    num_relations: int = eqx.field(static=True)
    heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)

    def __init__(self, config: TopoformerConfig, key: jax.Array):
        k_qkv, k_proj, k_in, k_out = jax.random.split(key, 4)
        d = config.dim
        self.num_relations = len(config.relations)
        self.heads, self.head_dim = config.heads_per_relation, config.head_dim
        width = self.num_relations * self.heads * self.head_dim
        if self.num_relations:
            self.attention_norm = eqx.nn.LayerNorm(d)
            self.qkv = eqx.nn.Linear(d, 3 * width, key=k_qkv)
            self.project = eqx.nn.Linear(width, d, key=k_proj)
        else:
            self.attention_norm = self.qkv = self.project = None
        self.mlp_norm = eqx.nn.LayerNorm(d)
        self.mlp_in = eqx.nn.Linear(d, d, key=k_in)
        self.mlp_out = eqx.nn.Linear(d, d, key=k_out)

    def __call__(self, h: jnp.ndarray, masks: jnp.ndarray) -> jnp.ndarray:
        """``h [N, dim]``, ``masks [R, N, N]`` → ``[N, dim]``."""
        n = h.shape[0]
        if self.num_relations:
            x = jax.vmap(self.attention_norm)(h)
            q, k, v = jnp.split(jax.vmap(self.qkv)(x), 3, axis=-1)
            shape = (n, self.num_relations, self.heads, self.head_dim)
            q, k, v = (a.reshape(shape) for a in (q, k, v))
            logits = jnp.einsum("irhd,jrhd->rhij", q, k) / math.sqrt(self.head_dim)
            allowed = masks[:, None]
            logits = jnp.where(allowed, logits, jnp.finfo(logits.dtype).min)
            weights = jnp.where(allowed, jax.nn.softmax(logits, axis=-1), 0.0)
            heads = jnp.einsum("rhij,jrhd->irhd", weights, v).reshape(n, -1)
            h = h + jax.vmap(self.project)(heads)
        x = jax.vmap(self.mlp_norm)(h)
        return h + jax.vmap(self.mlp_out)(jax.nn.gelu(jax.vmap(self.mlp_in)(x)))


class Topoformer(eqx.Module):
    """Encoder + priority head: :class:`GraphInputs` → normalized priorities ``[N]`` (0 on
    padded ops). One graph; ``jax.vmap`` for batches."""

    embed: eqx.nn.Linear
    layers: tuple[Layer, ...]
    final_norm: eqx.nn.LayerNorm
    head_hidden: eqx.nn.Linear
    head_out: eqx.nn.Linear
    alpha: float = eqx.field(static=True)

    def __init__(self, config: TopoformerConfig, key: jax.Array):
        check_relations(config.relations)
        keys = jax.random.split(key, config.num_layers + 3)
        d = config.dim
        self.embed = eqx.nn.Linear(num_features(config.pe_dim), d, key=keys[0])
        self.layers = tuple(Layer(config, k) for k in keys[3:])
        self.final_norm = eqx.nn.LayerNorm(d)
        self.head_hidden = eqx.nn.Linear(d, d, key=keys[1])
        self.head_out = eqx.nn.Linear(d, 1, key=keys[2])
        self.alpha = float(config.alpha)

    def embeddings(self, features: jnp.ndarray, masks: jnp.ndarray) -> jnp.ndarray:
        """``[N, dim]`` final node embeddings ``h^(L)`` (before the final layer norm)."""
        h = jax.vmap(self.embed)(features)
        for layer in self.layers:
            h = layer(h, masks)
        return h

    def __call__(self, inputs: GraphInputs) -> jnp.ndarray:
        h = jax.vmap(self.final_norm)(self.embeddings(inputs.features, inputs.masks))
        raw = jax.vmap(self.head_out)(jax.nn.relu(jax.vmap(self.head_hidden)(h)))[:, 0]
        return normalize_priorities(raw, inputs.op_mask, self.alpha)


def normalize_priorities(raw: jnp.ndarray, op_mask: jnp.ndarray, alpha: float) -> jnp.ndarray:
    """Eq. 17 over the real ops: ``α (y − mean) / std`` (``std`` + 1e-6); padding → 0."""
    count = jnp.maximum(op_mask.sum(), 1)
    mean = jnp.where(op_mask, raw, 0.0).sum() / count
    centred = jnp.where(op_mask, raw - mean, 0.0)
    std = jnp.sqrt((centred**2).sum() / count)
    return alpha * centred / (std + STD_EPSILON)
