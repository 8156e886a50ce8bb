"""Simulated annealing on the random-key chromosome (GO's "SA" baseline).

GO (Zhou et al., "GO: Generalized Device Placement and Operation Fusion") compares against a
simulated-annealing search over placements and fusion decisions; here it works on the SPEC §2 /
§8.3 chromosome (``N·D`` affinities, ``N`` op priorities, ``T·D`` transfer priorities and, with
``fusion``, ``N`` fusion keys), so it also searches the schedule priorities and its result is a
chromosome like every other optimizer's: :func:`run_batch` returns the same
:class:`~gsched.search.common.SearchResult` as :func:`gsched.search.random.run_batch`.

**Chains.** ``chains`` independent Metropolis chains per graph run side by side: every step
proposes one move per chain and scores all ``[B, chains]`` proposals with ONE
:func:`~gsched.search.common.scored_batch` call inside a ``lax.scan`` (so one cost-model
instance is compiled). Each chain starts from a uniform random chromosome or, given ``seeds
[S, L]`` (or ``[B, S, L]``, ``S ≤`` the number of chains), chain ``c`` starts from seed
``c mod S``: annealing from known solutions (``--seed-from``), never worse than the best seed.

**Budget** (as in :mod:`gsched.search.random`): every evaluation counts, the initial chromosomes
included. With ``K = min(chains, budget)`` chains, step 0 evaluates the ``K`` initial
chromosomes and each later step ``K`` proposals; ``ceil(budget / K)`` steps run and the surplus
slots of the last step get value ``+inf`` (never accepted, never best), so ``evals_used ==
budget`` exactly.

**Genes.** ``genes`` (:data:`~gsched.search.common.GENES`, GO's ablation rows) says which parts
are searched; :func:`~gsched.search.common.freeze_genes` is applied to every chromosome before it
is evaluated (initial ones and proposals), so ``best_keys`` re-evaluate to ``best_value``.

**Moves** (one per proposal; its kind uniform among the allowed ones; only real ops and tensors,
``graphs.op_mask`` / ``graphs.tensor_mask``: genes of padded ops and tensors are never touched):

* *placement* (when ``D ≥ 2``, any ``genes``): a random real op moves to a device other than its
  current one (uniform); its affinity row becomes ``one_hot(new device)``, so the decoded
  device (the row's argmax) changes deterministically and the keys stay in ``[0, 1]``;
* *priority* (``genes`` ``"all"`` or ``"placement+schedule"``): a uniformly redrawn key for a
  random real op's scheduling priority or — with probability 1/2 when ``D ≥ 2`` and the graph
  has tensors — a random real tensor's transfer priority towards a random device;
* *fusion* (``fusion=True`` and ``genes == "all"``): a random real op's fusion key ``k`` becomes
  ``1 − k`` (flips its side of 0.5, i.e. whether the op is a fusion candidate, SPEC §8.3).

With ``D = 1`` and ``genes == "placement"`` no move exists (nothing to search):
:class:`ValueError`.

**Acceptance and temperature.** A proposal with value ``v'`` replaces its chain's current value
``v`` when ``v'`` is finite and either ``v`` is not finite, ``v' ≤ v``, or ``u <
exp(−(v' − v) / (t·|v| + tiny))`` with ``u`` uniform; so infinite (or NaN) values are never
accepted over finite ones and the temperature is relative to the objective's scale. The relative
temperature ``t`` falls geometrically from ``initial_temperature`` (first move step; default 0.05,
i.e. a move worsening the value by 5 % is accepted with probability ``1/e``) to
``final_temperature`` (last step; default 0.0005: practically greedy). The best-ever chromosome
of every graph is tracked over all evaluated chromosomes
(:func:`~gsched.search.common.track_best`), so ``best_evaluation`` needs no extra cost-model
call.

**Determinism and padding.** Graph ``b`` uses ``jax.random.split(key, B)[b]``. Every gene of an
initial chromosome is drawn from its own key (``fold_in`` of its part and its index within the
real layout: op ``j``'s affinities, priority and fusion key, tensor ``t``'s transfer keys), and
moves pick ops and tensors by their rank among the real ones, so the search does not depend on
the padding bucket: the same graph padded into a larger bucket gives the same trajectory and
result (up to the cost model's float32 rounding). Padded genes of the initial chromosomes are
random too (their values never matter).

The jitted :func:`run_batch` compiles once per bucket and static setting (``num_devices``,
``budget``, ``objective``, ``scheduler``, ``fusion``, ``genes``, ``chains``, temperatures);
``cost_params`` and ``key`` are traced.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import (
    CostParams,
    check_fusion,
    check_scheduler,
    check_search_settings,
    is_int,
)
from gsched.search.common import (
    SearchResult,
    batch_seeds,
    check_seeds,
    freeze_genes,
    move_kinds,
    no_best,
    scored_batch,
    track_best,
)

__all__ = ["DEFAULT_FINAL_TEMPERATURE", "DEFAULT_INITIAL_TEMPERATURE", "run_batch"]

DEFAULT_INITIAL_TEMPERATURE = 0.05
DEFAULT_FINAL_TEMPERATURE = 0.0005

# Parts of the chromosome, for the per-gene keys of the initial chromosomes (fold_in ids).
_AFFINITY, _PRIORITY, _TRANSFER, _FUSION = range(4)


def _check_settings(budget, num_devices, objective, scheduler, fusion, genes, chains,
                    initial_temperature, final_temperature) -> tuple[str, ...]:
    check_search_settings(budget, num_devices, objective)
    check_scheduler(scheduler)
    kinds = move_kinds(num_devices, check_fusion(fusion), genes)
    if not is_int(chains) or chains < 1:
        raise ValueError(f"chains must be an int >= 1, got {chains!r}")
    for name, t in (("initial_temperature", initial_temperature),
                    ("final_temperature", final_temperature)):
        if (not isinstance(t, (int, float, np.integer, np.floating)) or isinstance(t, bool)
                or not math.isfinite(t) or not t > 0):
            raise ValueError(f"{name} must be a finite number > 0, got {t!r}")
    if initial_temperature < final_temperature:
        raise ValueError(f"initial_temperature ({initial_temperature}) must be >= "
                         f"final_temperature ({final_temperature})")
    return kinds


def _real_indices(mask: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The real entries' indices in index order (then padding), and how many are real."""
    return (jnp.argsort(~mask, stable=True).astype(jnp.int32),
            jnp.sum(mask).astype(jnp.int32))


