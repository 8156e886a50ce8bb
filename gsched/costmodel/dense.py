"""The dense ready-set list schedule for one device (``D = 1``, ``scheduler="list"``).

With one device there are no transfers: the items are the ``N`` ops and SPEC §2's schedule is
"repeatedly take the ready op with the largest priority (ties: smaller index; program inputs
first)". On a CPU, for buckets up to :data:`DENSE_MAX_OPS` ops, this module computes it with a
few wide, vectorized kernels per step instead of the ready tree and CSR walk of
:mod:`gsched.costmodel.schedule`, whose ~30 tiny gathers and scatters per step cost more on a
CPU than the ``O(N)`` work per step done here (``O(N²)`` per evaluation). Results are bit-identical
to the loop's (same ranks, same order, same runtime and bound; ``tests/test_dense_schedule.py``).
With ``D ≥ 2`` devices, :mod:`gsched.costmodel.dense_multi` does the same with this module's
blocks and bit rows.

Per chromosome, every op ``j`` has one int32 *word*

* ``(unscheduled predecessor ops << k) | rank(j)`` for a real op (``k`` = bits of a rank,
  ``rank_items``' order: program inputs first, then priority descending, then index), so the
  ready op with the best rank is the minimum word (ready words are ``< 2**k``, every other real
  word ``≥ 2**k``);
* ``2**(2k) + rank`` for padding (and, with fusion, for ops merged into another's kernel):
  above every real word, so padding is taken only after every real op, and dropped;
* ``2**30 + step`` once scheduled: never the minimum again, and the step it ran at.

A step takes the minimum word, maps its rank to the op (``item_at_rank``), and subtracts the
op's *successor row* (``1 << k`` at each distinct consumer op) and sets the op's own word. Rows
are bit sets (``[N, ⌈N/32⌉]`` int32 per graph, one bit per distinct (producer, consumer) pair,
built once per graph — per chromosome with fusion, whose contracted graph differs), so fetching
one is a gather of ``N/32`` words, and expanding it to ``[N]`` is shifts and masks that fuse
with the subtraction. Chromosomes are processed in blocks of :data:`BLOCK`, laid out
``[N, BLOCK]`` (chromosomes in the minor dimension): the minimum is a reduction along the major
axis, which XLA:CPU vectorizes across the block, and one block's words stay in the core's cache
(blocks of 8 or 16 ran 2.5× slower per chromosome — not vectorized —, 64 crossed the thread
threshold below). Above :data:`PANEL` ops the words are split into panels of that many ops (and
the bit rows into the matching columns), each its own array: XLA:CPU splits a kernel that
touches more than ~256 KiB over its threads, and on a 2-core CPU that hand-off, paid at every
step, cost more than it shared (1.6× slower at 2,048 ops).

The step count is the largest number of real ops in the block. The runtime is the exact
fixed-point sum of the op durations (with one device every op starts when the previous one
ends, so the loop's makespan is that sum), and the peak memory is
:func:`gsched.costmodel.memory.single_device_peak_memory` of the op steps, which equals
:func:`~gsched.costmodel.memory.peak_memory` of the whole schedule bit for bit.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams
from gsched.costmodel.schedule import (
    TIME_LO_BITS,
    Placement,
    Schedule,
    fixed_durations,
    rank_items,
    split_keys,
)

DENSE_MAX_OPS = 2048  # largest op bucket decoded densely with one device (docs/benchmarks.md)
DENSE_MULTI_MAX_OPS = 1024  # ... with D ≥ 2 (gsched.costmodel.dense_multi; docs/benchmarks.md)
DENSE_MAX_ITEMS = 1 << 14  # ops + transfer slots N + T·(D−1) the D ≥ 2 words can rank
DENSE_MAX_DEVICES = 31  # devices a D ≥ 2 row can name (5 bits)
BLOCK = 32  # chromosomes per block (the minor dimension of the loop state)
PANEL = 1024  # ops per panel of the loop state
_SCHEDULED = 1 << 30  # added to a word when its op is scheduled


def dense_applies(num_ops: int, num_devices: int, scheduler: str = "list",
                  backend: str | None = None, num_tensors: int = 0) -> bool:
    """Whether the cost model decodes densely: the list scheduler on a CPU (``backend``, default
    JAX's default backend), an op bucket of at most :data:`DENSE_MAX_OPS` ops with one device
    (this module) or :data:`DENSE_MULTI_MAX_OPS` with ``D ≥ 2``
    (:mod:`gsched.costmodel.dense_multi`, which also needs ``N + T·(D−1) ≤``
    :data:`DENSE_MAX_ITEMS`, ``T`` = ``num_tensors``, and ``D ≤`` :data:`DENSE_MAX_DEVICES`).
    A static choice: one compile per bucket. Accelerators keep the loop, which runs all
    chromosomes in parallel where these blocks would run one after the other (not measured
    there yet)."""
    backend = backend or jax.default_backend()
    if num_devices > 1 and (num_devices > DENSE_MAX_DEVICES or num_ops + num_tensors * (
            num_devices - 1) > DENSE_MAX_ITEMS):
        return False
    limit = DENSE_MAX_OPS if num_devices == 1 else DENSE_MULTI_MAX_OPS
    return backend == "cpu" and scheduler == "list" and num_ops <= limit


def rank_bits(num_ops: int) -> int:
    """``k``: the bits of a rank (and of a predecessor count) in a word."""
    return max(1, (num_ops - 1).bit_length())


def successor_bits(graph: PaddedGraph) -> jnp.ndarray:
    """``[N, ⌈N/32⌉]`` int32 bit sets: bit ``c % 32`` of word ``c // 32`` of row ``p`` is set
    when op ``c`` consumes an output of op ``p`` (one distinct pair of the padded graph's
    ``pair_*`` lists; padding rows are empty). One graph, no batch axis."""
    n = graph.op_mask.shape[0]
    return bit_rows(graph.pair_mask, graph.pair_producer, graph.pair_consumer, n, n)


def bit_rows(mask, row, column, num_rows: int, num_columns: int) -> jnp.ndarray:
    """``[num_rows, ⌈num_columns/32⌉]`` int32 bit sets: bit ``c % 32`` of word ``c // 32`` of
    row ``r`` is set for every listed ``(row[i], column[i])`` where ``mask[i]`` (the pairs
    must be distinct)."""
    words = -(-num_columns // 32)
    bit = jnp.left_shift(jnp.int32(1), column & 31)  # bit 31 wraps to the sign bit
    row = jnp.where(mask, row, num_rows)  # masked pairs: a dropped row
    # Pairs are distinct, so adding their bits sets them (int32 addition wraps).
    table = jnp.zeros((num_rows + 1, words), jnp.int32).at[row, jnp.right_shift(column, 5)].add(
        jnp.where(mask, bit, 0))
    return table[:num_rows]


def in_blocks(x: jnp.ndarray, fill, block: int) -> jnp.ndarray:
    """``x [B, ...]`` → ``[⌈B/block⌉, block, ...]``, the last block completed with ``fill``
    (broadcast to one chromosome's shape)."""
    pad = -x.shape[0] % block
    x = jnp.concatenate([x, jnp.broadcast_to(jnp.asarray(fill, x.dtype), (pad,) + x.shape[1:])])
    return x.reshape((-1, block) + x.shape[1:])


def expand_bits(rows: jnp.ndarray, size: int) -> jnp.ndarray:
    """Bit sets ``rows [W, block]`` (int32 words) → ``[size, block]`` int32 0/1, bit ``c % 32``
    of word ``c // 32`` at row ``c`` (``size ≤ 32·W``)."""
    shift = jnp.arange(32, dtype=jnp.int32)[None, :, None]
    return (jnp.right_shift(rows[:, None, :], shift) & 1).reshape(-1, rows.shape[-1])[:size]


def initial_words(graph: PaddedGraph, keys: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """One chromosome's ``(words [N], item_at_rank [N])`` (see the module docstring); ``keys``
    is the SPEC §2 part of the padded chromosome with ``D = 1``."""
    n = graph.op_mask.shape[0]
    k = rank_bits(n)
    _, priority, _ = split_keys(keys, n, 1)
    rank, item_at_rank = rank_items(priority, graph.op_is_input & graph.op_mask)
    indegree = jnp.zeros(n, jnp.int32).at[graph.pair_consumer].add(
        graph.pair_mask.astype(jnp.int32))
    words = jnp.where(graph.op_mask, jnp.left_shift(indegree, k) | rank,
                      (1 << (2 * k)) + rank)
    return words, item_at_rank


def dense_order(words: jnp.ndarray, item_at_rank: jnp.ndarray, num_steps: jnp.ndarray, *,
                table: jnp.ndarray | None = None, row_base: jnp.ndarray | None = None,
                pairs: tuple[jnp.ndarray, ...] | None = None
                ) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The list schedules of a flat batch of ``B`` chromosomes: ``(position [B, N], order [B,
    N])``, the step of each op (−1 for padding) and the op taken at each step (−1 after the
    last, ``num_steps[b]``). (A chromosome with fewer real ops than another of its block goes
    on with its padding, which is dropped.)

    ``words``, ``item_at_rank``: ``[B, N]`` (:func:`initial_words`); ``num_steps [B]``: real
    ops. Successor rows come either from ``table [R, ⌈N/32⌉]`` (:func:`successor_bits` of every
    graph involved, stacked; chromosome ``b``'s op ``j`` has row ``row_base[b] + j``) or, when
    every chromosome has its own graph (fusion), from ``pairs``: its ``(pair_mask,
    pair_producer, pair_consumer)``, each ``[B, E]``, turned into bit rows one block at a time.

    A scheduled op's word becomes ``2**30 + step``, so the loop writes nothing else.
    """
    batch, n = words.shape
    if n > 1 << 14:
        raise ValueError(f"the dense schedule packs ranks in 14 bits; {n} ops is too many")
    if (table is None) == (pairs is None):
        raise ValueError("give either a shared table (with row_base) or per-chromosome pairs")
    if batch == 0:
        return jnp.zeros((0, n), jnp.int32), jnp.zeros((0, n), jnp.int32)
    k = rank_bits(n)
    block = min(BLOCK, batch)

    # Filler chromosomes (to a whole block): every op padding, no step; dropped.
    xs = [in_blocks(words, (1 << (2 * k)) + jnp.arange(n, dtype=jnp.int32), block),
          in_blocks(item_at_rank, jnp.arange(n, dtype=jnp.int32), block),
          in_blocks(num_steps, 0, block)]
    if pairs is None:
        xs.append(in_blocks(row_base, 0, block))
    else:
        xs.append(tuple(in_blocks(x, 0, block) for x in pairs))  # mask 0: no pairs
    blocks = xs[0].shape[0]
    lane_base = jnp.arange(block, dtype=jnp.int32) * n

    # The ops in panels of at most PANEL (a multiple of 32): each panel's words, and the words
    # of the bit rows that cover it, are separate arrays, so that no kernel of the loop touches
    # more than XLA:CPU splits over threads (its per-step thread hand-off costs more than the
    # work it shares; see the module docstring).
    panels = [(lo, min(n, lo + PANEL)) for lo in range(0, n, PANEL)]

    def one_block(x):
        block_words, block_items, steps, rows_from = x
        if pairs is None:
            rows_table, base = table, rows_from
        else:  # this block's own bit rows, [block · N, ⌈N/32⌉]
            rows_table = jax.vmap(lambda m, p, c: bit_rows(m, p, c, n, n))(*rows_from)
            rows_table, base = rows_table.reshape(-1, rows_table.shape[-1]), lane_base
        tables = [rows_table[:, lo // 32: -(-hi // 32)] for lo, hi in panels]
        flat_items = block_items.reshape(-1)

        def step(s, state):  # state: per panel [hi − lo, block]
            best = functools.reduce(jnp.minimum, [jnp.min(part, axis=0) for part in state])
            op = flat_items[lane_base + (best & ((1 << k) - 1))]
            new = []
            for (lo, hi), part, words_table in zip(panels, state, tables):
                rows = words_table[base + op].T  # [words, block] bit sets of the panel's ops
                succ = expand_bits(rows, hi - lo)
                lanes = lax.broadcasted_iota(jnp.int32, part.shape, 0) + lo
                new.append(part - jnp.where(lanes == op[None, :], best - (_SCHEDULED + s),
                                            jnp.left_shift(succ, k)))
            return tuple(new)

        state = block_words.T
        state = lax.fori_loop(0, jnp.max(steps), step, tuple(state[lo:hi] for lo, hi in panels))
        state = jnp.concatenate(state)
        return jnp.where(state >= _SCHEDULED, state - _SCHEDULED, -1).T

    position = lax.map(one_block, tuple(xs)).reshape(blocks * block, n)[:batch]
    position = jnp.where(position < num_steps[:, None], position, -1)  # drop padding
    flat = jnp.where(position >= 0, position + n * jnp.arange(batch)[:, None], batch * n)
    order = jnp.full(batch * n, -1, jnp.int32).at[flat.reshape(-1)].set(
        jnp.tile(jnp.arange(n, dtype=jnp.int32), batch), mode="drop")
    return position, order.reshape(batch, n)


def dense_schedule(graph: PaddedGraph, placement: Placement, params: CostParams,
                   position: jnp.ndarray, order: jnp.ndarray) -> Schedule:
    """One chromosome's :class:`Schedule` from its op steps and order (``[N]`` each,
    :func:`dense_order`), exactly the loop's (``[V]`` items, ``V = N + T``; no transfer is ever
    scheduled)."""
    n = graph.op_mask.shape[0]
    none = jnp.full(graph.tensor_mask.shape[0], -1, jnp.int32)
    duration, unit, runtime_bound = fixed_durations(graph, placement, params, 1)
    runtime = fp.to_float(_exact_sum(duration.hi[:n], duration.lo[:n]), unit, TIME_LO_BITS)
    return Schedule(jnp.concatenate([order, none]), jnp.concatenate([position, none]),
                    jnp.sum(graph.op_mask, dtype=jnp.int32), runtime, runtime_bound)


def _exact_sum(hi: jnp.ndarray, lo: jnp.ndarray) -> fp.Fixed:
    """The normalized fixed-point sum (``TIME_LO_BITS`` low bits) of normalized values, without
    int32 overflow: the low limbs are summed in two 12-bit halves (``N ≤ 2**19`` terms)."""
    half = TIME_LO_BITS // 2
    low = jnp.sum(lo & ((1 << half) - 1), dtype=jnp.int32)
    mid = jnp.sum(jnp.right_shift(lo, half), dtype=jnp.int32) + jnp.right_shift(low, half)
    top = jnp.sum(hi, dtype=jnp.int32) + jnp.right_shift(mid, half)
    return fp.Fixed(top, jnp.left_shift(mid & ((1 << half) - 1), half) | (low & ((1 << half) - 1)))
