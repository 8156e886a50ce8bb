"""Chromosome decoding (SPEC §2) and the priority list schedule with its runtime (SPEC §4).

Items are the ops and the potential transfers of a padded graph: item ``j < N`` is op ``j``;
item ``N + t·D + d`` is the transfer ``X(t, d)``. ``V = N + T·D`` items in all, most of the
transfer slots absent for any one placement.

The schedule is Kahn's algorithm with a priority queue, written so that one evaluation costs
``O((V + E) log V)`` instead of the ``O(V²)`` of "argmax over ready items at every step":

* every item gets a *rank*: its position in the order (priority descending, then item index
  ascending — exactly SPEC's tie rule "ops before transfers, then smaller op index, then
  smaller (tensor, device)"), computed with one sort;
* ready items are marked in a count tree over rank positions (fan-out 32), so the ready item
  with the largest priority is the leftmost marked leaf, found in ``log₃₂ V`` small steps;
* when an item finishes, its CSR entry list (``PaddedGraph.entry_*``) is walked
  ``chunk`` entries per loop iteration: in-degrees drop, newly ready items are marked in the
  tree, and the item's end time is propagated to its successors' ready times.

Times are exact fixed-point values (``gsched.fixedpoint``), so the runtime agrees with exact
arithmetic. Everything is written for one chromosome; ``jax.vmap`` batches populations and
graphs (the loop then runs until the slowest chromosome of the batch finishes).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from gsched import fixedpoint as fp
from gsched.padding import PaddedGraph

TIME_LO_BITS = 24
TIME_VALUE_BITS = 49
FANOUT_BITS = 5
FANOUT = 1 << FANOUT_BITS


class CostParams(NamedTuple):
    """Run-time cost-model settings (SPEC §4); arrays, so a sweep can ``vmap`` over them."""

    latency: jnp.ndarray | float = 0.0  # time units per transfer
    bandwidth: jnp.ndarray | float = float("inf")  # bytes per time unit
    capacity: jnp.ndarray | float = float("inf")  # bytes per device; inf = no limit


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


def decode_placement(graph: PaddedGraph, keys: jnp.ndarray, num_devices: int,
                     pinned: jnp.ndarray | None = None) -> Placement:
    """Op → device by largest affinity (first device on ties; ``pinned[j] ≥ 0`` overrides),
    and the transfers it implies: ``X(t, d)`` for every other device ``d`` holding a consumer
    of ``t``."""
    n = graph.op_mask.shape[0]
    affinity, _, _ = split_keys(keys, n, num_devices)
    device = jnp.argmax(affinity, axis=1).astype(jnp.int32)
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


def item_priorities(keys: jnp.ndarray, num_ops: int, num_devices: int) -> jnp.ndarray:
    """``[V]`` priority of every item: op priorities, then transfer priorities row-major."""
    _, op_priority, xfer_priority = split_keys(keys, num_ops, num_devices)
    return jnp.concatenate([op_priority, xfer_priority.reshape(-1)])


def rank_items(priority: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Sorts items by priority descending, ties by item index ascending (SPEC §2).

    Returns ``(rank [V], item_at_rank [V])``. Priorities are keys in [0, 1]: their float32
    bit patterns, read as int32, order like the values (−0.0 is folded into +0.0 first).
    """
    bits = jax.lax.bitcast_convert_type(jnp.where(priority == 0, 0.0, priority).astype(
        jnp.float32), jnp.int32)
    item_at_rank = jnp.argsort(-bits, stable=True).astype(jnp.int32)
    rank = jnp.zeros_like(item_at_rank).at[item_at_rank].set(
        jnp.arange(priority.shape[0], dtype=jnp.int32))
    return rank, item_at_rank