def _initial(key: jax.Array, n: int, t: int, d: int, fusion: bool) -> jnp.ndarray:
    """One uniform chromosome ``[L]`` (padded layout), each gene from its own key (see the
    module docstring), so the real genes do not depend on the bucket."""

    def part(which, count):
        k = jax.random.fold_in(key, which)
        return jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(k, i), (),
                                                     jnp.float32))(jnp.arange(count))

    parts = [part(_AFFINITY, n * d), part(_PRIORITY, n), part(_TRANSFER, t * d)]
    if fusion:
        parts.append(part(_FUSION, n))
    return jnp.concatenate(parts)


def _propose(key: jax.Array, x: jnp.ndarray, real_ops, num_ops, real_tensors, num_tensors,
             *, num_devices: int, kinds: tuple[str, ...]) -> jnp.ndarray:
    """One random move (module docstring) of one chromosome ``x [L]``; ``real_ops`` /
    ``real_tensors`` and their counts are the graph's :func:`_real_indices`."""
    n, d = real_ops.shape[0], num_devices
    k_kind, k_op, k_dev, k_val, k_tensor, k_tdev, k_which = jax.random.split(key, 7)
    j = real_ops[jax.random.randint(k_op, (), 0, jnp.maximum(num_ops, 1))]
    candidates = []
    for kind in kinds:
        if kind == "placement":
            slots = j * d + jnp.arange(d)
            current = jnp.argmax(x[slots])
            target = (current + jax.random.randint(k_dev, (), 1, d)) % d
            candidates.append(x.at[slots].set(jax.nn.one_hot(target, d, dtype=x.dtype)))
        elif kind == "priority":
            value = jax.random.uniform(k_val, (), x.dtype)
            moved = x.at[n * d + j].set(value)
            if d >= 2:
                tensor = real_tensors[jax.random.randint(k_tensor, (), 0,
                                                         jnp.maximum(num_tensors, 1))]
                device = jax.random.randint(k_tdev, (), 0, d)
                transfer = x.at[n * d + n + tensor * d + device].set(value)
                use_transfer = jax.random.bernoulli(k_which, 0.5) & (num_tensors > 0)
                moved = jnp.where(use_transfer, transfer, moved)
            candidates.append(moved)
        else:  # fusion
            position = x.shape[0] - n + j
            candidates.append(x.at[position].set(1.0 - x[position]))
    if len(candidates) == 1:
        moved = candidates[0]
    else:
        moved = jnp.stack(candidates)[jax.random.randint(k_kind, (), 0, len(candidates))]
    return jnp.where(num_ops > 0, moved, x)


@functools.partial(jax.jit, static_argnames=("num_devices", "budget", "objective", "scheduler",
                                             "fusion", "genes", "chains",
                                             "initial_temperature", "final_temperature"))
