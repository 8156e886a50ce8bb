"""GraphSAGE graph embedding with the max-pool aggregator (GDP §3.1 eqs. 2–3, GO §4.1 eqs. 3–4).

Layer ``l`` (``gs_layers`` of them, own weights each)::

    h_N(v) = max_{u ∈ N(v)} σ(W h_u + b)            (0 when v has no neighbour)
    h_v'   = ReLU(f(concat(h_v, h_N(v))))            f: Linear(d_l + gs_dim → gs_dim)

The paper's ``f`` is "a fully connected layer"; we follow GraphSAGE and apply a ReLU after it
(on every layer, the last included), without GraphSAGE's L2 normalisation of ``h_v'``.

**Neighbours** ``N(v)`` are v's producers and consumers (the distinct op pairs ``pair_*`` of
:class:`~gsched.core.padding.PaddedGraph`, both directions), sampled *deterministically* so the
embedding is a function of the graph (PPO's old and new log-probabilities use the same
network): per direction, v keeps the ``gs_knn`` neighbours of largest ``compute_cost``, ties
by smaller op index (:func:`sample_neighbours`). The sample is drawn once and shared by all
layers. It is one ``lexsort`` over the pairs (fixed shapes, no boolean indexing). Padded pairs
and padded ops send nothing (sigmoid messages are > 0 and pooling starts from 0, so a masked
message of 0 never wins), and the output is 0 on padded ops.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph


class Neighbours(NamedTuple):
    """Sampled directed messages ``sender → receiver`` of one graph (``2E`` slots)."""

    sender: jnp.ndarray  # [2E] int32
    receiver: jnp.ndarray  # [2E] int32
    mask: jnp.ndarray  # [2E] bool: a real pair kept by the sample


def _keep_largest(sender: jnp.ndarray, receiver: jnp.ndarray, valid: jnp.ndarray,
                  cost: jnp.ndarray, knn: int) -> jnp.ndarray:
    """``[E]`` bool: each receiver keeps its ``knn`` valid senders of largest ``cost`` (ties:
    smaller sender index). One lexsort by (receiver, −cost, sender); an entry's rank in its
    receiver's run is its sorted position minus the run's first position."""
    e, n = sender.shape[0], cost.shape[0]
    group = jnp.where(valid, receiver, n)  # invalid entries form their own run, last
    order = jnp.lexsort((sender, -cost[sender], group))
    sorted_group = group[order]
    position = jnp.arange(e, dtype=jnp.int32)
    first = jnp.concatenate([jnp.array([True]), sorted_group[1:] != sorted_group[:-1]])
    start = jax.lax.cummax(jnp.where(first, position, 0))
    rank = jnp.zeros(e, jnp.int32).at[order].set(position - start)
    return valid & (rank < knn)


def sample_neighbours(graph: PaddedGraph, knn: int) -> Neighbours:
    """Each op's ≤ ``knn`` producers and ≤ ``knn`` consumers of largest compute cost."""
    p, c, valid = graph.pair_producer, graph.pair_consumer, graph.pair_mask
    cost = graph.compute_cost
    from_producers = _keep_largest(p, c, valid, cost, knn)
    from_consumers = _keep_largest(c, p, valid, cost, knn)
    return Neighbours(jnp.concatenate([p, c]), jnp.concatenate([c, p]),
                      jnp.concatenate([from_producers, from_consumers]))


class GraphSAGE(eqx.Module):
    """``gs_layers`` max-pool GraphSAGE layers: ``h0 [N, F]`` → ``[N, gs_dim]``."""

    aggregators: tuple[eqx.nn.Linear, ...]  # W, b of eq. 2 / 3: d_l → gs_dim
    updates: tuple[eqx.nn.Linear, ...]  # f of eq. 3 / 4: d_l + gs_dim → gs_dim
    knn: int = eqx.field(static=True)

    def __init__(self, in_features: int, *, gs_layers: int, gs_dim: int, gs_knn: int,
                 key: jax.Array):
        keys = jax.random.split(key, 2 * gs_layers)
        sizes = (in_features,) + (gs_dim,) * (gs_layers - 1)
        self.aggregators = tuple(eqx.nn.Linear(d, gs_dim, key=k)
                                 for d, k in zip(sizes, keys[:gs_layers]))
        self.updates = tuple(eqx.nn.Linear(d + gs_dim, gs_dim, key=k)
                             for d, k in zip(sizes, keys[gs_layers:]))
        self.knn = gs_knn

    def __call__(self, graph: PaddedGraph, h0: jnp.ndarray) -> jnp.ndarray:
        """One graph (no batch axis): ``h0 [N, F]`` → ``[N, gs_dim]`` (0 on padded ops)."""
        neighbours = sample_neighbours(graph, self.knn)
        h = h0
        for aggregate, update in zip(self.aggregators, self.updates):
            message = jax.nn.sigmoid(h @ aggregate.weight.T + aggregate.bias)[neighbours.sender]
            message = jnp.where(neighbours.mask[:, None], message, 0.0)
            pooled = jnp.zeros((h.shape[0], message.shape[1]), h.dtype).at[
                neighbours.receiver].max(message)
            h = jax.nn.relu(jnp.concatenate([h, pooled], -1) @ update.weight.T + update.bias)
        return jnp.where(graph.op_mask[:, None], h, 0.0)
