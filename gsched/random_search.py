"""Random search: the best of ``budget`` uniform random chromosomes (REGAL's weakest baseline).

Evaluates a batch of graphs in chunks of ``chunk_size`` chromosomes per graph inside one
``lax.scan``, so memory stays bounded; exactly ``budget`` evaluations count (the surplus of the
last chunk is masked to +inf and can never be best).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched.cost_model import (CostParams, Evaluation, check_search_settings, evaluate_batch,
                               score)
from gsched.padding import PaddedGraph


class SearchResult(NamedTuple):
    """Per graph (leading ``[B]``): the best value, its chromosome and evaluation."""

    best_value: jnp.ndarray  # [B] float32
    best_keys: jnp.ndarray  # [B, L] padded layout
    best_evaluation: Evaluation  # leading [B]
    evals_used: jnp.ndarray  # [B] int32


@functools.partial(jax.jit, static_argnames=("num_devices", "budget", "objective",
                                             "chunk_size"))
def run_batch(key: jax.Array, graphs: PaddedGraph, *, num_devices: int, budget: int,
              objective: str = "peak_memory", cost_params: CostParams = CostParams(),
              chunk_size: int = 256) -> SearchResult:
    """Random search on graphs with a leading ``[B]`` axis, ``budget`` evaluations each."""
    check_search_settings(budget, num_devices, objective)
    cost_params = jax.tree.map(jnp.asarray, cost_params)
    batch, n = graphs.op_mask.shape
    length = n * (num_devices + 1) + graphs.tensor_mask.shape[1] * num_devices
    size = min(chunk_size, budget)
    steps = -(-budget // size)

    def step(carry, inputs):
        best_value, best_keys = carry
        step_key, first = inputs
        keys = jax.random.uniform(step_key, (batch, size, length), jnp.float32)
        values = score(evaluate_batch(graphs, keys, cost_params, num_devices=num_devices),
                       objective, cost_params)
        counted = first + jnp.arange(size) < budget
        values = jnp.where(counted[None, :], jnp.nan_to_num(values, nan=jnp.inf), jnp.inf)
        i = jnp.argmin(values, axis=1)
        value = jnp.take_along_axis(values, i[:, None], 1)[:, 0]
        better = value < best_value
        chosen = jnp.take_along_axis(keys, i[:, None, None], 1)[:, 0]
        return (jnp.where(better, value, best_value),
                jnp.where(better[:, None], chosen, best_keys)), None

    init = (jnp.full(batch, jnp.inf, jnp.float32), jnp.zeros((batch, length), jnp.float32))
    starts = jnp.arange(steps, dtype=jnp.int32) * size
    (best_value, best_keys), _ = jax.lax.scan(step, init, (jax.random.split(key, steps), starts))
    best = evaluate_batch(graphs, best_keys[:, None], cost_params, num_devices=num_devices)
    return SearchResult(best_value, best_keys, jax.tree.map(lambda x: x[:, 0], best),
                        jnp.full(batch, budget, jnp.int32))
