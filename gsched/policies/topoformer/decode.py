"""Non-autoregressive decoding of op orders from priorities (NTO §4.2, eq. 8), single device.

Given normalized priorities ``ỹ [N]``, the next op is drawn from the softmax of ``ỹ`` over the
*schedulable* ops (every predecessor scheduled). Decoding runs in ``lax.scan`` over the ``N``
op slots of the bucket and tracks SPEC §3's memory (D = 1) exactly, in the cost model's fixed
point (``gsched.core.fixedpoint``, the same unit and rounding as ``gsched.costmodel.memory``), so every
decoded order comes with the peak memory the cost model gives it (tested for equality):

* usage when op ``j`` runs = live tensors + sizes of ``j``'s outputs + ``temporary_memory(j)``;
* then ``j``'s outputs that have readers become live, and every tensor whose last reader was
  ``j`` is freed (an output without readers counts only toward its own step).

Modes (``K`` rollouts per graph, all batched and jittable):

* ``greedy`` — the most likely op at each step (``K = 1``; ties → smaller op id);
* ``sample`` — ``K`` independent samples (fresh Gumbel noise per step);
* ``beam`` — beam search of width ``K`` on the total log-probability, **with state
  collapsing**: two partial orders that scheduled the same *set* of ops have the same future
  (the non-autoregressive distribution and the live memory both depend on the set only), so
  among candidates reaching one set only the one with the lowest *running peak* survives (ties:
  higher log-probability, then smaller candidate index); then the ``K`` most likely survivors
  are kept. With a width at least the number of distinct sets per step, this is exact
  dynamic programming. Collisions are found exactly and without sorting: the beams' sets are
  distinct (collapsing keeps them so), and two distinct sets ``S_k``, ``S_m`` of equal size
  lead to one common set iff they differ in one op each, ``S_k ∖ S_m = {y}`` and
  ``S_m ∖ S_k = {x}``; then only candidate ``(k, x)`` meets ``(m, y)``. So a ``[K, K]``
  comparison of the beams' sets per step finds every collision.

Steps after the last real op schedule nothing and emit the padded op ids in order, so
``Decoded.order`` is a full ``[N]`` permutation that ``gsched.costmodel.evaluate.order_keys`` accepts.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.memory import MEMORY_LO_BITS, memory_units
from gsched.policies.topoformer.relations import op_adjacency

MODES = ("greedy", "sample", "beam")
_DONE = jnp.iinfo(jnp.int32).max // 2  # pending count of scheduled and padded ops


class Tables(NamedTuple):
    """Per-graph decoding tables (one graph), built once per decode."""

    successors: jnp.ndarray  # [N, N] int32: 1 where op j consumes an output of op i
    reads: jnp.ndarray  # [N, T] int32: 1 where op j reads tensor t
    pending: jnp.ndarray  # [N] int32 distinct predecessors (_DONE for padding)
    readers: jnp.ndarray  # [T] int32 consumer ops per tensor
    size: fp.Fixed  # [T] tensor sizes
    step_usage: fp.Fixed  # [N] outputs + temporary memory of each op
    stays_live: fp.Fixed  # [N] outputs of each op that have readers
    unit: jnp.ndarray  # [] float32 fixed-point unit


class State(NamedTuple):
    """One partial order (no batch axis; beams and samples add a leading ``[K]``)."""

    pending: jnp.ndarray  # [N] int32 unscheduled predecessors (_DONE once scheduled)
    readers_left: jnp.ndarray  # [T] int32
    live: fp.Fixed  # [] resident memory
    peak: fp.Fixed  # [] running peak
    log_prob: jnp.ndarray  # [] float32


class Decoded(NamedTuple):
    """``K`` decoded orders of one graph (a leading ``[B]`` when batched)."""

    order: jnp.ndarray  # [K, N] int32 op ids (padded ops last)
    peak_memory: jnp.ndarray  # [K] float32, equal to the cost model's for that order
    log_prob: jnp.ndarray  # [K] float32 log p(order | graph)
    valid: jnp.ndarray  # [K] bool: a complete order (beam search may find fewer than K)


def _fixed_sum(x: fp.Fixed, weights: jnp.ndarray, axis: int = -1) -> fp.Fixed:
    """``Σ weights · x`` along ``axis`` for 0/1 int32 ``weights`` (limb sums fit in int32)."""
    return fp.normalize(fp.Fixed((x.hi * weights).sum(axis), (x.lo * weights).sum(axis)),
                        MEMORY_LO_BITS)


def _sub(a: fp.Fixed, b: fp.Fixed) -> fp.Fixed:
    return fp.normalize(fp.Fixed(a.hi - b.hi, a.lo - b.lo), MEMORY_LO_BITS)


def build_tables(graph: PaddedGraph) -> Tables:
    """Dense per-graph tables (``O(N² + N·T)`` memory) for ``O(N + T)`` work per step."""
    n, t = graph.op_mask.shape[-1], graph.tensor_mask.shape[-1]
    successors = op_adjacency(graph).astype(jnp.int32)
    reads = (jnp.zeros((n, t), jnp.int32)
             .at[graph.edge_consumer, graph.edge_tensor].max(graph.edge_mask.astype(jnp.int32)))
    readers = reads.sum(axis=0)
    unit, size, temp = memory_units(graph)  # the cost model's: both round every size alike
    produced = ((graph.tensor_producer[None, :] == jnp.arange(n)[:, None])
                & graph.tensor_mask[None, :]).astype(jnp.int32)  # [N, T]
    outputs = _fixed_sum(fp.Fixed(size.hi[None], size.lo[None]), produced)
    step_usage = fp.add(outputs, temp, MEMORY_LO_BITS)
    stays_live = _fixed_sum(fp.Fixed(size.hi[None], size.lo[None]),
                            produced * (readers[None, :] > 0))
    pending = jnp.where(graph.op_mask, successors.sum(axis=0), _DONE)
    return Tables(successors, reads, pending, readers, size, step_usage, stays_live, unit)


def initial_state(tables: Tables) -> State:
    zero = fp.Fixed(jnp.int32(0), jnp.int32(0))
    return State(tables.pending, tables.readers, zero, zero, jnp.float32(0.0))


def _usage(tables: Tables, state: State) -> fp.Fixed:
    """``[N]`` memory usage if each op ran next."""
    live = fp.Fixed(jnp.broadcast_to(state.live.hi, tables.step_usage.hi.shape),
                    jnp.broadcast_to(state.live.lo, tables.step_usage.lo.shape))
    return fp.add(live, tables.step_usage, MEMORY_LO_BITS)


def schedule_op(tables: Tables, state: State, op: jnp.ndarray,
                step_log_prob: jnp.ndarray) -> State:
    """The state after running ``op`` (schedulable in ``state``) next."""
    usage = fp.add(state.live, fp.Fixed(tables.step_usage.hi[op], tables.step_usage.lo[op]),
                   MEMORY_LO_BITS)
    readers_left = state.readers_left - tables.reads[op]
    freed = tables.reads[op] * (readers_left == 0)
    live = fp.add(state.live, fp.Fixed(tables.stays_live.hi[op], tables.stays_live.lo[op]),
                  MEMORY_LO_BITS)
    live = _sub(live, _fixed_sum(tables.size, freed))
    pending = (state.pending - tables.successors[op]).at[op].set(_DONE)
    return State(pending, readers_left, live, fp.maximum(state.peak, usage),
                 state.log_prob + step_log_prob)


def _log_softmax(priorities: jnp.ndarray, allowed: jnp.ndarray) -> jnp.ndarray:
    """Log-softmax of ``priorities`` over ``allowed`` (last axis); ``-inf`` elsewhere."""
    top = jnp.max(jnp.where(allowed, priorities, -jnp.inf), axis=-1, keepdims=True)
    shifted = jnp.where(allowed, priorities - jnp.where(jnp.isfinite(top), top, 0.0), -jnp.inf)
    total = jnp.sum(jnp.exp(shifted), axis=-1, keepdims=True)  # exp(-inf) = 0, no NaN grads
    return jnp.where(allowed, shifted - jnp.log(jnp.maximum(total, 1.0)), -jnp.inf)


def _select(cond, new, old):
    return jax.tree.map(lambda a, b: jnp.where(cond, a, b), new, old)


def _rollout(tables: Tables, priorities: jnp.ndarray, key: jax.Array,
             sample: bool) -> tuple[jnp.ndarray, State]:
    """One greedy (``sample=False``) or sampled order: ``([N] op ids, final state)``."""
    n = priorities.shape[0]

    def step(state, inputs):
        slot, step_key = inputs
        allowed = state.pending == 0
        log_p = _log_softmax(priorities, allowed)
        noise = jax.random.gumbel(step_key, (n,)) if sample else 0.0
        op = jnp.argmax(jnp.where(allowed, priorities + noise, -jnp.inf))
        any_allowed = jnp.any(allowed)
        state = _select(any_allowed, schedule_op(tables, state, op, log_p[op]), state)
        return state, jnp.where(any_allowed, op, slot).astype(jnp.int32)

    steps = (jnp.arange(n, dtype=jnp.int32), jax.random.split(key, n))
    state, order = jax.lax.scan(step, initial_state(tables), steps)
    return order, state


def _lex_less(a: tuple, b: tuple) -> jnp.ndarray:
    """Elementwise lexicographic ``a < b`` over tuples of arrays."""
    less = jnp.zeros(jnp.shape(a[0]), bool)
    for x, y in reversed(list(zip(a, b))):
        less = (x < y) | ((x == y) & less)
    return less


def _collapse(allowed: jnp.ndarray, done: jnp.ndarray, valid: jnp.ndarray, peak: fp.Fixed,
              score: jnp.ndarray) -> jnp.ndarray:
    """``[K, N]`` bool: the allowed candidates that no candidate reaching the same set beats
    (lower peak, then higher score, then smaller index); ``done [K, N]`` are the beams'
    (distinct) scheduled sets. See the module docstring."""
    k, n = allowed.shape
    ones = done.astype(jnp.float32)
    only = ones @ (1.0 - ones).T  # only[k, m] = |S_k ∖ S_m|
    collide = valid[:, None] & valid[None, :] & (only == 1) & (only.T == 1)
    # add[k, m]: the op beam k adds to reach S_k ∪ S_m (the one in S_m ∖ S_k).
    add = jnp.argmax(done[None, :, :] & ~done[:, None, :], axis=-1)
    beam = jnp.broadcast_to(jnp.arange(k)[:, None], (k, k))

    def key(rows, ops):
        return (peak.hi[rows, ops], peak.lo[rows, ops], -score[rows, ops], rows * n + ops)

    beaten = collide & _lex_less(key(beam.T, add.T), key(beam, add))
    return allowed & ~jnp.zeros((k, n), bool).at[beam, add].max(beaten)


def _beam_search(tables: Tables, priorities: jnp.ndarray, width: int,
                 collapse: bool) -> tuple[jnp.ndarray, State, jnp.ndarray]:
    """Beam search: ``([K, N] orders, final states [K], valid [K])``."""
    n = priorities.shape[0]
    states = jax.tree.map(lambda x: jnp.broadcast_to(x, (width,) + jnp.shape(x)),
                          initial_state(tables))
    valid = jnp.arange(width) == 0

    def step(carry, slot):
        states, valid = carry
        allowed = valid[:, None] & (states.pending == 0)  # [K, N]
        log_p = _log_softmax(priorities[None], allowed)
        score = states.log_prob[:, None] + log_p  # [K, N]
        if collapse:
            usage = jax.vmap(functools.partial(_usage, tables))(states)
            peak = fp.maximum(fp.Fixed(states.peak.hi[:, None], states.peak.lo[:, None]), usage)
            keep = _collapse(allowed, states.pending == _DONE, valid, peak, score)
        else:
            keep = allowed
        keep, score = keep.reshape(-1), score.reshape(-1)
        _, pick = jax.lax.top_k(jnp.where(keep, score, -jnp.inf), width)
        parent, op = pick // n, (pick % n).astype(jnp.int32)
        children = jax.vmap(functools.partial(schedule_op, tables))(
            jax.tree.map(lambda x: x[parent], states), op, log_p.reshape(-1)[pick])
        any_allowed = jnp.any(keep)
        states = _select(any_allowed, children, states)
        valid = jnp.where(any_allowed, keep[pick], valid)
        parent = jnp.where(any_allowed, parent, jnp.arange(width))
        op = jnp.where(any_allowed, op, slot)
        return (states, valid), (parent, op)

    (states, valid), (parents, ops) = jax.lax.scan(step, (states, valid),
                                                   jnp.arange(n, dtype=jnp.int32))

    def backtrack(beam, step_links):
        parent, op = step_links
        return parent[beam], op[beam]

    _, order = jax.lax.scan(backtrack, jnp.arange(width), (parents, ops), reverse=True)
    return order.T, states, valid


def decode(graph: PaddedGraph, priorities: jnp.ndarray, key: jax.Array, *, mode: str,
           width: int = 16, collapse: bool = True) -> Decoded:
    """Decodes one graph's priorities ``[N]`` (padding ignored) into ``K`` orders: ``K = 1``
    for ``greedy``, ``width`` for ``sample`` and ``beam`` (``collapse``: state collapsing)."""
    if mode not in MODES:
        raise ValueError(f"unknown decoding mode {mode!r}; expected one of {MODES}")
    if not isinstance(width, int) or width < 1:
        raise ValueError(f"width must be an int >= 1, got {width!r}")
    tables = build_tables(graph)
    priorities = jnp.where(graph.op_mask, priorities, 0.0)
    if mode == "beam":
        order, states, valid = _beam_search(tables, priorities, width, collapse)
    else:
        rollouts = 1 if mode == "greedy" else width
        order, states = jax.vmap(lambda k: _rollout(tables, priorities, k, mode == "sample"))(
            jax.random.split(key, rollouts))
        valid = jnp.ones(rollouts, bool)
    peak = fp.to_float(states.peak, tables.unit, MEMORY_LO_BITS)
    return Decoded(order, peak, states.log_prob, valid)


@functools.partial(jax.jit, static_argnames=("mode", "width", "collapse"))
def decode_batch(graphs: PaddedGraph, priorities: jnp.ndarray, key: jax.Array, *, mode: str,
                 width: int = 16, collapse: bool = True) -> Decoded:
    """:func:`decode` over graphs with a leading ``[B]`` axis (``priorities [B, N]``)."""
    keys = jax.random.split(key, priorities.shape[0])
    return jax.vmap(functools.partial(decode, mode=mode, width=width, collapse=collapse))(
        graphs, priorities, keys)


def best_index(decoded: Decoded) -> jnp.ndarray:
    """Index (over the last axis) of the valid order with the lowest peak memory (ties:
    higher log-probability, then the first)."""
    peak = jnp.where(decoded.valid, decoded.peak_memory, jnp.inf)
    low = peak == jnp.min(peak, axis=-1, keepdims=True)
    return jnp.argmax(jnp.where(low, decoded.log_prob, -jnp.inf), axis=-1)


def order_log_prob(graph: PaddedGraph, priorities: jnp.ndarray,
                   order: jnp.ndarray) -> jnp.ndarray:
    """``log p(order | graph)`` under eq. 8, differentiable in ``priorities [N]``; ``order
    [N]`` is a topological order of the real ops followed by the padded ones.

    Computed in parallel rather than by replaying the scan: op ``i`` is schedulable at step
    ``s`` iff ``ready(i) ≤ s ≤ position(i)``, where ``ready(i)`` is one past its last
    predecessor's position, so every step's normalizer comes from one ``[N, N]`` mask."""
    n = order.shape[0]
    position = jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32))
    ready = jnp.zeros(n, jnp.int32).at[graph.pair_consumer].max(
        jnp.where(graph.pair_mask, position[graph.pair_producer] + 1, 0))
    steps = jnp.arange(n)[:, None]
    window = graph.op_mask[None, :] & (ready[None, :] <= steps) & (steps <= position[None, :])
    log_p = _log_softmax(jnp.broadcast_to(priorities, (n, n)), window)  # [step, op]
    chosen = log_p[jnp.arange(n), order]
    return jnp.sum(jnp.where(jnp.asarray(graph.op_mask)[order], chosen, 0.0))
