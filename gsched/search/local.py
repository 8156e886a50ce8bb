"""Local search with random restarts (REGAL §4.2's "Local Search" baseline) on the cost model.

REGAL: *"Start with a random solution and greedily improve it by applying the best one-step
look-ahead local move at each step. [...] A local move either changes the device assignment of
the op, or changes the op order in the current schedule."* Random restarts, same evaluation
budget as every other method. Here it works directly on the random-key chromosome of SPEC §2
(``N·D`` affinities, ``N`` op priorities, ``T·D`` transfer priorities), so its result is a
chromosome like every other optimizer's and :func:`run_batch` is a drop-in replacement for
:func:`gsched.search.random.run_batch` (same arguments, same :class:`SearchResult`).

**Start / restart.** A uniform random chromosome: its placement is uniform over devices and its
decoded schedule a random topological order (the paper's "topological sort order of the ops,
[...] placement selects devices uniformly randomly"). Transfer priorities stay as drawn; no
move changes them. Given ``seeds [S, L]`` (or ``[B, S, L]``; ``--seed-from``), the first step
evaluates every seed (slots ``0 … S − 1``, ``S ≤ K``; its other slots are neighbours of the
first seed) and starts from the best of them; later restarts are random. So the search starts
from the best known solution and is never worse than it.

**Moves** (only real ops, ``graphs.op_mask``; genes of padded ops/tensors are never touched):

* *device move* ``(j, d)``: op ``j`` goes to device ``d ≠`` its current one; its affinity row is
  rewritten as ``one_hot(d)`` (the decoder only takes the row's argmax, and the keys stay in
  ``[0, 1]``);
* *order move* ``(j, k, ±)``: op ``j`` is re-inserted into the priority ranking of the real ops
  directly above (``+``) or below (``−``) another real op ``k``: its priority becomes the
  midpoint between ``k``'s priority and that of ``k``'s neighbour on that side in the ranking
  without ``j`` (``1`` above the highest, ``0`` below the lowest). So ``j`` now wins every
  ready-set tie-break against the ops ranked from ``k`` downwards (``+``) and loses against the
  others, i.e. it moves in the schedule as far as the dependencies allow. (Repeated insertions
  into one gap halve it each time; after ~24 nested insertions the float32 midpoint equals an
  endpoint and the decoder's exact-tie rule — smaller op index first — decides. Restarts draw
  fresh priorities.)

With ``D = 1`` only order moves exist; otherwise a move is a device move with probability
``device_move_prob`` (default 1/2), with ``j``, ``k``, ``d`` and the side uniform. Only the
parts ``genes`` searches are moved (:func:`~gsched.search.common.move_kinds`): with
``genes="placement"`` every move is a device move, and fusion keys flip only with
``genes="all"``; with ``D = 1`` and ``genes="placement"`` nothing is searched
(:class:`ValueError`).

**Sampled best-improvement.** The full one-step neighbourhood has ``N·(D − 1)`` device moves
and ``N·(N − 1)`` order insertions (about 10⁴ for a 100-op graph, twice the whole 5000
evaluation budget of REGAL's comparison), so each step instead draws ``neighbours`` random
moves (with replacement; default 64) of the current chromosome, evaluates them all with ONE
:func:`gsched.costmodel.evaluate.evaluate_batch` call over ``[B, neighbours]`` and moves to the best
one if it is strictly better than the current value — the best one-step look-ahead restricted
to the sampled neighbourhood. When ``patience`` consecutive steps (default 1) bring no
improvement, the current chromosome is taken as a local optimum and the next step restarts
from a fresh random chromosome. A restart step evaluates the new start in slot 0 and
``neighbours − 1`` of its neighbours in the other slots, so a restart costs one evaluation and
every step exactly ``neighbours``.

**Budget** (as in :mod:`gsched.search.random` and :mod:`gsched.search.brkga`): every evaluation
counts, starts included. Step ``s`` evaluates slots ``s·K … s·K + K − 1`` with
``K = min(neighbours, budget)``; ``ceil(budget / K)`` steps run and the surplus of the last
step gets value ``+inf`` (never accepted, never best). ``evals_used == budget``; ``budget ≤ 0``
raises :class:`ValueError`. Slot 0 of every step is always counted, so a restart's start always
has a real value. NaN values count as ``+inf``.

**Determinism and batching.** Graph ``b`` uses ``jax.random.split(key, B)[b]`` and step ``s``
that key's ``s``-th split, so a result depends only on its key and graph (up to the cost
model's float32 rounding between batch shapes), not on the rest of the batch. The whole
search is one jitted ``lax.scan`` over steps; ``budget``, ``cost_params`` and
``device_move_prob`` are dynamic, only the number of steps and ``K`` are static.

``best_evaluation`` is the evaluation from the step that found ``best_keys`` (no extra
cost-model call, so only one cost-model instance is compiled).
"""

