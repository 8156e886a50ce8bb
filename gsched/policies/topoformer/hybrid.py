"""Topoformer-seeded BRKGA (``topoformer_brkga``): the Topoformer's orders seed a BRKGA whose
mutants are drawn around the best of them. Beyond the papers (issue #5); single device.

One traceable ``fn(key, graphs [B], cost_params, *, num_devices, budget, objective)``:

1. decode ``K`` orders per graph with a trained Topoformer (:mod:`gsched.policies.topoformer.method`:
   ``greedy`` ``K = 1``, ``sample`` / ``beam`` ``K = min(16, budget)``);
2. each order becomes a seed chromosome whose scheduling key of the op at position ``p``
   (0 = first of the ``n`` real ops) is ``(n − p) / (n + 1)``: the keys fall with the
   position, so list scheduling (SPEC §2) reproduces the order exactly;
3. every scheduling gene's initial and mutant distribution is the Beta with mean the seed
   key ``m = (n − p) / (n + 1)`` of the op's position ``p`` in the best decoded order (lowest
   peak, as the decoder tracks it exactly) and total concentration ``κ = α + β``:
   ``Beta(κ m, κ (1 − m))``. The default ``κ = 2`` is the concentration of standard BRKGA's
   uniform ``Beta(1, 1)``: only the mean moves, to the seed's key, so a mutant is a uniform
   chromosome tilted towards the order (its keys' spread, ``m (1 − m) / 3``, stays close to
   the uniform's ``1/12``). ``κ = n + 1`` makes each key the order statistic of ``n`` uniform
   keys that holds rank ``p`` (``Beta(n − p, p + 1)``), i.e. mutants keep the order's ranks
   within ``≈ √n / 2`` positions; larger ``κ`` concentrates them further. Affinity and transfer
   genes (ignored with ``D = 1``) and padded ops stay ``Beta(1, 1)``; the elite bias is
   REGAL's 0.7 everywhere. (``κ = 2`` was chosen over ``n + 1`` and 8, 32 on fresh
   training-distribution graphs, not on evaluation graphs: see ``docs/results/hybrid``);
4. BRKGA with REGAL's sizes (``π = 100``, ``π_e = 10``, ``π_c = 80``) runs with the ``K``
   seeds as the first chromosomes of its initial population, then any ``--seed-from``
   heuristics' chromosomes (``seeds [B, S, L]``; the Betas stay centred on the decoded order).

Budget: the ``K`` seeds are BRKGA's first ``K`` counted evaluations (one per decoded order,
what the ``topoformer`` method counts), so ``evals_used == budget`` and the result is never
worse than the best decoded order. Seeds, Betas and decoded orders do not depend on the
bucket (the keys use the real op count); BRKGA's random draws do (their shape is the padded
chromosome), as for the ``brkga`` method.
"""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams
from gsched.policies.topoformer.checkpoint import load
from gsched.policies.topoformer.method import (
    check_single_device,
    decode_width,
    decoded_orders,
)
from gsched.policies.topoformer.model import Topoformer, TopoformerConfig
from gsched.registry import CHECKPOINT, DECODE, SEED_FROM, Method, Option, Search
from gsched.search import brkga
from gsched.search.common import SearchResult

NAME = "topoformer_brkga"
OBJECTIVE = "peak_memory"  # with D = 1 every order has the same runtime


def seed_keys(op_mask: jnp.ndarray, order: jnp.ndarray) -> jnp.ndarray:
    """``[N]`` scheduling keys of ``order [N]`` (``n`` real ops first): ``(n − p) / (n + 1)``
    for the real op at position ``p``, 0 for padding."""
    n = jnp.sum(op_mask).astype(jnp.float32)
    position = jnp.zeros(order.shape, jnp.float32).at[order].set(
        jnp.arange(order.shape[0], dtype=jnp.float32))
    return jnp.where(op_mask, (n - position) / (n + 1.0), 0.0)


def rank_betas(op_mask: jnp.ndarray, order: jnp.ndarray,
               concentration: float) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Scheduling genes' ``(α [N], β [N])`` for one graph: ``κ m`` and ``κ (1 − m)`` with
    ``m`` the op's :func:`seed_keys` and ``κ = concentration``; 1 for padding."""
    mean = seed_keys(op_mask, order)
    return (jnp.where(op_mask, concentration * mean, 1.0),
            jnp.where(op_mask, concentration * (1.0 - mean), 1.0))


def seed_chromosome(graph: PaddedGraph, order: jnp.ndarray) -> jnp.ndarray:
    """``[L]`` chromosome (``D = 1`` padded layout) whose schedule is ``order [N]`` (a
    topological order of the real ops, padded ops after them): :func:`seed_keys` as the
    scheduling keys, the other genes (ignored with one device) 0."""
    unused = jnp.zeros(graph.op_mask.shape[-1], jnp.float32)
    return jnp.concatenate([unused, seed_keys(graph.op_mask, order),
                            jnp.zeros(graph.tensor_mask.shape[-1], jnp.float32)])


