"""HDP's inputs on a padded graph: the grouper's op embeddings and the placer's group embeddings.

HDP (Mirhoseini et al., "A Hierarchical Model for Device Placement", ICLR 2018; GDP's baseline)
describes each op by its type, its output shapes and its adjacency, and each group of ops by
the op types it holds, their summed output shapes and the group-to-group edge counts. Our graph
model has tensor sizes rather than shapes and hashed op types, so (one graph, no batch axis;
``jax.vmap`` for batches; decisions recorded in ``docs/design.md``, "HDP"):

:func:`op_embeddings` ``[N, OP_FEATURES]`` float32, zero on padded ops:

0. the op type, ``op_type_ids / OP_TYPE_VOCAB`` (HDP feeds the raw type index);
1–5. the sizes of the op's first ``MAX_OUTPUTS`` output tensors (its "output shapes"),
   ``log1p(size / mean tensor size)``, 0 where the op has fewer;
6–25. its first ``MAX_NEIGHBOURS`` adjacent ops as ``(position, ±1)`` pairs: the consumers of
   its outputs (+1, by op index) then its producers (−1, by op index), the position being the
   neighbour's rank in a topological order over the real ops, ``rank / #real ops`` (HDP
   feeds the raw index); zero pairs pad a shorter list.

:func:`group_embeddings` ``[G, GROUP_FEATURES(G)]`` for a grouping ``[N]`` (op → group):
``[dag, dagᵀ, type counts, summed output sizes]`` with ``dag[g, h]`` the number of distinct
(producer, consumer) op pairs from group ``g`` to group ``h``, type counts over
``TYPE_BUCKETS`` hashed buckets (``op_type_ids % TYPE_BUCKETS``: HDP counts the graph's own
types) and features 1–5 above summed over the group's ops; each row divided by its maximum
+ 1 (as HDP does).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph, topological_rank
from gsched.policies.go.features import OP_TYPE_VOCAB, op_type_ids

MAX_OUTPUTS = 5
MAX_NEIGHBOURS = 10
TYPE_BUCKETS = 32
OP_FEATURES = 1 + MAX_OUTPUTS + 2 * MAX_NEIGHBOURS


def group_features(num_groups: int) -> int:
    """Width of a group embedding for ``num_groups`` groups."""
    return 2 * num_groups + TYPE_BUCKETS + MAX_OUTPUTS


def _output_sizes(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, MAX_OUTPUTS]`` ``log1p(size / mean)`` of each op's first output tensors."""
    mask = graph.tensor_mask
    mean = jnp.sum(jnp.where(mask, graph.tensor_size, 0.0)) / jnp.maximum(jnp.sum(mask), 1)
    relative = jnp.log1p(graph.tensor_size / jnp.where(mean > 0, mean, 1.0))
    slot = graph.op_tensor_start[:, None] + jnp.arange(MAX_OUTPUTS)
    present = slot < graph.op_tensor_end[:, None]
    tensor = graph.tensor_by_producer[jnp.minimum(slot, mask.shape[0] - 1)]
    return jnp.where(present, relative[tensor], 0.0)


def _adjacency(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, 2 · MAX_NEIGHBOURS]`` the first adjacent ops as ``(position, ±1)`` pairs."""
    n = graph.op_mask.shape[0]
    position = topological_rank(graph).astype(jnp.float32) / jnp.maximum(
        jnp.sum(graph.op_mask), 1)
    owner = jnp.concatenate([graph.pair_producer, graph.pair_consumer])
    other = jnp.concatenate([graph.pair_consumer, graph.pair_producer])
    sign = jnp.concatenate([jnp.ones_like(graph.pair_mask, jnp.float32),
                            -jnp.ones_like(graph.pair_mask, jnp.float32)])
    valid = jnp.concatenate([graph.pair_mask, graph.pair_mask])
    # Entries grouped by owner (consumers before producers, each by op index): a stable sort
    # on (owner, −sign, other).
    key = (jnp.where(valid, owner, n) * 2 + (sign < 0)) * n + other
    by_owner = jnp.argsort(key, stable=True)
    owner_sorted = jnp.where(valid, owner, n)[by_owner]
    slot = jnp.arange(owner.shape[0]) - jnp.searchsorted(owner_sorted, owner_sorted, "left")
    keep = (owner_sorted < n) & (slot < MAX_NEIGHBOURS)
    row = jnp.where(keep, owner_sorted, n)  # n: dropped
    pairs = jnp.stack([position[other[by_owner]], sign[by_owner]], axis=-1)
    out = jnp.zeros((n, MAX_NEIGHBOURS, 2), jnp.float32).at[
        row, jnp.minimum(slot, MAX_NEIGHBOURS - 1)].set(pairs, mode="drop")
    return out.reshape(n, 2 * MAX_NEIGHBOURS)


def op_embeddings(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, OP_FEATURES]`` float32 (module docstring), zero on padded ops."""
    kind = op_type_ids(graph).astype(jnp.float32)[:, None] / OP_TYPE_VOCAB
    features = jnp.concatenate([kind, _output_sizes(graph), _adjacency(graph)], axis=-1)
    return jnp.where(graph.op_mask[:, None], features, 0.0)


def group_embeddings(graph: PaddedGraph, groups: jnp.ndarray, num_groups: int,
                     op_features: jnp.ndarray) -> jnp.ndarray:
    """``[G, group_features(G)]`` float32 for the grouping ``groups [N]`` (int32 in
    ``[0, G)``); ``op_features`` is :func:`op_embeddings`' output. Padded ops count nowhere."""
    member = jax.nn.one_hot(groups, num_groups) * graph.op_mask[:, None]  # [N, G]
    pair = graph.pair_mask.astype(jnp.float32)
    dag = jnp.zeros((num_groups, num_groups), jnp.float32).at[
        groups[graph.pair_producer], groups[graph.pair_consumer]].add(pair)
    types = jax.nn.one_hot(op_type_ids(graph) % TYPE_BUCKETS, TYPE_BUCKETS)
    sizes = op_features[:, 1:1 + MAX_OUTPUTS]
    embedding = jnp.concatenate([dag, dag.T, member.T @ types, member.T @ sizes], axis=-1)
    return embedding / (jnp.max(embedding, axis=-1, keepdims=True) + 1.0)