def run_batch(key: jax.Array, graphs: PaddedGraph, *, num_devices: int, budget: int,
              objective: str = "peak_memory", cost_params: CostParams = CostParams(),
              scheduler: str = "list", fusion: bool = False, genes: str = "all",
              chains: int = 8, initial_temperature: float = DEFAULT_INITIAL_TEMPERATURE,
              final_temperature: float = DEFAULT_FINAL_TEMPERATURE,
              seeds: jnp.ndarray | None = None) -> SearchResult:
    """Simulated annealing on graphs with a leading ``[B]`` axis, ``budget`` evaluations each.

    Args:
      key: PRNG key; the result is a deterministic function of it and the inputs.
      graphs: a :class:`~gsched.core.padding.PaddedGraph` batch (:func:`gsched.batch_graphs`).
      num_devices: ``D``.
      budget: cost-model evaluations per graph, ``> 0``; exactly this many are counted.
      objective: ``"peak_memory"`` or ``"runtime"`` (:func:`gsched.costmodel.evaluate.score`).
      cost_params: the dynamic cost-model settings (traced).
      scheduler, fusion: the cost model's static settings (SPEC §8); with ``fusion`` the
        chromosome has ``N`` more keys.
      genes: which chromosome parts are searched (:data:`gsched.search.common.GENES`).
      chains: independent Metropolis chains per graph (``min(chains, budget)`` run).
      initial_temperature, final_temperature: the relative temperature ``t`` of the first and
        the last move step (finite, ``> 0``, initial ``≥`` final; Python floats, static).
      seeds: ``[S, L]`` or ``[B, S, L]`` known chromosomes (padded layout), the chains' starts
        (chain ``c`` from seed ``c mod S``; ``S ≤ min(chains, budget)``).

    Returns a :class:`~gsched.search.common.SearchResult` (leading ``[B]``, padded layout).
    See the module docstring.
    """
    kinds = _check_settings(budget, num_devices, objective, scheduler, fusion, genes, chains,
                            initial_temperature, final_temperature)
    if not isinstance(graphs, PaddedGraph) or graphs.op_mask.ndim != 2:
        raise ValueError("run_batch expects a PaddedGraph with a leading [B] axis "
                         "(gsched.batch_graphs)")
    fusion = bool(fusion)
    cost_params = jax.tree.map(lambda v: jnp.asarray(v, jnp.float32), cost_params)
    bucket = graphs.bucket
    batch = graphs.op_mask.shape[0]
    length = bucket.chromosome_length(num_devices, fusion)
    size = min(int(chains), int(budget))
    check_seeds(seeds, length, batch, size, "one per chain: min(chains, budget)")
    steps = -(-int(budget) // size)
    span = max(steps - 2, 1)  # move steps are 1 … steps − 1: t goes t0 → tf over them
    log_ratio = math.log(final_temperature / initial_temperature)
    tiny = jnp.finfo(jnp.float32).tiny

    def freeze(keys):
        return freeze_genes(keys, bucket, num_devices, fusion, genes)

    def evaluate(keys):
        return scored_batch(graphs, keys, cost_params, num_devices=num_devices,
                            objective=objective, scheduler=scheduler, fusion=fusion)

    graph_keys = jax.random.split(key, batch)
    if seeds is None:
        k_init = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, 0), size))(graph_keys)
        initial = jax.vmap(jax.vmap(lambda k: _initial(k, bucket.num_ops, bucket.num_tensors,
                                                       num_devices, fusion)))(k_init)
    else:
        seeds = batch_seeds(seeds, batch)
        initial = seeds[:, jnp.arange(size) % seeds.shape[1]]
    step_keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(k, 1), steps))(graph_keys)

    propose = functools.partial(_propose, num_devices=num_devices, kinds=kinds)
    propose_all = jax.vmap(jax.vmap(propose, in_axes=(0, 0, None, None, None, None)))
    real = (*jax.vmap(_real_indices)(graphs.op_mask),  # once per graph, not per proposal
            *jax.vmap(_real_indices)(graphs.tensor_mask))

    def step(carry, xs):
        current, value, best = carry
        i, keys_i = xs  # keys_i [B] for this step
        k_move, k_accept = jnp.moveaxis(jax.vmap(lambda k: jax.random.split(k, 2))(keys_i),
                                        1, 0)
        chain_keys = jax.vmap(lambda k: jax.random.split(k, size))(k_move)
        moved = propose_all(chain_keys, current, *real)
        proposals = freeze(jnp.where(i == 0, current, moved))
        evaluation, values = evaluate(proposals)  # [B, K]
        counted = (i * size + jnp.arange(size) < budget)[None, :]
        values = jnp.where(counted, values, jnp.inf)

        t = initial_temperature * jnp.exp(
            log_ratio * jnp.clip(i - 1, 0, span).astype(jnp.float32) / span)
        u = jax.vmap(lambda k: jax.random.uniform(k, (size,), jnp.float32))(k_accept)
        finite_new, finite_cur = jnp.isfinite(values), jnp.isfinite(value)
        delta = jnp.where(finite_new & finite_cur, values - value, 0.0)
        scale = t * jnp.where(finite_cur, jnp.abs(value), 0.0) + tiny
        metropolis = u < jnp.exp(-delta / scale)
        accept = counted & finite_new & (~finite_cur | (delta <= 0) | metropolis)
        accept = accept | (i == 0)
        current = jnp.where(accept[..., None], proposals, current)
        value = jnp.where(accept, values, value)
        best = track_best(best, values, proposals, evaluation, force=i == 0)
        return (current, value, best), None

    carry = (freeze(initial), jnp.full((batch, size), jnp.inf, jnp.float32),
             no_best(evaluate, batch, length))
    xs = (jnp.arange(steps, dtype=jnp.int32), jnp.swapaxes(step_keys, 0, 1))
    (_, _, best), _ = jax.lax.scan(step, carry, xs)
    return SearchResult(best.value, best.keys, best.evaluation,
                        jnp.full(batch, budget, jnp.int32))