from __future__ import annotations

from typing import NamedTuple

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
    check_genes,
    check_seeds,
    freeze_genes,
    move_kinds,
    no_best,
    scored_batch,
    track_best,
)

__all__ = ["LocalSearchStats", "run_batch", "run_batch_with_stats", "neighbours_of"]


class LocalSearchStats(NamedTuple):
    """Per graph ``[B]`` diagnostics of one run."""

    restarts: jnp.ndarray  # int32 starts, the first included (random or a seed)
    moves: jnp.ndarray  # int32 accepted (strictly improving) moves
    steps: jnp.ndarray  # int32 steps run (each ``K`` evaluations, the last maybe truncated)


def neighbours_of(key: jax.Array, keys: jnp.ndarray, op_mask: jnp.ndarray, num_devices: int,
                  count: int, device_move_prob=0.5, fusion: bool = False) -> jnp.ndarray:
    """``count`` random one-move neighbours ``[count, L]`` of one chromosome ``keys [L]``.

    See the module docstring for the move set; with ``fusion`` (``N`` fusion keys at the end)
    a third of the moves instead flip one op's fusion key across 0.5 (``k → 1 − k``); without
    it, keys after the transfer priorities are left as they are. Pure and jittable (``vmap``
    it for a batch).
    """
    n = op_mask.shape[0]
    nd = n * num_devices
    affinity = keys[:nd].reshape(n, num_devices)
    priority = keys[nd: nd + n]
    k_type, k_op, k_other, k_dev, k_side = jax.random.split(key, 5)

    # Real ops, in index order, then padding: op = real[uniform index < num_real].
    real = jnp.argsort(~op_mask, stable=True).astype(jnp.int32)
    num_real = jnp.sum(op_mask).astype(jnp.int32)
    pos_j = jax.random.randint(k_op, (count,), 0, jnp.maximum(num_real, 1))
    j = real[pos_j]
    # k ≠ j among the real ops (k == j only when there is a single real op: then a no-op).
    shift = jax.random.randint(k_other, (count,), 0, jnp.maximum(num_real - 1, 1))
    k = real[(pos_j + 1 + shift) % jnp.maximum(num_real, 1)]

    # Order move: midpoint between k and k's neighbour (on the chosen side) in the ranking of
    # the real ops' priorities without j.
    ranked = jnp.where(op_mask, priority, jnp.inf)
    by_rank = jnp.argsort(ranked, stable=True).astype(jnp.int32)  # ascending
    sorted_priority = ranked[by_rank]
    rank = jnp.zeros(n, jnp.int32).at[by_rank].set(jnp.arange(n, dtype=jnp.int32))
    up = jax.random.bernoulli(k_side, 0.5, (count,))
    step = jnp.where(up, 1, -1)
    r = rank[k] + step
    r = jnp.where(by_rank[jnp.clip(r, 0, n - 1)] == j, r + step, r)  # skip j itself
    inside = (r >= 0) & (r < n)
    other = sorted_priority[jnp.clip(r, 0, n - 1)]
    other = jnp.where(inside & jnp.isfinite(other), other, jnp.where(up, 1.0, 0.0))
    new_priority = jnp.where(k == j, priority[j], 0.5 * (priority[k] + other))

    # Device move: j to one of the other devices, uniformly.
    if num_devices > 1:
        device_move = jax.random.bernoulli(k_type, device_move_prob, (count,))
        current = jnp.argmax(affinity[j], axis=1)
        offset = jax.random.randint(k_dev, (count,), 1, num_devices)
        target = (current + offset) % num_devices
        row = jnp.where(device_move[:, None],
                        jax.nn.one_hot(target, num_devices, dtype=keys.dtype), affinity[j])
        new_priority = jnp.where(device_move, priority[j], new_priority)
    else:
        row = affinity[j]

    slots = jnp.arange(count)
    if fusion:  # a fusion move leaves j's device and priority alone
        fuse_move = jax.random.bernoulli(jax.random.fold_in(key, 1), 1 / 3, (count,))
        row = jnp.where(fuse_move[:, None], affinity[j], row)
        new_priority = jnp.where(fuse_move, priority[j], new_priority)
    new_affinity = jnp.broadcast_to(affinity, (count, n, num_devices)).at[slots, j].set(row)
    new_order = jnp.broadcast_to(priority, (count, n)).at[slots, j].set(new_priority)
    rest = jnp.broadcast_to(keys[nd + n:], (count, keys.shape[0] - nd - n))
    out = jnp.concatenate([new_affinity.reshape(count, nd), new_order, rest], axis=1)
    if fusion:
        fuse = keys.shape[0] - n + j
        out = out.at[slots, fuse].set(jnp.where(fuse_move, 1.0 - keys[fuse], keys[fuse]))
    return out


