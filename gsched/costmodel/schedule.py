"""Chromosome decoding (SPEC §2) and the priority list schedule with its runtime (SPEC §4).

Items are the ops and the potential transfers of a padded graph: item ``j < N`` is op ``j``;
item ``N + t·D + d`` is the transfer ``X(t, d)``. ``V = N + T·D`` items in all, most of the
transfer slots absent for any one placement.

The schedule is Kahn's algorithm with a priority queue, written so that one evaluation costs
``O((V + E) log V)`` instead of the ``O(V²)`` of "argmax over ready items at every step":

* every item gets a *rank*: its position in the order (priority descending, then item index
  ascending — exactly SPEC's tie rule "ops before transfers, then smaller op index, then
  smaller (tensor, device)"), computed with two passes of a plain int32 sort; the loop state
  is indexed by rank;
* ready ranks are bits of int32 words, and counts of ready ranks above the words form a tree of
  fan-out 32, so the ready item with the largest priority (the lowest ready rank) is found in
  ``log₃₂ V`` small steps, and marking or unmarking a rank is one scatter-add per level;
* when an item finishes, its CSR successor list (:func:`entry_items`, built once per graph
  from the padded graph's ranges) is walked
  ``chunk`` entries per loop iteration: in-degrees drop, newly ready items are marked in the
  tree, and the item's end time is propagated to its successors' ready times.

Times are exact fixed-point values (``gsched.core.fixedpoint``), so the runtime agrees with exact
arithmetic. Everything is written for one chromosome and batched with ``jax.vmap``, except that
the loop body :func:`schedule_step` has its own batching rule: it flattens every batch axis
into one and indexes the flat arrays itself (``batch · rows + row``), which XLA compiles to
far cheaper gathers and scatters than vmap's batched ones.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.batching import flat_batch
from gsched.core.padding import PaddedGraph
from gsched.costmodel.params import CostParams

TIME_LO_BITS = 24
TIME_VALUE_BITS = 49
BYTES_LO_BITS = 12  # kernel bytes (SPEC §8.1), summed like memory (gsched.costmodel.memory)
BYTES_VALUE_BITS = 41
FANOUT_BITS = 5
FANOUT = 1 << FANOUT_BITS  # tree fan-out, and ranks per leaf word (int32)
LOOP_CHUNK = 8  # successor entries per loop iteration by default (the fastest on the CPU,
# docs/benchmarks.md; gsched.costmodel.dynamic's loop uses it too)
_KEY_BITS = 30  # float32 keys in [0, 1] have bit patterns below 2**30


class Placement(NamedTuple):
    """Decoded placement of one chromosome."""

    device: jnp.ndarray  # [N] int32, device of each op (0 for padding)
    transfer_exists: jnp.ndarray  # [T, D] bool, whether X(t, d) is needed


class Schedule(NamedTuple):
    """The priority list schedule of one chromosome."""

    order: jnp.ndarray  # [V] int32 item per step, −1 after the last step
    position: jnp.ndarray  # [V] int32 step of each item, −1 for items never scheduled
    num_steps: jnp.ndarray  # [] int32
    runtime: jnp.ndarray  # [] float32 makespan (SPEC §4)
    runtime_bound: jnp.ndarray  # [] float32, Σ of every item's duration ≥ any runtime


def split_keys(keys: jnp.ndarray, num_ops: int, num_devices: int):
    """``[N·D + N + T·D]`` → affinities ``[N, D]``, op priorities ``[N]``, transfer
    priorities ``[T, D]`` (SPEC §2 layout)."""
    nd = num_ops * num_devices
    affinity = keys[:nd].reshape(num_ops, num_devices)
    return affinity, keys[nd: nd + num_ops], keys[nd + num_ops:].reshape(-1, num_devices)


def key_bits(keys: jnp.ndarray) -> jnp.ndarray:
    """int32 bit patterns of keys in [0, 1] (−0.0 folded into +0.0): ordered exactly like the
    values, subnormal keys included. Compare these, not the floats: XLA:CPU compares floats
    with subnormals flushed to zero (a key of 1e-40 would tie with 0), a GPU does not."""
    return jnp.maximum(lax.bitcast_convert_type(keys.astype(jnp.float32), jnp.int32), 0)


def decode_placement(graph: PaddedGraph, keys: jnp.ndarray, num_devices: int,
                     pinned: jnp.ndarray | None = None) -> Placement:
    """Op → device by largest affinity (first device on ties; ``pinned[j] ≥ 0`` overrides),
    and the transfers it implies: ``X(t, d)`` for every other device ``d`` holding a consumer
    of ``t``."""
    n = graph.op_mask.shape[0]
    affinity, _, _ = split_keys(keys, n, num_devices)
    device = jnp.argmax(key_bits(affinity), axis=1).astype(jnp.int32)
    if pinned is not None:
        device = jnp.where(pinned >= 0, pinned, device)
    device = jnp.where(graph.op_mask, device, 0)
    t = graph.tensor_mask.shape[0]
    consumer_device = device[graph.edge_consumer]
    has_consumer = jnp.zeros((t, num_devices), bool).at[
        graph.edge_tensor, consumer_device].max(graph.edge_mask)
    producer_device = device[graph.tensor_producer]
    other = jnp.arange(num_devices)[None, :] != producer_device[:, None]
    return Placement(device, has_consumer & other & graph.tensor_mask[:, None])


def op_bytes(graph: PaddedGraph) -> jnp.ndarray:
    """``[N]`` float32: the bytes each op moves (SPEC §8.1): the sizes of the distinct tensors
    it reads plus the sizes of the tensors it writes (0 for padding).

    Edges are distinct (tensor, consumer) pairs, so summing over an op's edges counts each
    tensor it reads once. The sums are exact (fixed point in a per-graph unit, as for memory:
    every op's total is ≤ Σ sizes, since an op never reads its own outputs); only the final
    conversion to float32 rounds. Depends on the graph alone, so under ``vmap`` over
    chromosomes it is computed once per graph.
    """
    n = graph.op_mask.shape[0]
    size = jnp.where(graph.tensor_mask, graph.tensor_size, 0.0)
    unit = fp.choose_unit(fp.ordered_sum(size), BYTES_VALUE_BITS)
    size_fp = fp.from_float(size, unit, BYTES_LO_BITS)

    def per_op(limb):
        read = jnp.where(graph.edge_mask, limb[graph.edge_tensor], 0)
        return (jnp.zeros(n, jnp.int32).at[graph.edge_consumer].add(read)
                .at[graph.tensor_producer].add(limb))  # padded tensors: 0

    total = fp.normalize(fp.Fixed(per_op(size_fp.hi), per_op(size_fp.lo)), BYTES_LO_BITS)
    return jnp.where(graph.op_mask, fp.to_float(total, unit, BYTES_LO_BITS), 0.0)


def divide(x: jnp.ndarray, divisor: jnp.ndarray) -> jnp.ndarray:
    """``x / divisor`` (a scalar divisor) rounded as IEEE division, however it is compiled.

    XLA rewrites a division by a broadcast scalar into a multiplication by its reciprocal (up
    to one ulp off), but folds a division of constants exactly: without the barrier the same
    graph scored differently with its parameters closed over by ``jit`` or passed in.
    """
    return x / lax.optimization_barrier(jnp.broadcast_to(divisor, jnp.shape(x)))


def op_durations(graph: PaddedGraph, params: CostParams) -> jnp.ndarray:
    """``[N]`` float32 kernel time of every op (SPEC §8.1): ``max(compute_cost, bytes /
    hbm_bandwidth) + launch_overhead`` (0 for padding). With the defaults (``hbm_bandwidth =
    inf``, ``launch_overhead = 0``) this is exactly ``compute_cost``: ``max(c, 0) + 0 = c``."""
    memory_time = divide(op_bytes(graph), params.hbm_bandwidth)
    kernel = jnp.maximum(graph.compute_cost, memory_time) + params.launch_overhead
    return jnp.where(graph.op_mask, kernel, 0.0)


def item_durations(graph: PaddedGraph, placement: Placement, params: CostParams,
                   num_devices: int) -> jnp.ndarray:
    """``[V]`` float32 duration of every item: ops by :func:`op_durations`, a transfer
    ``X(t, d)`` ``latency + size(t) / bandwidth`` (no roofline term, no launch overhead: a
    copy is not a kernel), 0 for absent transfers and padding."""
    exists = placement.transfer_exists.reshape(-1)  # [T·D]
    xfer_time = jnp.repeat(params.latency + divide(graph.tensor_size, params.bandwidth),
                           num_devices)
    return jnp.concatenate([op_durations(graph, params), jnp.where(exists, xfer_time, 0.0)])


def item_priorities(keys: jnp.ndarray, num_ops: int, num_devices: int) -> jnp.ndarray:
    """``[V]`` priority of every item: op priorities, then transfer priorities row-major."""
    _, op_priority, xfer_priority = split_keys(keys, num_ops, num_devices)
    return jnp.concatenate([op_priority, xfer_priority.reshape(-1)])


def first_items(graph: PaddedGraph, num_devices: int) -> jnp.ndarray:
    """``[V]`` the items every schedule starts with: program inputs (SPEC §1), real ops."""
    return jnp.concatenate([graph.op_is_input & graph.op_mask,
                            jnp.zeros(graph.tensor_mask.shape[0] * num_devices, bool)])


def rank_items(priority: jnp.ndarray,
               first: jnp.ndarray | None = None) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Sorts items by priority descending, ties by item index ascending (SPEC §2); items
    flagged in ``first [V]`` (program inputs, SPEC §1) come before all others, by index.

    Returns ``(rank [V], item_at_rank [V])``. Priorities are keys in [0, 1]: their float32
    bit patterns (:func:`key_bits`) order like the values. The (30-bit key, index) order is
    one sort of packed int64 ``key << b | index`` (``b`` index bits; 64-bit values appear
    only here and in the memory walks): XLA's CPU sort is several times faster on one integer
    operand than with a payload or a comparator, and one int64 sort costs about one int32 sort
    (docs/design.md, "The schedule in O((V + E) log V)").
    """
    v = priority.shape[0]
    bits = key_bits(priority)
    b = max(1, (v - 1).bit_length())
    # Ascending key = descending priority; keys of priorities in [0, 1] are ≤ 0x3F800000, so
    # shifting every key by one frees key 0 for the ``first`` items without reordering others.
    key = jnp.clip(0x3F800000 - bits, 0, (1 << _KEY_BITS) - 2)
    if first is not None:
        key = jnp.where(first, 0, key + 1)
    with jax.enable_x64(True):
        packed = (jnp.left_shift(key.astype(jnp.int64), b)
                  | jnp.arange(v, dtype=jnp.int64))
        item_at_rank = (jnp.sort(packed) & ((1 << b) - 1)).astype(jnp.int32)
    rank = jnp.zeros_like(item_at_rank).at[item_at_rank].set(jnp.arange(v, dtype=jnp.int32))
    return rank, item_at_rank


def _tree_levels(num_ranks: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each level of the ready tree, leaves first: level 0 holds the
    bit words (rank ``r`` is bit ``r % 32`` of word ``r // 32``), each level above counts the
    ready ranks under each of its nodes. Sizes are multiples of ``FANOUT``; the top level is a
    single block. The flat tree has one more (scratch) slot at the end."""
    levels, offset = [], 0
    size = -(-num_ranks // FANOUT ** 2) * FANOUT
    while True:
        levels.append((offset, size))
        offset += size
        if size == FANOUT:
            return levels
        size = -(-(size // FANOUT) // FANOUT) * FANOUT


def _tree_slots(levels, rank: jnp.ndarray) -> jnp.ndarray:
    """``[..., L]`` flat tree index of the word and of every count above rank ``rank``."""
    return jnp.stack([off + jnp.right_shift(rank, FANOUT_BITS * (level + 1))
                      for level, (off, _) in enumerate(levels)], axis=-1)


def _tree_updates(levels, rank: jnp.ndarray, sign: int) -> jnp.ndarray:
    """Values to add at ``_tree_slots(levels, rank)`` to mark (``sign=1``) or unmark (−1) an
    unmarked (resp. marked) ``rank``: its bit in the word, one in every count."""
    bit = jnp.left_shift(jnp.int32(1), rank & (FANOUT - 1))
    ones = jnp.ones(rank.shape + (len(levels) - 1,), jnp.int32)
    return sign * jnp.concatenate([bit[..., None], ones], axis=-1)


def _build_tree(levels, ready: jnp.ndarray) -> jnp.ndarray:
    """Flat tree (+1 scratch slot) with the ranks where ``ready [V]`` (bool) is set marked."""
    words_size = levels[0][1]
    bits = jnp.pad(ready, (0, words_size * FANOUT - ready.shape[0])).reshape(-1, FANOUT)
    words = jnp.sum(jnp.where(bits, jnp.left_shift(1, jnp.arange(FANOUT, dtype=jnp.int32)), 0),
                    axis=1, dtype=jnp.int32)  # int32 wraps: bit 31 is the sign bit
    parts, counts = [words], lax.population_count(words)
    for _, size in levels[1:]:
        counts = counts.reshape(-1, FANOUT).sum(axis=1)
        counts = jnp.pad(counts, (0, size - counts.shape[0]))
        parts.append(counts)
    return jnp.concatenate(parts + [jnp.zeros(1, jnp.int32)])


def _first_nonzero(block: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``block [B, FANOUT]`` → (index of the first nonzero entry (``FANOUT − 1`` if none),
    its value), ``[B]`` each; written as plain reductions, which XLA vectorizes."""
    lane = jnp.arange(FANOUT, dtype=jnp.int32)
    j = jnp.min(jnp.where(block != 0, lane, FANOUT - 1), axis=1)
    return j, jnp.sum(jnp.where(lane == j[:, None], block, 0), axis=1)


def _leftmost_ready(levels, tree: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``tree [B, S]`` → (lowest ready rank, whether any rank is ready), ``[B]`` each (the
    rank is meaningless where none is ready)."""
    top = levels[-1][0]
    block = tree[:, top: top + FANOUT]
    has_ready = jnp.any(block != 0, axis=1)
    index = jnp.zeros(tree.shape[0], jnp.int32)
    for level in reversed(range(len(levels))):
        if level < len(levels) - 1:
            block = _window(tree, levels[level][0] + index * FANOUT, FANOUT)
        j, value = _first_nonzero(block)
        index = index * FANOUT + j
    # ``value`` is the word ``index``; its lowest set bit is the rank's.
    low_bit = lax.population_count((value & -value) - 1)
    return index * FANOUT + jnp.minimum(low_bit, FANOUT - 1), has_ready


# Flat gathers and scatters on [B, R, *C] arrays: row ``r`` of batch element ``b`` is row
# ``b·R + r`` of the array reshaped to [B·R, *C].


def _flat_index(table: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
    """Flat row indices ``[B, K, 1]`` of rows ``index [B, K]`` of ``table [B, R, *C]``."""
    rows = table.shape[1]
    return (index + jnp.arange(table.shape[0], dtype=jnp.int32)[:, None] * rows)[..., None]


def _flat(table: jnp.ndarray) -> jnp.ndarray:
    return table.reshape((-1,) + table.shape[2:])


def _window(table: jnp.ndarray, start: jnp.ndarray, size: int) -> jnp.ndarray:
    """``table [B, R, *C]``, ``start [B]`` → ``[B, size, *C]``: rows ``start .. start + size``
    of each batch element (in bounds)."""
    cols = table.shape[2:]
    dims = lax.GatherDimensionNumbers(offset_dims=tuple(range(1, 2 + len(cols))),
                                      collapsed_slice_dims=(), start_index_map=(0,))
    return lax.gather(_flat(table), _flat_index(table, start[:, None])[:, 0], dims,
                      (size,) + cols, mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _rows(table: jnp.ndarray, index: jnp.ndarray) -> jnp.ndarray:
    """``table [B, R, *C]``, ``index [B, K]`` → ``[B, K, *C]`` (in bounds)."""
    cols = table.shape[2:]
    dims = lax.GatherDimensionNumbers(offset_dims=tuple(range(2, 2 + len(cols))),
                                      collapsed_slice_dims=(0,), start_index_map=(0,))
    return lax.gather(_flat(table), _flat_index(table, index), dims, (1,) + cols,
                      mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)


def _scatter(table: jnp.ndarray, index: jnp.ndarray, values: jnp.ndarray, *,
             add: bool) -> jnp.ndarray:
    """``table`` with rows ``index [B, K]`` set to (or incremented by) ``values [B, K, *C]``."""
    cols = table.shape[2:]
    dims = lax.ScatterDimensionNumbers(update_window_dims=tuple(range(2, 2 + len(cols))),
                                       inserted_window_dims=(0,),
                                       scatter_dims_to_operand_dims=(0,))
    scatter = lax.scatter_add if add else lax.scatter
    return scatter(_flat(table), _flat_index(table, index), values, dims,
                   mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS).reshape(table.shape)


def entry_items(graph: PaddedGraph, num_devices: int) -> tuple[jnp.ndarray, ...]:
    """The scheduler's CSR successor lists, expanded for ``D`` devices (per graph).

    Entries are items: for op ``p``, its distinct consumer ops, then ``X(t, d)`` for each of
    its tensors ``t`` and every device ``d``; for transfer ``X(t, d)``, the consumers of ``t``.
    Returns ``(entry_item [E + T·D + E], start [V], end [V])``: item ``i``'s entries are
    ``entry_item[start[i]:end[i]]``.
    """
    n, t, e, d = (graph.op_mask.shape[0], graph.tensor_mask.shape[0],
                  graph.edge_mask.shape[0], num_devices)
    pair_owner_tensor_start = graph.op_tensor_start[graph.pair_producer]
    pair_slot = jnp.arange(e, dtype=jnp.int32) + pair_owner_tensor_start * d
    tensor_owner_pair_end = graph.op_pair_end[graph.tensor_producer[graph.tensor_by_producer]]
    tensor_slot = (tensor_owner_pair_end + jnp.arange(t, dtype=jnp.int32) * d)[:, None] \
        + jnp.arange(d, dtype=jnp.int32)[None, :]
    xfer_item = n + graph.tensor_by_producer[:, None] * d + jnp.arange(d, dtype=jnp.int32)
    scratch = e + t * d  # padded pairs and tensors all write here, then it is overwritten
    # Real tensors are a prefix of ``tensor_by_producer`` (fusion masks some; they stay).
    real_tensor = jnp.arange(t) < jnp.max(graph.op_tensor_end)
    op_entries = (jnp.zeros(e + t * d + 1, jnp.int32)
                  .at[jnp.where(graph.pair_mask, pair_slot, scratch)].set(graph.pair_consumer)
                  .at[jnp.where(real_tensor[:, None], tensor_slot, scratch)].set(xfer_item))
    entry_item = jnp.concatenate([op_entries[:-1], graph.consumer_by_tensor])
    op_start = graph.op_pair_start + graph.op_tensor_start * d
    op_end = graph.op_pair_end + graph.op_tensor_end * d
    base = e + t * d
    xfer_start = jnp.repeat(base + graph.tensor_consumer_start, d)
    xfer_end = jnp.repeat(base + graph.tensor_consumer_end, d)
    return (entry_item, jnp.concatenate([op_start, xfer_start]),
            jnp.concatenate([op_end, xfer_end]))


def kernel_step_times(ready: fp.Fixed, free, device, source, duration: fp.Fixed,
                      num_devices: int) -> tuple[fp.Fixed, tuple]:
    """Inside a fused list kernel, SPEC §4 for one item (scalars, or ``[B]`` vectors with one
    chromosome's item per lane: :mod:`gsched.costmodel.pallas_lanes`): it starts once it is
    ``ready`` and every device it uses (``device``, and a transfer's ``source``) is free
    (``free``: ``D`` fixed-point times) → ``(end, the devices' free times after it)``."""
    uses = [(device == d) | (source == d) for d in range(num_devices)]
    start = ready
    for d in range(num_devices):
        start = fp.where(uses[d], fp.maximum(start, free[d]), start)
    end = fp.add(start, duration, TIME_LO_BITS)
    return end, tuple(fp.where(uses[d], end, free[d]) for d in range(num_devices))


def count_at_most(values: jnp.ndarray, size: int) -> jnp.ndarray:
    """``[size]`` int32: for each ``j < size``, how many of ``values [R]`` (ascending, ≥ 0)
    are ``≤ j``, i.e. ``searchsorted(values, j, side="right")``: with CSR range ends, the
    range holding position ``j`` (``R`` past the last); with a sorted owner list, the end of
    ``j``'s run. Each nonempty range ``[values[r − 1], values[r])`` flags its start; a
    position's count of flags up to it (:func:`inclusive_count`) numbers its range among the
    nonempty ones. No binary search (``log2 R`` dependent gathers of every position), no
    ``cumsum`` over the positions (on a CPU 20 µs for 5,120 flags, against 6.7 counted by
    words): with SPEC §8.3's fusion every chromosome has its own lists."""
    r = values.shape[0]
    start = jnp.pad(values[:-1], (1, 0))
    nonempty = values > start
    flag = jnp.zeros(size, bool).at[jnp.where(nonempty, start, size)].set(True, mode="drop")
    index = jnp.arange(r, dtype=jnp.int32)
    which = jnp.zeros(r, jnp.int32).at[jnp.where(nonempty, inclusive_count(nonempty) - 1, r)
                                       ].set(index, mode="drop")  # the nonempty ranges
    holding = which[jnp.maximum(inclusive_count(flag) - 1, 0)]
    return jnp.where(jnp.arange(size) < values[-1], holding, r)


def inclusive_count(flags: jnp.ndarray) -> jnp.ndarray:
    """``jnp.cumsum(flags)`` of a boolean ``[F]`` as int32, by 32-bit words: a prefix sum over
    ``F / 32`` popcounts, then each entry's count within its word. On a GPU XLA writes a long
    ``cumsum`` as a two-level ``reduce_window`` over the whole row; this reads the flags once
    and fuses the rest into the consumers."""
    size = flags.shape[0]
    words = -(-size // 32)
    bits = jnp.pad(flags, (0, 32 * words - size)).reshape(words, 32).astype(jnp.uint32)
    word = jnp.sum(bits << jnp.arange(32, dtype=jnp.uint32), axis=1, dtype=jnp.uint32)
    count = lax.population_count(word).astype(jnp.int32)
    before = jnp.cumsum(count) - count  # [words] set bits in the words before
    upto = (jnp.uint32(2) << jnp.arange(32, dtype=jnp.uint32)) - jnp.uint32(1)  # bits 0..i
    within = lax.population_count(word[:, None] & upto[None, :]).astype(jnp.int32)
    return (before[:, None] + within).reshape(-1)[:size]


def inline_columns(table: jnp.ndarray, first: jnp.ndarray, last: jnp.ndarray,
                   chunk: int) -> jnp.ndarray:
    """``[R, chunk + 2]``: for each of ``R`` rows with a range ``[first, last)`` of ``table``
    (which ends with ``chunk`` inert −1 entries, so any window inside it is in bounds), the
    first ``chunk`` entries (−1 past ``last``), then the range of the rest (``first + chunk``,
    ``last``; empty for most rows). The fused kernels read these columns with a row's others,
    so a row with at most ``chunk`` entries is walked without a load that waits for its range
    (the successor entries, :mod:`gsched.costmodel.pallas_decode`; the reads,
    :mod:`gsched.costmodel.pallas_peaks`)."""
    window = first[:, None] + jnp.arange(chunk, dtype=jnp.int32)
    inline = jnp.where(window < last[:, None], table[window], -1)
    return jnp.concatenate([inline, (first + chunk)[:, None], last[:, None]], axis=1)


def fixed_durations(graph: PaddedGraph, placement: Placement, params: CostParams,
                    num_devices: int) -> tuple[fp.Fixed, jnp.ndarray, jnp.ndarray]:
    """Every item's duration (:func:`item_durations`) in exact fixed point ``[V]``, with the
    time unit chosen for their sum and that sum (an upper bound on any schedule's runtime).
    Durations past float32 (their sum, or one of them, infinite or NaN: settings the host
    checks reject, ``params.check_duration_range``) give a non-finite bound, which the
    evaluation reports as an infinite runtime; their fixed-point values are then meaningless
    but in range (0 for a non-finite one), so the schedule's structure is still exact."""
    durations = item_durations(graph, placement, params, num_devices)
    runtime_bound = fp.ordered_sum(durations)
    unit = fp.choose_unit(runtime_bound, TIME_VALUE_BITS)
    finite = jnp.where(jnp.isfinite(durations), durations, 0.0)
    return fp.from_float(finite, unit, TIME_LO_BITS), unit, runtime_bound


def item_devices(graph: PaddedGraph, placement: Placement,
                 num_devices: int) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """``[V]`` each item's device, source device (an op's own; a transfer's producer's) and
    activation device: an entry activates its item when the finished item runs on this
    device — ops from producers on their own device or from transfers to it, a transfer from
    its producer (on the source device) if it exists (−1: never)."""
    t, d = graph.tensor_mask.shape[0], num_devices
    device = placement.device
    source = device[graph.tensor_producer][jnp.repeat(jnp.arange(t, dtype=jnp.int32), d)]
    exists = placement.transfer_exists.reshape(-1)  # [T·D]
    return (jnp.concatenate([device, jnp.tile(jnp.arange(d, dtype=jnp.int32), t)]),
            jnp.concatenate([device, source]),
            jnp.concatenate([device, jnp.where(exists, source, -1)]))


def op_indegrees(graph: PaddedGraph, placement: Placement) -> jnp.ndarray:
    """``[N]`` in-degree of each op in the extended graph: one per same-device producer op,
    one per incoming transfer."""
    device = placement.device
    producer_device = device[graph.tensor_producer]
    same_device_pair = graph.pair_mask & (device[graph.pair_producer]
                                          == device[graph.pair_consumer])
    cross_device_edge = graph.edge_mask & (producer_device[graph.edge_tensor]
                                           != device[graph.edge_consumer])
    return (jnp.zeros(graph.op_mask.shape[0], jnp.int32).at[graph.pair_consumer]
            .add(same_device_pair).at[graph.edge_consumer].add(cross_device_edge))


class ScheduleTables(NamedTuple):
    """Per-chromosome tables the schedule loop reads, indexed by rank where they describe
    items, packed in rows so that one gather fetches what a step needs."""

    entry: jnp.ndarray  # [Q, 2] int32: rank, activation device (−1 never) of each entry's item
    pop_row: jnp.ndarray  # [V, 6] int32 by rank: device, source device, duration hi, lo,
    #                       entries start, end
    item_at_rank: jnp.ndarray  # [V] int32
    time_unit: jnp.ndarray  # [] float32
    runtime_bound: jnp.ndarray  # [] float32


class ScheduleState(NamedTuple):
    """The loop state of one chromosome's list schedule."""

    cursor: jnp.ndarray  # [] int32 next entry of the current item to walk
    cursor_end: jnp.ndarray  # [] int32 end of the current item's entries
    current_device: jnp.ndarray  # [] int32 device of the current item
    current_end: fp.Fixed  # [] end time of the current item
    node: jnp.ndarray  # [V + 1, 3] int32 by rank: in-degree, ready time hi, lo; once the item
    #                    is scheduled at step k the in-degree becomes −1 − k; row V is scratch
    tree: jnp.ndarray  # the ready tree (``_build_tree``), its last slot scratch
    free: jnp.ndarray  # [D, 2] int32 device free times (hi, lo)
    step: jnp.ndarray  # [] int32 items scheduled so far
    done: jnp.ndarray  # [] bool no item left to schedule


def schedule_init(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                  params: CostParams, num_devices: int) -> tuple[ScheduleTables, ScheduleState]:
    """Tables and the initial loop state of one chromosome (no batch axis)."""
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    v = n + t * d
    duration, unit, runtime_bound = fixed_durations(graph, placement, params, num_devices)
    op_indegree = op_indegrees(graph, placement)
    indegree = jnp.concatenate([op_indegree, jnp.ones(t * d, jnp.int32)])
    ready0 = jnp.concatenate([graph.op_mask & (op_indegree == 0), jnp.zeros(t * d, bool)])

    rank, item_at_rank = rank_items(item_priorities(keys, n, d), first_items(graph, d))
    entry_item, entry_start, entry_end = entry_items(graph, d)
    item_device, item_source, activation = item_devices(graph, placement, d)
    pop_row = jnp.stack([item_device, item_source, duration.hi, duration.lo, entry_start,
                         entry_end], axis=1)
    tables = ScheduleTables(
        entry=jnp.stack([rank[entry_item], activation[entry_item]], axis=1),
        pop_row=pop_row[item_at_rank],
        item_at_rank=item_at_rank,
        time_unit=unit,
        runtime_bound=runtime_bound,
    )
    zero = jnp.int32(0)
    node = jnp.zeros((v + 1, 3), jnp.int32).at[:v, 0].set(indegree[item_at_rank])
    state = ScheduleState(
        cursor=zero, cursor_end=zero, current_device=zero, current_end=fp.Fixed(zero, zero),
        node=node, tree=_build_tree(_tree_levels(v), ready0[item_at_rank]),
        free=jnp.zeros((d, 2), jnp.int32), step=zero, done=jnp.bool_(False),
    )
    return tables, state


def schedule_step(tables: ScheduleTables, state: ScheduleState, num_devices: int,
                  chunk: int) -> ScheduleState:
    """One loop iteration for one chromosome: if the current item's entries are all walked,
    schedule the ready item with the largest priority (it becomes current); then walk
    ``chunk`` entries of the current item. A finished chromosome is left unchanged.

    Under ``jax.vmap`` (nested or not) the batch axes are flattened into one and the batched
    step runs on flat arrays (see the module docstring)."""
    one = jax.tree.map(lambda x: x[None], (tables, state))
    return jax.tree.map(lambda x: x[0], _batched_step(num_devices, chunk)(*one))


@functools.cache
def _batched_step(num_devices: int, chunk: int):
    """:func:`_step` as a :func:`~gsched.core.batching.flat_batch` function: vmapping it merges
    the new batch axis into the existing leading one instead of batching every gather and
    scatter."""
    return flat_batch(lambda tables, state: _step(tables, state, num_devices, chunk))


def _step(tables: ScheduleTables, s: ScheduleState, num_devices: int,
          chunk: int) -> ScheduleState:
    """:func:`schedule_step` on a batch: every leaf has a leading axis ``[B]``."""
    batch, v = tables.pop_row.shape[:2]
    levels = _tree_levels(v)
    scratch = s.tree.shape[1] - 1  # the tree's scratch slot
    node, free = s.node, s.free

    # Schedule the next item.
    want = (s.cursor >= s.cursor_end) & ~s.done
    rank, has_ready = _leftmost_ready(levels, s.tree)
    take = want & has_ready
    pop = _rows(tables.pop_row, rank[:, None])[:, 0]  # [B, 6]
    ready = _rows(node, rank[:, None])[:, 0]  # [B, 3]
    dev, src, first, last = pop[:, 0], pop[:, 1], pop[:, 4], pop[:, 5]
    device = jnp.arange(num_devices, dtype=jnp.int32)
    uses = (device == dev[:, None]) | (device == src[:, None])  # [B, D]
    start = fp.maximum(fp.Fixed(ready[:, 1], ready[:, 2]),
                       fp.masked_max(fp.Fixed(free[..., 0], free[..., 1]), uses, axis=1))
    end = fp.add(start, fp.Fixed(pop[:, 2], pop[:, 3]), TIME_LO_BITS)
    free = jnp.where((uses & take[:, None])[..., None],
                     jnp.stack([end.hi, end.lo], axis=1)[:, None, :], free)
    cursor = jnp.where(take, first, s.cursor)
    cursor_end = jnp.where(take, last, s.cursor_end)
    current_device = jnp.where(take, dev, s.current_device)
    current_end = fp.where(take, end, s.current_end)

    # Walk entries of the current item: the window starts at the cursor, or earlier near the
    # end of the entry table (it then still covers every remaining entry).
    num_entries = tables.entry.shape[1]
    width = min(chunk, num_entries)
    window = jnp.minimum(cursor, num_entries - width)
    entry = _window(tables.entry, window, width)  # [B, width, 2]
    position = window[:, None] + jnp.arange(width, dtype=jnp.int32)
    succ = entry[..., 0]
    active = ((position >= cursor[:, None]) & (position < cursor_end[:, None])
              & (entry[..., 1] == current_device[:, None]))
    old = _rows(node, succ)  # [B, width, 3]
    raised = fp.maximum(fp.Fixed(old[..., 1], old[..., 2]),
                        fp.Fixed(current_end.hi[:, None], current_end.lo[:, None]))
    node = _scatter(
        node,
        jnp.concatenate([jnp.where(active, succ, v), jnp.where(take, rank, v)[:, None]], 1),
        jnp.concatenate([jnp.stack([old[..., 0] - 1, raised.hi, raised.lo], axis=-1),
                         jnp.stack([-1 - s.step, ready[:, 1], ready[:, 2]], 1)[:, None]], 1),
        add=False)
    newly_ready = active & (old[..., 0] == 1)
    slots = jnp.concatenate([
        jnp.where(newly_ready[..., None], _tree_slots(levels, succ), scratch).reshape(batch, -1),
        jnp.where(take[:, None], _tree_slots(levels, rank), scratch)], axis=1)
    updates = jnp.concatenate([_tree_updates(levels, succ, 1).reshape(batch, -1),
                               _tree_updates(levels, rank, -1)], axis=1)
    return ScheduleState(
        cursor=window + width, cursor_end=cursor_end, current_device=current_device,
        current_end=current_end, node=node,
        tree=_scatter(s.tree, slots, updates, add=True), free=free,
        step=s.step + take.astype(jnp.int32), done=s.done | (want & ~has_ready),
    )


def schedule_result(tables: ScheduleTables, final: ScheduleState) -> Schedule:
    """The :class:`Schedule` from a finished loop state (one chromosome)."""
    v = tables.pop_row.shape[0]
    indegree = final.node[:v, 0]
    step = jnp.where(indegree < 0, -1 - indegree, -1)  # by rank
    position = jnp.zeros(v, jnp.int32).at[tables.item_at_rank].set(step)
    free = fp.Fixed(final.free[:, 0], final.free[:, 1])
    return schedule_from_positions(position, final.step, free, tables.time_unit,
                                   tables.runtime_bound)


def schedule_from_positions(position: jnp.ndarray, num_steps: jnp.ndarray, free: fp.Fixed,
                            unit: jnp.ndarray, runtime_bound: jnp.ndarray,
                            order: jnp.ndarray | None = None) -> Schedule:
    """A :class:`Schedule` from each item's step (``position [V]``, −1 if never scheduled),
    the steps taken and the end times ``free [S]`` whose maximum is the makespan; ``order
    [V]``, the item at each step (−1 past ``num_steps``), when the caller has it (else
    scattered from ``position``)."""
    v = position.shape[0]
    if order is None:
        order = jnp.full(v + 1, -1, jnp.int32).at[jnp.where(position >= 0, position, v)].set(
            jnp.arange(v, dtype=jnp.int32))[:v]
    makespan = fp.masked_max(free, jnp.ones(free.hi.shape, bool), axis=0)  # last end
    return Schedule(order, position, num_steps, fp.to_float(makespan, unit, TIME_LO_BITS),
                    runtime_bound)