def _tree_levels(num_leaves: int) -> list[tuple[int, int]]:
    """``(offset, size)`` of each level of the count tree, leaves first; sizes are multiples
    of ``FANOUT`` and the top level is a single block."""
    levels, offset, size = [], 0, -(-num_leaves // FANOUT) * FANOUT
    while True:
        levels.append((offset, size))
        offset += size
        if size == FANOUT:
            return levels
        size = -(-(size // FANOUT) // FANOUT) * FANOUT


def _ancestors(levels, leaf: jnp.ndarray) -> jnp.ndarray:
    """``[..., L]`` flat tree indices of every level's node above leaf position ``leaf``."""
    return jnp.stack([off + jnp.right_shift(leaf, FANOUT_BITS * level)
                      for level, (off, _) in enumerate(levels)], axis=-1)


def _tree_updates(levels, leaf: jnp.ndarray, item: jnp.ndarray, sign: int) -> jnp.ndarray:
    """Values to add at ``_ancestors(levels, leaf)`` to mark (``sign=1``) or unmark (−1)
    ``item`` at ``leaf``: the leaf holds ``item + 1``, inner nodes count marked leaves."""
    ones = jnp.ones(leaf.shape + (len(levels) - 1,), jnp.int32)
    return sign * jnp.concatenate([(item + 1)[..., None], ones], axis=-1)


def _build_tree(levels, leaf_values: jnp.ndarray) -> jnp.ndarray:
    """Flat tree (+1 scratch slot at the end) from ``[V]`` leaf values (0 = unmarked)."""
    parts, counts = [], leaf_values
    for off, size in levels:
        counts = jnp.pad(counts, (0, size - counts.shape[0]))
        parts.append(counts)
        counts = (counts.reshape(-1, FANOUT) > 0).sum(axis=1) if off == 0 else \
            counts.reshape(-1, FANOUT).sum(axis=1)
    return jnp.concatenate(parts + [jnp.zeros(1, jnp.int32)])


def _leftmost_marked(levels, tree: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``(leaf position, item)`` of the leftmost marked leaf (meaningless if none is)."""
    index = jnp.int32(0)
    for off, _ in reversed(levels):
        block = jax.lax.dynamic_slice(tree, (off + index * FANOUT,), (FANOUT,))
        j = jnp.argmax(block > 0).astype(jnp.int32)
        index = index * FANOUT + j
    return index, block[j] - 1


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
    real_tensor = jnp.arange(t) < jnp.sum(graph.tensor_mask)
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


class ScheduleTables(NamedTuple):
    """Per-chromosome tables the schedule loop reads, packed in rows so that one gather
    fetches what an item needs."""

    entry_item: jnp.ndarray  # [Q] int32, see :func:`entry_items`
    pop_row: jnp.ndarray  # [V, 6] int32: device, source device, duration hi, lo, entries start, end
    walk_row: jnp.ndarray  # [V, 2] int32: activation device (−1 never), rank
    time_unit: jnp.ndarray  # [] float32
    runtime_bound: jnp.ndarray  # [] float32


def schedule_init(graph: PaddedGraph, keys: jnp.ndarray, placement: Placement,
                  params: CostParams, num_devices: int) -> tuple[ScheduleTables, dict]:
    """Tables and the initial loop state of one chromosome (no batch axis).

    Loop state: ``node [V + 1, 3]`` (in-degree, ready time hi, lo; row ``V`` is scratch for
    masked writes), the count ``tree``, device ``free`` times, the ``order`` so far, and the
    current item (whose entries are being walked) with its device and end time.
    """
    n, t, d = graph.op_mask.shape[0], graph.tensor_mask.shape[0], num_devices
    v = n + t * d
    device = placement.device
    exists = placement.transfer_exists.reshape(-1)  # [T·D]
    producer_device = device[graph.tensor_producer]
    xfer_tensor = jnp.repeat(jnp.arange(t, dtype=jnp.int32), d)

    op_duration = jnp.where(graph.op_mask, graph.compute_cost, 0.0)
    xfer_time = params.latency + graph.tensor_size / params.bandwidth
    durations = jnp.concatenate([op_duration, jnp.where(exists, xfer_time[xfer_tensor], 0.0)])
    runtime_bound = jnp.sum(durations)
    unit = fp.choose_unit(runtime_bound, TIME_VALUE_BITS)
    duration = fp.from_float(durations, unit, TIME_LO_BITS)

    # In-degrees in the extended graph: one per same-device producer op, one per transfer.
    same_device_pair = graph.pair_mask & (device[graph.pair_producer]
                                          == device[graph.pair_consumer])
    cross_device_edge = graph.edge_mask & (producer_device[graph.edge_tensor]
                                           != device[graph.edge_consumer])
    op_indegree = (jnp.zeros(n, jnp.int32).at[graph.pair_consumer].add(same_device_pair)
                   .at[graph.edge_consumer].add(cross_device_edge))
    indegree = jnp.concatenate([op_indegree, jnp.ones(t * d + 1, jnp.int32)])
    ready0 = jnp.concatenate([graph.op_mask & (op_indegree == 0), jnp.zeros(t * d, bool)])

    rank, _ = rank_items(item_priorities(keys, n, d))
    entry_item, entry_start, entry_end = entry_items(graph, d)
    item_device = jnp.concatenate([device, jnp.tile(jnp.arange(d, dtype=jnp.int32), t)])
    item_source = jnp.concatenate([device, producer_device[xfer_tensor]])
    # An entry activates its item when the finished item runs on this device: ops activate
    # from producers on their own device or from transfers to it; a transfer activates from
    # its producer (on the source device) if it exists.
    activation = jnp.concatenate([device, jnp.where(exists, producer_device[xfer_tensor], -1)])
    tables = ScheduleTables(
        entry_item=entry_item,
        pop_row=jnp.stack([item_device, item_source, duration.hi, duration.lo, entry_start,
                           entry_end], axis=1),
        walk_row=jnp.stack([activation, rank], axis=1),
        time_unit=unit,
        runtime_bound=runtime_bound,
    )
    zero = jnp.int32(0)
    state = dict(
        cursor=zero, cursor_end=zero, current_device=zero, current_end=fp.Fixed(zero, zero),
        node=jnp.stack([indegree, jnp.zeros(v + 1, jnp.int32), jnp.zeros(v + 1, jnp.int32)], 1),
        tree=_build_tree(_tree_levels(v), jnp.zeros(v, jnp.int32).at[rank].set(
            jnp.where(ready0, jnp.arange(v, dtype=jnp.int32) + 1, 0))),
        free=jnp.zeros((d + 1, 2), jnp.int32),
        makespan=fp.Fixed(zero, zero), order=jnp.full(v + 1, -1, jnp.int32), step=zero,
        done=jnp.bool_(False),
    )
    return tables, state


def schedule_step(tables: ScheduleTables, s: dict, num_devices: int, chunk: int) -> dict:
    """One loop iteration for one chromosome: if the current item's entries are all walked,
    schedule the ready item with the largest priority (it becomes current); then walk
    ``chunk`` entries of the current item. A finished chromosome is left unchanged."""
    d = num_devices
    v = tables.pop_row.shape[0]
    levels = _tree_levels(v)
    scratch = levels[-1][0] + FANOUT  # the tree's scratch slot
    node, tree, free = s["node"], s["tree"], s["free"]

    # Schedule the next item.
    want = (s["cursor"] >= s["cursor_end"]) & ~s["done"]
    has_ready = jnp.sum(tree[levels[-1][0]: levels[-1][0] + FANOUT]) > 0
    take = want & has_ready
    leaf, item = _leftmost_marked(levels, tree)
    item = jnp.clip(item, 0, v - 1)
    pop = tables.pop_row[item]
    dev, src, first, last = pop[0], pop[1], pop[4], pop[5]
    ready = node[item]
    busy = free[jnp.stack([dev, src])]  # [2, 2]
    start = fp.maximum(fp.Fixed(ready[1], ready[2]),
                       fp.maximum(fp.Fixed(busy[0, 0], busy[0, 1]),
                                  fp.Fixed(busy[1, 0], busy[1, 1])))
    end = fp.add(start, fp.Fixed(pop[2], pop[3]), TIME_LO_BITS)
    free = free.at[jnp.where(take, jnp.stack([dev, src]), d)].set(
        jnp.stack([end.hi, end.lo])[None, :])  # row d is scratch
    cursor = jnp.where(take, first, s["cursor"])
    cursor_end = jnp.where(take, last, s["cursor_end"])
    current_device = jnp.where(take, dev, s["current_device"])
    current_end = fp.where(take, end, s["current_end"])

    # Walk entries of the current item.
    window = cursor + jnp.arange(chunk, dtype=jnp.int32)
    items = tables.entry_item[window]
    row = tables.walk_row[items]
    active = (window < cursor_end) & (row[:, 0] == current_device)
    slot = jnp.where(active, items, v)
    old = node[items]
    raised = fp.maximum(fp.Fixed(old[:, 1], old[:, 2]), current_end)
    node = node.at[slot].set(jnp.stack([old[:, 0] - 1, raised.hi, raised.lo], axis=1))
    newly_ready = active & (old[:, 0] == 1)
    marks = jnp.where(newly_ready[:, None], _ancestors(levels, row[:, 1]), scratch)
    unmark = jnp.where(take, _ancestors(levels, leaf), scratch)
    tree = tree.at[jnp.concatenate([marks.reshape(-1), unmark])].add(jnp.concatenate([
        _tree_updates(levels, row[:, 1], items, 1).reshape(-1),
        _tree_updates(levels, leaf, item, -1)]))
    return dict(
        cursor=cursor + chunk, cursor_end=cursor_end, current_device=current_device,
        current_end=current_end, node=node, tree=tree, free=free,
        makespan=fp.where(take, fp.maximum(s["makespan"], end), s["makespan"]),
        order=s["order"].at[jnp.where(take, s["step"], v)].set(item),
        step=s["step"] + take.astype(jnp.int32),
        done=s["done"] | (want & ~has_ready),
    )


def schedule_result(tables: ScheduleTables, final: dict) -> Schedule:
    """The :class:`Schedule` from a finished loop state (one chromosome)."""
    v = tables.pop_row.shape[0]
    order = final["order"][:v]
    position = jnp.full(v + 1, -1, jnp.int32).at[jnp.where(order >= 0, order, v)].set(
        jnp.arange(v, dtype=jnp.int32))[:v]
    return Schedule(order, position, final["step"],
                    fp.to_float(final["makespan"], tables.time_unit, TIME_LO_BITS),
                    tables.runtime_bound)