def _search(key, graphs: PaddedGraph, cost_params: CostParams, budget, device_move_prob, seeds,
            *, num_devices: int, objective: str, size: int, steps: int, patience: int,
            scheduler: str, fusion: bool, genes: str):
    b = graphs.op_mask.shape[0]
    length = graphs.bucket.chromosome_length(num_devices, fusion)
    kinds = move_kinds(num_devices, fusion, genes)
    if "priority" not in kinds:  # placement only: no order move
        device_move_prob = jnp.ones_like(device_move_prob)
    graphs, cost_params = jax.tree.map(jnp.asarray, (graphs, cost_params))
    budget = jnp.asarray(budget, jnp.int32)
    step_keys = jax.vmap(lambda k: jax.random.split(k, steps))(jax.random.split(key, b))
    batch = jnp.arange(b)
    slot = jnp.arange(size)
    seeds = None if seeds is None else batch_seeds(seeds, b)

    def freeze(x):
        return freeze_genes(x, graphs.bucket, num_devices, fusion, genes)

    def evaluate(x):
        return scored_batch(graphs, x, cost_params, num_devices=num_devices,
                            objective=objective, scheduler=scheduler, fusion=fusion)

    def propose(k, current, restart, op_mask, own_seeds, first):
        k_start, k_moves = jax.random.split(k)
        start = jax.random.uniform(k_start, (length,), jnp.float32)
        if own_seeds is not None:  # the first start: the first seed's neighbourhood
            start = jnp.where(first, own_seeds[0], start)
        base = freeze(jnp.where(restart, start, current))
        moves = freeze(neighbours_of(k_moves, base, op_mask, num_devices, size,
                                     device_move_prob, "fusion" in kinds))
        # A restart spends slot 0 on evaluating the new start itself, the first step with
        # seeds slots 0 … S − 1 on the seeds.
        moves = moves.at[0].set(jnp.where(restart, base, moves[0]))
        if own_seeds is not None:
            count = own_seeds.shape[0]
            moves = moves.at[:count].set(jnp.where(first, freeze(own_seeds), moves[:count]))
        return base, moves

    starts = 1 if seeds is None else seeds.shape[1]  # start slots of the first step

    def step(carry, xs):
        current, value, fails, restart, best, restarts, moves_made = carry
        i, keys_i = xs
        base, candidates = jax.vmap(propose, in_axes=(0, 0, 0, 0, 0, None))(
            keys_i, current, restart, graphs.op_mask, seeds, i == 0)
        evaluation, values = evaluate(candidates)  # [B, K]
        values = jnp.where((i * size + slot < budget)[None, :], values, jnp.inf)

        # A restart starts from the best of its start slots (slot 0; the seeds at step 0).
        start_slot = restart[:, None] & (slot < jnp.where(i == 0, starts, 1))[None, :]
        start_values = jnp.where(start_slot, values, jnp.inf)
        chosen = jnp.argmin(start_values, axis=1)
        base = jnp.where(restart[:, None], candidates[batch, chosen], base)
        base_value = jnp.where(restart, start_values[batch, chosen], value)
        neighbour_values = jnp.where(start_slot, jnp.inf, values)
        pick = jnp.argmin(neighbour_values, axis=1)
        pick_value = neighbour_values[batch, pick]
        improve = pick_value < base_value
        current = jnp.where(improve[:, None], candidates[batch, pick], base)
        value = jnp.where(improve, pick_value, base_value)
        # A step fails when no neighbour of its base improves on it; at the first step with
        # seeds the neighbours are the first seed's, so a better other seed has not failed.
        tried = ~restart | (chosen == 0)
        fails = jnp.where(improve, 0, jnp.where(restart, 0, fails) + tried)

        # i == 0: slot 0 is always counted.
        best = track_best(best, values, candidates, evaluation, force=i == 0)
        return (current, value, fails, fails >= patience, best, restarts + restart,
                moves_made + improve), None

    zeros = jnp.zeros(b, jnp.int32)
    carry = (jnp.zeros((b, length), jnp.float32), jnp.full(b, jnp.inf, jnp.float32), zeros,
             jnp.ones(b, bool), no_best(evaluate, b, length), zeros, zeros)
    xs = (jnp.arange(steps, dtype=jnp.int32), jnp.swapaxes(step_keys, 0, 1))
    carry, _ = jax.lax.scan(step, carry, xs)
    _, _, _, _, best, restarts, moves_made = carry
    result = SearchResult(best.value, best.keys, best.evaluation, jnp.full(b, budget, jnp.int32))
    return result, LocalSearchStats(restarts, moves_made, jnp.full(b, steps, jnp.int32))


