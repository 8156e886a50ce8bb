"""Pieces shared by the budgeted searches (BRKGA, random search, local search).

Each search scores batches of chromosomes per graph (``[B, K, L]``) and keeps, per graph, the
best value, its chromosome and its :class:`~gsched.costmodel.evaluate.Evaluation` as it goes, so the
best is never evaluated twice.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched.core.padding import PaddedGraph
from gsched.costmodel.evaluate import Evaluation, evaluate_batch, score
from gsched.costmodel.params import CostParams


class SearchResult(NamedTuple):
    """Per graph (leading ``[B]``): the best value, its chromosome and evaluation."""

    best_value: jnp.ndarray  # [B] float32
    best_keys: jnp.ndarray  # [B, L] padded layout
    best_evaluation: Evaluation  # leading [B]
    evals_used: jnp.ndarray  # [B] int32


class Best(NamedTuple):
    """The best so far of each graph, carried through a search's scan."""

    value: jnp.ndarray  # [B] float32, +inf before the first evaluation
    keys: jnp.ndarray  # [B, L]
    evaluation: Evaluation  # leading [B]


def scored_batch(graphs: PaddedGraph, keys: jnp.ndarray, cost_params: CostParams, *,
                 num_devices: int, objective: str, pinned=None,
                 chunk: int = 8) -> tuple[Evaluation, jnp.ndarray]:
    """``keys [B, K, L]`` → (Evaluation ``[B, K]``, value to minimize ``[B, K]``, NaN → +inf)."""
    evaluation = evaluate_batch(graphs, keys, cost_params, num_devices=num_devices,
                                pinned=pinned, chunk=chunk)
    value = score(evaluation, objective, cost_params)
    return evaluation, jnp.where(jnp.isnan(value), jnp.inf, value)


def no_best(evaluate, batch: int, length: int) -> Best:
    """The empty :class:`Best` for ``batch`` graphs and chromosomes of ``length`` keys;
    ``evaluate`` maps ``[B, K, L]`` keys to ``(Evaluation, values)`` (only its shapes are
    used)."""
    shapes = jax.eval_shape(evaluate, jax.ShapeDtypeStruct((batch, 1, length), jnp.float32))[0]
    return Best(jnp.full((batch,), jnp.inf, jnp.float32),
                jnp.zeros((batch, length), jnp.float32),
                jax.tree.map(lambda s: jnp.zeros((batch,) + s.shape[2:], s.dtype), shapes))


def track_best(best: Best, values: jnp.ndarray, keys: jnp.ndarray, evaluation: Evaluation,
               force=False) -> Best:
    """Takes each graph's best of the step (``values [B, K]``, ``keys [B, K, L]``,
    ``evaluation`` ``[B, K]``) where it is strictly better than ``best``, or where ``force``."""
    batch = jnp.arange(values.shape[0])
    arg = jnp.argmin(values, axis=1)
    step_best = values[batch, arg]
    better = (step_best < best.value) | force

    def pick(old, new):
        return jnp.where(better.reshape(better.shape + (1,) * (old.ndim - 1)), new[batch, arg],
                         old)

    return Best(jnp.where(better, step_best, best.value), pick(best.keys, keys),
                jax.tree.map(pick, best.evaluation, evaluation))
