"""Random search: the best of ``budget`` uniform random chromosomes (REGAL's weakest baseline).

Evaluates a batch of graphs in chunks of ``chunk_size`` chromosomes per graph inside one
``lax.scan``, so memory stays bounded; exactly ``budget`` evaluations count (the surplus of the
last chunk is masked to +inf and can never be best).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import (
    CostParams,
    check_fusion,
    check_scheduler,
    check_search_settings,
)
from gsched.search.common import (
    SearchResult,
    check_genes,
    freeze_genes,
    no_best,
    scored_batch,
    track_best,
)


@functools.partial(jax.jit, static_argnames=("num_devices", "budget", "objective",
                                             "chunk_size", "scheduler", "fusion", "genes"))
def run_batch(key: jax.Array, graphs: PaddedGraph, *, num_devices: int, budget: int,
              objective: str = "peak_memory", cost_params: CostParams = CostParams(),
              chunk_size: int = 256, scheduler: str = "list", fusion: bool = False,
              genes: str = "all") -> SearchResult:
    """Random search on graphs with a leading ``[B]`` axis, ``budget`` evaluations each.

    ``scheduler`` / ``fusion``: the cost model's static settings (with ``fusion`` the
    chromosomes carry fusion keys); ``genes``: the parts drawn at random, the others fixed
    (:func:`gsched.search.common.freeze_genes`)."""
    check_search_settings(budget, num_devices, objective)
    scheduler, fusion, genes = check_scheduler(scheduler), check_fusion(fusion), check_genes(genes)
    cost_params = jax.tree.map(jnp.asarray, cost_params)
    batch = graphs.op_mask.shape[0]
    length = graphs.bucket.chromosome_length(num_devices, fusion)
    size = min(chunk_size, budget)
    steps = -(-budget // size)

    def evaluate(keys):
        return scored_batch(graphs, keys, cost_params, num_devices=num_devices,
                            objective=objective, scheduler=scheduler, fusion=fusion)

    def step(best, inputs):
        step_key, first = inputs
        keys = freeze_genes(jax.random.uniform(step_key, (batch, size, length), jnp.float32),
                            graphs.bucket, num_devices, fusion, genes)
        evaluation, values = evaluate(keys)
        counted = first + jnp.arange(size) < budget
        values = jnp.where(counted[None, :], values, jnp.inf)
        return track_best(best, values, keys, evaluation), None

    starts = jnp.arange(steps, dtype=jnp.int32) * size
    best, _ = jax.lax.scan(step, no_best(evaluate, batch, length),
                           (jax.random.split(key, steps), starts))
    return SearchResult(best.value, best.keys, best.evaluation,
                        jnp.full(batch, budget, jnp.int32))
