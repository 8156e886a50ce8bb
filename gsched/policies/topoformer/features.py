"""Topoformer's input node features (NTO appendix C.5), computed on a padded graph in JAX.

Per op (one graph; ``jax.vmap`` for batches), ``[N, 8 + pe_dim]``:

0. output memory ``m`` (sum of the sizes of the tensors the op produces);
1. parameter memory ``p`` (SPEC: ``temporary_memory``);
2. in-degree, 3. out-degree (distinct predecessor / successor ops);
4. min and 5. max hop distance from a source (an op without predecessors);
6. min and 7. max hop distance to a sink (an op without successors);

each divided by its maximum over the graph's real ops (a feature that is 0 everywhere stays
0), then ``pe_dim`` Laplacian positional encodings (Dwivedi & Bresson): eigenvectors 1 …
``pe_dim`` (skipping the first, constant-like one) of the symmetric normalized Laplacian
``I − D^{-1/2} U D^{-1/2}`` of the undirected graph ``U`` (an isolated real op has
``L_ii = 0``). Padded ops are isolated with ``L_ii = 3`` (> 2 ≥ every eigenvalue of a
normalized Laplacian), so their eigenvectors sort after all real ones and are zero on real
ops: a graph with fewer than ``pe_dim + 1`` ops gets zero columns, and the encodings of a
graph do not depend on its bucket (up to float rounding, and up to a rotation inside
eigenspaces of repeated eigenvalues, which no eigendecomposition fixes).

**Sign ambiguity.** An eigenvector's sign is arbitrary. :func:`node_features` fixes it
deterministically (the largest-magnitude entry positive; the first one on exact ties), and
training additionally flips the signs at random per graph and column
(:func:`random_sign_flip`), so the model cannot rely on a sign convention that a tiny
perturbation of the graph could flip.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.policies.topoformer.relations import op_adjacency

NUM_STRUCTURAL_FEATURES = 8
PAD_EIGENVALUE = 3.0


def num_features(pe_dim: int) -> int:
    return NUM_STRUCTURAL_FEATURES + pe_dim


def hop_distances(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, 4]`` int32: min / max hops from a source, min / max hops to a sink (0 for padding).

    Bellman-Ford-style relaxation over the op pairs in a ``while_loop`` (as many rounds as the
    longest path has edges, plus one)."""
    n = graph.op_mask.shape[-1]
    p, c, valid = graph.pair_producer, graph.pair_consumer, graph.pair_mask
    has_pred = jnp.zeros(n, bool).at[c].max(valid)
    has_succ = jnp.zeros(n, bool).at[p].max(valid)
    far = jnp.int32(n)  # larger than any path length

    def relax(dist):
        from_min, from_max, to_min, to_max = dist
        from_min = jnp.where(has_pred, jnp.full(n, far).at[c].min(
            jnp.where(valid, from_min[p] + 1, far)), 0)
        from_max = jnp.zeros(n, jnp.int32).at[c].max(jnp.where(valid, from_max[p] + 1, 0))
        to_min = jnp.where(has_succ, jnp.full(n, far).at[p].min(
            jnp.where(valid, to_min[c] + 1, far)), 0)
        to_max = jnp.zeros(n, jnp.int32).at[p].max(jnp.where(valid, to_max[c] + 1, 0))
        return jnp.stack([from_min, from_max, to_min, to_max])

    def body(state):
        dist, _ = state
        new = relax(dist)
        return new, jnp.any(new != dist)

    start = jnp.stack([jnp.where(has_pred, far, 0), jnp.zeros(n, jnp.int32),
                       jnp.where(has_succ, far, 0), jnp.zeros(n, jnp.int32)])
    dist, _ = jax.lax.while_loop(lambda s: s[1], body, (start, jnp.bool_(True)))
    return jnp.where(graph.op_mask[:, None], dist.T, 0)


def laplacian_encoding(graph: PaddedGraph, pe_dim: int) -> jnp.ndarray:
    """``[N, pe_dim]`` Laplacian eigenvectors 1 … ``pe_dim`` with the sign convention above."""
    n = graph.op_mask.shape[-1]
    if pe_dim == 0:
        return jnp.zeros((n, 0), jnp.float32)
    dag = op_adjacency(graph)
    undirected = (dag | dag.T).astype(jnp.float32)
    degree = undirected.sum(axis=1)
    scale = jnp.where(degree > 0, jax.lax.rsqrt(jnp.maximum(degree, 1.0)), 0.0)
    diagonal = jnp.where(graph.op_mask, jnp.where(degree > 0, 1.0, 0.0), PAD_EIGENVALUE)
    laplacian = jnp.diag(diagonal) - scale[:, None] * undirected * scale[None, :]
    _, vectors = jnp.linalg.eigh(laplacian)
    vectors = vectors[:, 1:pe_dim + 1]
    vectors = jnp.where(graph.op_mask[:, None], vectors, 0.0)
    pivot = jnp.argmax(jnp.abs(vectors), axis=0)
    sign = jnp.where(vectors[pivot, jnp.arange(vectors.shape[1])] < 0, -1.0, 1.0)
    vectors = vectors * sign
    return jnp.pad(vectors, ((0, 0), (0, pe_dim - vectors.shape[1])))


def node_features(graph: PaddedGraph, pe_dim: int) -> jnp.ndarray:
    """``[N, 8 + pe_dim]`` float32 input features (see the module docstring); padding is 0."""
    n = graph.op_mask.shape[-1]
    real = graph.op_mask
    dag = op_adjacency(graph)
    output_memory = jnp.zeros(n, jnp.float32).at[graph.tensor_producer].add(
        jnp.where(graph.tensor_mask, graph.tensor_size, 0.0))
    raw = jnp.concatenate([
        jnp.stack([output_memory, graph.temporary_memory,
                   dag.sum(axis=0).astype(jnp.float32), dag.sum(axis=1).astype(jnp.float32)],
                  axis=1),
        hop_distances(graph).astype(jnp.float32)], axis=1)
    raw = jnp.where(real[:, None], raw, 0.0)
    peak = raw.max(axis=0)
    structural = raw / jnp.where(peak > 0, peak, 1.0)
    return jnp.concatenate([structural, laplacian_encoding(graph, pe_dim)], axis=1)


def random_sign_flip(key: jax.Array, features: jnp.ndarray) -> jnp.ndarray:
    """Flips each Laplacian-encoding column of ``features [..., N, F]`` with probability ½,
    independently per graph (leading axes) and column."""
    pe_dim = features.shape[-1] - NUM_STRUCTURAL_FEATURES
    shape = features.shape[:-2] + (1, pe_dim)
    sign = jnp.where(jax.random.bernoulli(key, 0.5, shape), -1.0, 1.0)
    ones = jnp.ones(features.shape[:-2] + (1, NUM_STRUCTURAL_FEATURES))
    return features * jnp.concatenate([ones, sign], axis=-1)
