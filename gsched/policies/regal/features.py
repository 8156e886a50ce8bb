"""REGAL's node and edge features (appendix A.1), computed on padded graphs inside ``jit``.

Node features ``[N, D + 5]``, in this order:

0. sum of the sizes of the tensors the op reads (one per consumed tensor);
1. sum of the sizes of the tensors the op produces;
2. the op's temporary memory;
3. … ``3 + D − 1``: expected device (fraction of the search's chromosomes placing the op on
   each device);
4. ``3 + D``: expected schedule position (step of the op in the schedule / (steps − 1));
5. ``4 + D``: 1 for the pinned op (largest memory: reads + outputs + temporary), else 0.

Memory features are divided by the graph's largest memory number (largest of features 0–2
and of the tensor sizes). Edge features ``[E, 2]``: tensor size (same scale) and the
control-dependency flag, one edge per (producer, tensor, consumer) triple (SPEC §1, parallel
edges kept) — exactly ``PaddedGraph``'s consumer relations.

The search part is a uniform BRKGA run of ``search_evals`` evaluations (400 in REGAL, counted
in the method's budget) with the pinned op fixed to device 0; its final population's ``E``
elites are decoded again for their placements and orders (re-decoding chromosomes already
evaluated and counted, not new evaluations). Padded ops and edges get all-zero features.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.evaluate import evaluate_batch
from gsched.costmodel.params import CostParams
from gsched.search import brkga

STATIC_NODE_FEATURES = 3  # reads, outputs, temporary memory


def num_node_features(num_devices: int) -> int:
    return STATIC_NODE_FEATURES + num_devices + 2


NUM_EDGE_FEATURES = 2


class Features(NamedTuple):
    """GNN inputs of a batch of padded graphs (leading ``[B]``; without it for one graph)."""

    nodes: jnp.ndarray  # [B, N, D + 5] float32
    edges: jnp.ndarray  # [B, E, 2] float32
    pinned: jnp.ndarray  # [B, N] int32: 0 for the pinned op, −1 elsewhere (BRKGA ``pinned``)


def _memory(graph: PaddedGraph) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """One graph: (node memory ``[N, 3]`` unnormalized, edge sizes ``[E]``, scale ``[]``)."""
    n = graph.op_mask.shape[0]
    edge_size = jnp.where(graph.edge_mask, graph.tensor_size[graph.edge_tensor], 0.0)
    reads = jnp.zeros(n, jnp.float32).at[graph.edge_consumer].add(edge_size)
    tensor_size = jnp.where(graph.tensor_mask, graph.tensor_size, 0.0)
    outputs = jnp.zeros(n, jnp.float32).at[graph.tensor_producer].add(tensor_size)
    temp = jnp.where(graph.op_mask, graph.temporary_memory, 0.0)
    memory = jnp.stack([reads, outputs, temp], axis=-1)
    scale = jnp.maximum(jnp.max(memory), jnp.max(tensor_size))
    return memory, edge_size, jnp.where(scale > 0, scale, 1.0)


def pinned_ops(graphs: PaddedGraph) -> jnp.ndarray:
    """``[B, N]`` int32: device 0 for each graph's largest-memory op (first on ties), −1 else."""
    def one(graph):
        memory, _, _ = _memory(graph)
        total = jnp.where(graph.op_mask, memory.sum(-1), -1.0)
        return jnp.where(jnp.arange(total.shape[0]) == jnp.argmax(total), 0, -1)
    return jax.vmap(one)(graphs).astype(jnp.int32)


def _search_aggregates(graphs: PaddedGraph, keys: jnp.ndarray, cost_params: CostParams,
                       pinned: jnp.ndarray, num_devices: int) -> jnp.ndarray:
    """Chromosomes ``[B, R, L]`` → mean one-hot device and normalized position ``[B, N, D+1]``."""
    ev = evaluate_batch(graphs, keys, cost_params, num_devices=num_devices, pinned=pinned)
    n = graphs.op_mask.shape[-1]
    device = jax.nn.one_hot(jnp.maximum(ev.placement, 0), num_devices)  # [B, R, N, D]

    def positions(order, steps):  # [V], [] → [N] step of each op / (steps − 1)
        step = jnp.zeros(order.shape[0] + 1, jnp.float32).at[
            jnp.where(order >= 0, order, order.shape[0])].set(jnp.arange(order.shape[0]))
        return step[:n] / jnp.maximum(steps - 1, 1).astype(jnp.float32)

    position = jax.vmap(jax.vmap(positions))(ev.order, ev.num_steps)  # [B, R, N]
    return jnp.concatenate([device.mean(1), position.mean(1)[..., None]], axis=-1)


def compute_features(key: jax.Array, graphs: PaddedGraph, cost_params: CostParams, *,
                     num_devices: int, objective: str, search_evals: int
                     ) -> tuple[Features, brkga.BRKGAResult]:
    """Features of graphs ``[B]`` and the feature search's result (its best counts too).

    Traceable; ``search_evals`` cost-model evaluations per graph are counted.
    """
    config = brkga.BRKGAConfig()
    pinned = pinned_ops(graphs)
    search = brkga.run_batch(key, graphs, config, num_devices=num_devices, budget=search_evals,
                             objective=objective, cost_params=cost_params, pinned=pinned)
    fitness = search.fitness.reshape(search.fitness.shape[0], -1)  # [B, K·P]
    population = search.population.reshape(fitness.shape + search.population.shape[-1:])
    elites = jnp.argsort(fitness, axis=1, stable=True)[:, : config.num_elites]
    chosen = jnp.take_along_axis(population, elites[..., None], axis=1)  # [B, E, L]
    aggregates = _search_aggregates(graphs, chosen, cost_params, pinned, num_devices)

    def static(graph):
        memory, edge_size, scale = _memory(graph)
        edges = jnp.stack([edge_size / scale, graph.tensor_is_control[graph.edge_tensor]
                           .astype(jnp.float32)], axis=-1)
        return memory / scale, jnp.where(graph.edge_mask[:, None], edges, 0.0)

    memory, edges = jax.vmap(static)(graphs)
    nodes = jnp.concatenate([memory, aggregates, (pinned == 0)[..., None].astype(jnp.float32)],
                            axis=-1)
    nodes = jnp.where(graphs.op_mask[..., None], nodes, 0.0)
    return Features(nodes, edges, pinned), search
