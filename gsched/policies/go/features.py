"""GDP / GO node features ("operation type, output shape, adjacent nodes"), on a padded graph.

Per op (one graph, no batch axis; ``jax.vmap`` for batches), :func:`node_features` gives
``[N, NUM_NODE_FEATURES]`` float32, zero on padded ops:

0. compute cost, 1. output bytes (the summed sizes of the tensors the op produces — the op's
   "output shape" in our model), 2. temporary memory: each ``log1p(x / mean)`` with the mean
   over the graph's real ops (a quantity that is 0 on every op stays 0), so graphs whose costs
   or sizes differ by orders of magnitude give comparable inputs;
3. in-degree, 4. out-degree (distinct predecessor / successor ops): ``log1p(degree)``, already
   scale-free;
5. program input (SPEC §1); 6. graph output: the op produces a tensor that no op reads (the
   definition of ``gsched.costmodel.fusion.fusion_candidates``);
7. topological depth: the longest-path level from the sources divided by the graph's largest
   level (0 for a graph without edges);
8–15. the op's id (GDP's "adjacent node ids"): its position ``p = rank / #real ops`` in the
   topological order, as ``sin(2^k π p)``, ``cos(2^k π p)`` for ``k = 0 … 3``. Ops with the
   same local structure (the parallel ops of a layer) are otherwise indistinguishable, and a
   non-autoregressive placer must give them different devices; GraphSAGE spreads the ids to
   the neighbours (the "input ops" feature of GO).

:func:`op_type_ids` maps ``PaddedGraph.op_type_hash`` to ``[N]`` int32 ids in
``[0, OP_TYPE_VOCAB)`` for an embedding table: ``1 + hash % (OP_TYPE_VOCAB − 1)``, and 0 for
the empty type and padding. Distinct types may share an id (hash buckets).
"""

from __future__ import annotations

import jax.numpy as jnp

from gsched.core.padding import PaddedGraph, topological_level, topological_rank

ID_FREQUENCIES = 4  # sin/cos pairs of the op-id encoding (features 8–15)
NUM_NODE_FEATURES = 8 + 2 * ID_FREQUENCIES
OP_TYPE_VOCAB = 1024


def _masked_mean(x: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.maximum(jnp.sum(mask), 1)


def _log_relative(x: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """``log1p(x / mean over real ops)`` (``x`` unchanged, i.e. 0, where the mean is 0)."""
    mean = _masked_mean(x, mask)
    return jnp.log1p(x / jnp.where(mean > 0, mean, 1.0))


def node_features(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, NUM_NODE_FEATURES]`` float32 node features of one graph (see the module doc)."""
    n = graph.op_mask.shape[0]
    mask = graph.op_mask
    output_bytes = jnp.zeros(n, jnp.float32).at[graph.tensor_producer].add(
        jnp.where(graph.tensor_mask, graph.tensor_size, 0.0))
    pairs = graph.pair_mask.astype(jnp.float32)
    in_degree = jnp.zeros(n, jnp.float32).at[graph.pair_consumer].add(pairs)
    out_degree = jnp.zeros(n, jnp.float32).at[graph.pair_producer].add(pairs)
    unread = graph.tensor_mask & (graph.tensor_consumer_end == graph.tensor_consumer_start)
    graph_output = jnp.zeros(n, bool).at[graph.tensor_producer].max(unread)
    level = topological_level(graph).astype(jnp.float32)
    depth = level / jnp.maximum(jnp.max(jnp.where(mask, level, 0.0)), 1.0)
    count = jnp.maximum(jnp.sum(mask), 1).astype(jnp.float32)
    angle = (topological_rank(graph).astype(jnp.float32) / count)[:, None] * (
        jnp.pi * 2.0 ** jnp.arange(ID_FREQUENCIES, dtype=jnp.float32))
    features = jnp.stack([
        _log_relative(graph.compute_cost, mask),
        _log_relative(output_bytes, mask),
        _log_relative(graph.temporary_memory, mask),
        jnp.log1p(in_degree),
        jnp.log1p(out_degree),
        graph.op_is_input.astype(jnp.float32),
        graph_output.astype(jnp.float32),
        depth,
    ], axis=-1)
    features = jnp.concatenate([features, jnp.sin(angle), jnp.cos(angle)], axis=-1)
    return jnp.where(mask[:, None], features, 0.0)


def op_type_ids(graph: PaddedGraph) -> jnp.ndarray:
    """``[N]`` int32 op-type ids in ``[0, OP_TYPE_VOCAB)``; 0 for the empty type and padding."""
    h = graph.op_type_hash
    return jnp.where(h == 0, 0, 1 + h % (OP_TYPE_VOCAB - 1)).astype(jnp.int32)
