"""Pieces shared by the budgeted searches (BRKGA, random search, local search, annealing).

Each search scores batches of chromosomes per graph (``[B, K, L]``) and keeps, per graph, the
best value, its chromosome and its :class:`~gsched.costmodel.evaluate.Evaluation` as it goes, so the
best is never evaluated twice.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import Bucket, PaddedGraph
from gsched.costmodel.evaluate import Evaluation, evaluate_batch, score
from gsched.costmodel.params import CostParams

GENES = ("all", "placement+schedule", "placement")


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


def concrete(x) -> np.ndarray | None:
    """``x`` as numpy when it holds values (not a tracer), else None."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
        return None
    return np.asarray(x)


def check_seeds(seeds, length: int, batch: int | None, most: int, room: str) -> None:
    """Known chromosomes a search starts from: ``[S, L]`` (shared) or, with ``batch``,
    ``[B, S, L]``, in the padded layout; ``1 <= S <= most`` (``room`` says what bounds it) and
    keys in ``[0, 1]`` when concrete. ``ValueError`` naming the problem otherwise."""
    if seeds is None:
        return
    shape = np.shape(seeds)
    ok = (len(shape) == 2 or (batch is not None and len(shape) == 3 and shape[0] == batch))
    if not ok or shape[-1] != length:
        want = f"[S, {length}]" + ("" if batch is None else f" or [{batch}, S, {length}]")
        raise ValueError(f"seeds must have shape {want} (padded layout, see gsched.pad_keys), "
                         f"got {shape}")
    if shape[-2] < 1:
        raise ValueError(f"seeds hold no chromosome (shape {shape})")
    if shape[-2] > most:
        raise ValueError(f"{shape[-2]} seeds do not fit: at most {most} ({room})")
    values = concrete(seeds)
    if values is not None and not np.all((values >= 0) & (values <= 1)):
        raise ValueError("seed keys must be finite and in [0, 1]")


def batch_seeds(seeds, batch: int) -> jnp.ndarray:
    """Checked seeds (:func:`check_seeds`) as float32 ``[B, S, L]``."""
    seeds = jnp.asarray(seeds, jnp.float32)
    return jnp.broadcast_to(seeds, (batch,) + seeds.shape[-2:])


def scored_batch(graphs: PaddedGraph, keys: jnp.ndarray, cost_params: CostParams, *,
                 num_devices: int, objective: str, pinned=None, chunk: int | None = None,
                 scheduler: str = "list", fusion: bool = False) -> tuple[Evaluation, jnp.ndarray]:
    """``keys [B, K, L]`` → (Evaluation ``[B, K]``, value to minimize ``[B, K]``, NaN → +inf).

    ``scheduler`` and ``fusion`` are the cost model's static settings
    (:func:`~gsched.costmodel.evaluate.evaluate_batch`)."""
    evaluation = evaluate_batch(graphs, keys, cost_params, num_devices=num_devices,
                                pinned=pinned, chunk=chunk, scheduler=scheduler, fusion=fusion)
    value = score(evaluation, objective, cost_params)
    return evaluation, jnp.where(jnp.isnan(value), jnp.inf, value)


def check_genes(genes) -> str:
    """Validates which chromosome parts a search varies (see :func:`freeze_genes`)."""
    if genes not in GENES:
        raise ValueError(f"unknown genes {genes!r}; expected one of {GENES}")
    return genes


def move_kinds(num_devices: int, fusion: bool, genes: str) -> tuple[str, ...]:
    """The kinds of one-op move a local search (local search, annealing) may make under these
    settings: ``"placement"`` (``D ≥ 2``), ``"priority"`` (priorities searched), ``"fusion"``
    (fusion keys searched); :class:`ValueError` when there are none (``D = 1`` with
    ``genes == "placement"``)."""
    check_genes(genes)
    kinds = []
    if num_devices >= 2:
        kinds.append("placement")
    if genes in ("all", "placement+schedule"):
        kinds.append("priority")
    if fusion and genes == "all":
        kinds.append("fusion")
    if not kinds:
        raise ValueError(f"nothing to search: with num_devices={num_devices} and "
                         f"genes={genes!r} every decision is fixed (one device, fixed "
                         f"priorities); use genes='placement+schedule' or 'all', or D >= 2")
    return tuple(kinds)


def freeze_genes(keys: jnp.ndarray, bucket: Bucket, num_devices: int, fusion: bool,
                 genes: str) -> jnp.ndarray:
    """``keys [..., L]`` (padded layout) with the parts a search does not vary set to constants.

    ``genes``: ``"all"`` (nothing frozen); ``"placement+schedule"`` (fusion keys 0: no op fuses);
    ``"placement"`` (also every op and transfer priority 0.5, so schedules break ties by the
    SPEC §2 rules alone: op index under ``"list"``, ready time then op index under ``"fifo"``).
    GO's ablation rows "pl", "pl+sch" and "pl+sch+fu" are these three settings.
    """
    check_genes(genes)
    if genes == "all":
        return keys
    n, d = bucket.num_ops, num_devices
    base = bucket.chromosome_length(d)
    position = jnp.arange(keys.shape[-1])
    if genes == "placement":
        keys = jnp.where((position >= n * d) & (position < base), jnp.float32(0.5), keys)
    return jnp.where(position >= base, jnp.float32(0.0), keys)


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