def mutant_params(graph: PaddedGraph, order: jnp.ndarray,
                  concentration: float) -> brkga.BRKGAParams:
    """One graph's ``BRKGAParams`` (fields ``[L]``, ``D = 1``): :func:`rank_betas` on the
    scheduling genes, ``Beta(1, 1)`` elsewhere, elite bias 0.7."""
    num_ops, num_tensors = graph.op_mask.shape[-1], graph.tensor_mask.shape[-1]
    alpha, beta = rank_betas(graph.op_mask, order, concentration)
    uniform = brkga.uniform_params(2 * num_ops + num_tensors)
    scheduling = slice(num_ops, 2 * num_ops)
    return uniform._replace(alpha=uniform.alpha.at[scheduling].set(alpha),
                            beta=uniform.beta.at[scheduling].set(beta))


def seeded_brkga(key: jax.Array, graphs: PaddedGraph, orders: jnp.ndarray,
                  best_orders: jnp.ndarray, concentration: float, *, budget: int,
                  objective: str = OBJECTIVE, cost_params: CostParams = CostParams(),
                  extra_seeds: jnp.ndarray | None = None) -> brkga.BRKGAResult:
    """BRKGA on ``graphs [B]`` (``D = 1``) seeded with ``orders [B, K, N]`` (each a
    :func:`seed_chromosome`), then ``extra_seeds [B, S, L]`` (chromosomes), and with the
    scheduling genes' Betas centred on ``best_orders [B, N]`` (:func:`mutant_params`).
    Whatever produced the orders: the Topoformer here, another scheduler in
    ``gsched.harness.seed_control``'s control."""
    seeds = jax.vmap(jax.vmap(seed_chromosome, in_axes=(None, 0)))(graphs, orders)
    if extra_seeds is not None:
        seeds = jnp.concatenate([seeds, jnp.asarray(extra_seeds, seeds.dtype)], axis=1)
    params = jax.vmap(lambda g, o: mutant_params(g, o, concentration))(graphs, best_orders)
    return brkga.run_batch(key, graphs, brkga.BRKGAConfig(), params, num_devices=1,
                           budget=budget, objective=objective, cost_params=cost_params,
                           seeds=seeds)


def search(model: Topoformer, config: TopoformerConfig, decoding: str, concentration: float,
           key: jax.Array, graphs: PaddedGraph, cost_params: CostParams,
           seeds: jnp.ndarray | None = None, *, num_devices: int, budget: int,
           objective: str) -> SearchResult:
    """Topoformer orders → seeds and rank Betas → BRKGA on ``graphs [B]`` (traceable; see
    the module docstring), also seeded with ``seeds [B, S, L]`` when given. Exactly
    ``budget`` evaluations per graph."""
    check_single_device(NAME, num_devices)
    if objective != OBJECTIVE:
        raise ValueError(f"{NAME} optimizes only {OBJECTIVE} (with one device every order has "
                         f"the same runtime), not {objective}")
    width = decode_width(decoding, budget)
    key_decode, key_search = jax.random.split(key)
    orders, best = decoded_orders(model, config, decoding, key_decode, graphs, width)
    batch = jnp.arange(graphs.op_mask.shape[0])
    result = seeded_brkga(key_search, graphs, orders, orders[batch, best], concentration,
                          budget=budget, objective=objective, cost_params=cost_params,
                          extra_seeds=seeds)
    return SearchResult(result.best_value, result.best_keys, result.best_evaluation,
                        result.evals_used)


def build_topoformer_brkga(checkpoint: str | Path | None = None, decode: str = "beam",
                           concentration: float = 2.0) -> Search:
    """The ``topoformer_brkga`` runner for :mod:`gsched.methods` (loads the checkpoint now).
    ``decode``: greedy / sample / beam (default, the paper's best); ``concentration``:
    ``κ = α + β`` of the mutant Betas (default 2, that of the uniform ``Beta(1, 1)``)."""
    if (isinstance(concentration, bool) or not isinstance(concentration, (int, float))
            or not math.isfinite(concentration) or concentration <= 0):
        raise ValueError(f"concentration must be a finite number > 0, got {concentration!r}")
    model, config = load(checkpoint, decode)

    def runner(key, graphs, *, cost_params, num_devices, budget, objective, seeds=None):
        return search(model, config, decode, float(concentration), key, graphs, cost_params,
                      seeds, num_devices=num_devices, budget=budget, objective=objective)

    return Search(runner)


CONCENTRATION = Option("concentration", float, "topoformer_brkga: total concentration of the "
                                               "mutant Betas around the decoded order (default 2)")
METHODS = {
    "topoformer_brkga": Method("Topoformer-seeded BRKGA: the decoded orders seed BRKGA, mutants "
                               "from rank Betas around the best one; one device", "search",
                               build_topoformer_brkga,
                               options=(CHECKPOINT, DECODE, CONCENTRATION, SEED_FROM),
                               max_devices=1, objectives=("peak_memory",)),
}
