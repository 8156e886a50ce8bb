"""The ``topoformer`` optimize method: a trained Topoformer's orders, scored by the cost model.

Single device only (D = 1, the Neural Topological Ordering setting). The runner is a traceable
``fn(key, graphs [B], cost_params, *, num_devices, budget, objective)``: features, encoder,
decoding and the cost-model evaluation of the decoded orders (via ``order_keys``) run as one
jitted computation. ``decode`` (the option; ``--decode`` on the command line): ``greedy``
(1 order), ``sample`` (best of ``K``) or ``beam`` (width ``K``, state collapsing; the
default, the paper's best), ``K = min(16, budget)``; ``evals_used`` = the ``K`` complete
orders scored (beam search tracks the exact peak of its ``K`` beams to the end;
beams that collapsed into another are scored as copies of the best).

Checkpoints: :mod:`gsched.policies.topoformer.checkpoint`.
"""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.evaluate import order_keys
from gsched.costmodel.params import CostParams
from gsched.policies.topoformer.checkpoint import load
from gsched.policies.topoformer.decode import best_index
from gsched.policies.topoformer.decode import decode as decode_graph
from gsched.policies.topoformer.model import Topoformer, TopoformerConfig, graph_inputs
from gsched.registry import CHECKPOINT, DECODE, Method, Search
from gsched.search.common import SearchResult, no_best, scored_batch, track_best

WIDTH = 16  # samples / beam width (NTO §5)


def decoded_orders(model: Topoformer, config: TopoformerConfig, decoding: str,
                   key: jax.Array, graphs: PaddedGraph, width: int) -> tuple[jnp.ndarray,
                                                                             jnp.ndarray]:
    """The model's decoded orders of ``graphs [B]`` (traceable): ``(orders [B, K, N], best
    [B])``, ``K = width`` (1 for greedy); beams that collapsed into another are replaced by
    the best order, ``best`` indexes the order of lowest peak memory."""
    batch = graphs.op_mask.shape[0]
    priorities = jax.vmap(model)(jax.vmap(lambda g: graph_inputs(g, config))(graphs))
    decoded = jax.vmap(lambda g, p, k: decode_graph(g, p, k, mode=decoding, width=width))(
        graphs, priorities, jax.random.split(key, batch))
    best = best_index(decoded)  # [B]
    orders = jnp.where(decoded.valid[..., None], decoded.order,
                       decoded.order[jnp.arange(batch), best][:, None])
    return orders, best


def decode_width(decoding: str, budget: int) -> int:
    """Orders decoded (and evaluations counted): 1 for greedy, else ``min(16, budget)``."""
    return 1 if decoding == "greedy" else min(WIDTH, budget)


def check_single_device(name: str, num_devices: int) -> None:
    """A ``ValueError`` naming ``name`` unless ``num_devices == 1``."""
    if num_devices != 1:
        raise ValueError(f"{name} orders ops on a single device; got num_devices="
                         f"{num_devices}")


def search(model: Topoformer, config: TopoformerConfig, decoding: str, key: jax.Array,
           graphs: PaddedGraph, cost_params: CostParams, *, num_devices: int, budget: int,
           objective: str) -> SearchResult:
    """Decodes ``graphs [B]`` and scores the orders with the cost model (traceable)."""
    check_single_device("topoformer", num_devices)
    width = decode_width(decoding, budget)
    batch = graphs.op_mask.shape[0]
    orders, _ = decoded_orders(model, config, decoding, key, graphs, width)
    keys = jax.vmap(jax.vmap(lambda g, o: order_keys(g, o, jnp.zeros_like(o), 1),
                             in_axes=(None, 0)))(graphs, orders)

    def evaluate(k):
        return scored_batch(graphs, k, cost_params, num_devices=1, objective=objective)

    evaluation, values = evaluate(keys)
    result = track_best(no_best(evaluate, batch, keys.shape[-1]), values, keys, evaluation)
    return SearchResult(result.value, result.keys, result.evaluation,
                        jnp.full(batch, width, jnp.int32))


def build_topoformer(checkpoint: str | Path | None = None, decode: str = "beam") -> Search:
    """The ``topoformer`` runner for :mod:`gsched.methods` (loads the checkpoint now);
    ``decode``: the decoding mode (``--decode``)."""
    model, config = load(checkpoint, decode)

    def runner(key, graphs, *, cost_params, num_devices, budget, objective):
        return search(model, config, decode, key, graphs, cost_params,
                      num_devices=num_devices, budget=budget, objective=objective)

    return Search(runner)


METHODS = {
    "topoformer": Method("Neural Topological Ordering: Topoformer priorities decoded greedy / "
                         "sample / beam (width 16, state collapsing); one device",
                         "search", build_topoformer, options=(CHECKPOINT, DECODE),
                         max_devices=1),
}