_search_jit = jax.jit(_search, static_argnames=("num_devices", "objective", "size", "steps",
                                                 "patience", "scheduler", "fusion", "genes"))



def run_batch_with_stats(key: jax.Array, graphs: PaddedGraph, *, num_devices: int, budget: int,
                         objective: str = "peak_memory",
                         cost_params: CostParams = CostParams(), neighbours: int = 64,
                         patience: int = 1, device_move_prob: float = 0.5,
                         scheduler: str = "list", fusion: bool = False, genes: str = "all",
                         seeds: jnp.ndarray | None = None
                         ) -> tuple[SearchResult, LocalSearchStats]:
    """:func:`run_batch` plus per-graph :class:`LocalSearchStats` (restarts, accepted moves)."""
    if not isinstance(graphs, PaddedGraph) or np.ndim(graphs.op_mask) != 2:
        raise ValueError("run_batch expects a PaddedGraph with a leading [B] axis "
                         "(gsched.batch_graphs)")
    check_search_settings(budget, num_devices, objective)
    scheduler, fusion, genes = check_scheduler(scheduler), check_fusion(fusion), check_genes(genes)
    move_kinds(num_devices, fusion, genes)  # something to search
    if not is_int(neighbours) or neighbours < 1:
        raise ValueError(f"neighbours must be an int >= 1, got {neighbours!r}")
    if not is_int(patience) or patience < 1:
        raise ValueError(f"patience must be an int >= 1, got {patience!r}")
    if isinstance(device_move_prob, (int, float)) and not 0.0 <= device_move_prob <= 1.0:
        raise ValueError(f"device_move_prob must be in [0, 1], got {device_move_prob!r}")
    size = min(int(neighbours), int(budget))
    steps = -(-int(budget) // size)
    check_seeds(seeds, graphs.bucket.chromosome_length(num_devices, fusion),
                np.shape(graphs.op_mask)[0], size,
                "all evaluated at the first step: min(neighbours, budget)")
    cost_params = CostParams(*(jnp.asarray(x, jnp.float32) for x in cost_params))
    return _search_jit(key, graphs, cost_params, np.int32(budget),
                       jnp.asarray(device_move_prob, jnp.float32), seeds,
                       num_devices=int(num_devices),
                       objective=objective, size=size, steps=steps, patience=int(patience),
                       scheduler=scheduler, fusion=fusion, genes=genes)


def run_batch(key: jax.Array, graphs: PaddedGraph, *, num_devices: int, budget: int,
              objective: str = "peak_memory", cost_params: CostParams = CostParams(),
              neighbours: int = 64, patience: int = 1,
              device_move_prob: float = 0.5, scheduler: str = "list", fusion: bool = False,
              genes: str = "all", seeds: jnp.ndarray | None = None) -> SearchResult:
    """Local search with random restarts on graphs with a leading ``[B]`` axis.

    Args:
      key: PRNG key; the result is a deterministic function of it and the inputs.
      graphs: a :class:`~gsched.core.padding.PaddedGraph` batch (:func:`gsched.batch_graphs`).
      num_devices: ``D``.
      budget: cost-model evaluations per graph, ``> 0``; exactly this many are counted.
      objective: ``"peak_memory"`` or ``"runtime"``, minimized via
        :func:`gsched.costmodel.evaluate.score`.
      cost_params: latency / bandwidth / capacity.
      neighbours: ``K``, random moves sampled and evaluated per step (one batched call).
      patience: consecutive non-improving steps before a random restart.
      device_move_prob: probability that a sampled move is a device move (``D > 1``).
      scheduler, fusion: the cost model's static settings; with ``fusion`` chromosomes carry
        fusion keys and a third of the moves flip one.
      genes: the chromosome parts searched (:func:`gsched.search.common.freeze_genes`).
      seeds: ``[S, L]`` or ``[B, S, L]`` known chromosomes (padded layout), evaluated at the
        first step; the search starts from the best (``S ≤ min(neighbours, budget)``).

    Returns a :class:`gsched.search.SearchResult` (leading ``[B]``), as
    :func:`gsched.search.random.run_batch` does. See the module docstring.
    """
    return run_batch_with_stats(key, graphs, num_devices=num_devices, budget=budget,
                                objective=objective, cost_params=cost_params,
                                neighbours=neighbours, patience=patience,
                                device_move_prob=device_move_prob, scheduler=scheduler,
                                fusion=fusion, genes=genes, seeds=seeds)[0]
