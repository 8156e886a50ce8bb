"""Fusion (SPEC §8.3): fusion groups from a chromosome's fusion keys, and the contracted graph.

With ``fusion`` on, a chromosome carries ``N`` fusion keys after its transfer keys. Per
chromosome (no batch axis; ``vmap`` adds one):

1. :func:`fusion_roots` — the group of every op, as the index of its group's *root*. Op ``v``
   is a candidate when its key is ≥ 0.5, it is a real op and not a program input, it has no
   graph output (every output tensor has a reader), and the distinct ops reading its outputs
   (data and control) are exactly one op ``c`` on ``v``'s device. Candidates are visited in
   descending key (ties: smaller op index), decided once before any merge; ``v`` joins the
   group that holds ``c`` unless the merged group's internal bytes would exceed
   ``fusion_capacity`` (equal is allowed). With a finite capacity each merge is one ``O(N)``
   vector update over the candidates only, so a chromosome costs ``O(C·N)`` element operations
   for ``C`` candidates (``O(N²)`` at worst). Without one (the default) every merge fits, the
   visit order cannot matter, and each group is a chain of candidates ending at its root: the
   first op along the consumer links that is not a candidate, found by pointer jumping
   (``⌈log2 N⌉`` gathers of ``N``).
2. :func:`contract` — the contracted program as a :class:`PaddedGraph` **of the same bucket**,
   which every scheduler and the memory walk then read unchanged: each group is one op at its
   root's index (its ``compute_cost`` and ``temporary_memory`` the sums over the group, exact in
   fixed point), the other members and the internal tensors (produced in a group that reads
   them) are masked out, and the consumer relations are rewritten to roots, deduplicated (a
   kernel reads a tensor once, SPEC §1) and re-packed into the CSR lists of
   :mod:`gsched.core.padding`. A kernel's bytes for SPEC §8.1 then follow from
   :func:`gsched.costmodel.schedule.op_bytes` on the contracted graph: the distinct tensors it
   reads from outside plus its root's outputs.

Why the group sums stay exact: the internal bytes that a merge compares with the capacity and
the summed costs and memories are fixed-point sums (``gsched.core.fixedpoint``), so only each
input's conversion rounds, as everywhere else in the cost model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

from gsched.core import fixedpoint as fp
from gsched.core.padding import PaddedGraph
from gsched.costmodel.memory import MEMORY_LO_BITS, MEMORY_VALUE_BITS, memory_units
from gsched.costmodel.schedule import inclusive_count

_SUM_LO_BITS = 16  # group sums of costs and memories
_SUM_VALUE_BITS = 46


def fusion_candidates(graph: PaddedGraph, device: jnp.ndarray,
                      fusion_keys: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """``([N] bool candidate, [N] int32 its one consumer op)`` (SPEC §8.3; consumer 0 where
    there is none)."""
    n = graph.op_mask.shape[0]
    num_consumers = graph.op_pair_end - graph.op_pair_start
    consumer = graph.pair_consumer[jnp.minimum(graph.op_pair_start, graph.pair_consumer.shape[0]
                                               - 1)]
    consumer = jnp.where(num_consumers == 1, consumer, 0)
    unread = graph.tensor_mask & (graph.tensor_consumer_end == graph.tensor_consumer_start)
    has_graph_output = jnp.zeros(n, bool).at[graph.tensor_producer].max(unread)
    candidate = (graph.op_mask & ~graph.op_is_input & (fusion_keys >= 0.5) & ~has_graph_output
                 & (num_consumers == 1) & (device == device[consumer]))
    return candidate, consumer


def fusion_roots(graph: PaddedGraph, device: jnp.ndarray, fusion_keys: jnp.ndarray,
                 fusion_capacity: jnp.ndarray) -> jnp.ndarray:
    """``[N]`` int32: the root of each op's fusion group (an unfused op is its own root).

    ``device [N]``: the decoded placement; ``fusion_keys [N]``; ``fusion_capacity []``
    (bytes, ``inf`` = no limit)."""
    n = graph.op_mask.shape[0]
    candidate, consumer = fusion_candidates(graph, device, fusion_keys)
    unit, size, _ = memory_units(graph)
    capacity = jnp.asarray(fusion_capacity, jnp.float32)
    bounded = capacity / unit < 2.0 ** (MEMORY_VALUE_BITS + 1)  # else nothing exceeds it

    def unbounded(_):
        # Every merge fits: a group is a chain of candidates and the first non-candidate
        # after it (its root), found by pointer jumping (log2 N gathers instead of C·N).
        pointer = jnp.where(candidate, consumer, jnp.arange(n, dtype=jnp.int32))
        for _ in range(max(1, (n - 1).bit_length())):
            pointer = pointer[pointer]
        return pointer

    def greedy(_):
        # Visit order: candidates first, by descending key, then smaller index (stable sort).
        visit = jnp.argsort(jnp.where(candidate, -fusion_keys, jnp.inf), stable=True)
        num_candidates = jnp.sum(candidate, dtype=jnp.int32)
        # Bytes of each op's outputs (all read by its consumer), in the memory unit; the
        # internal bytes of each group, kept at its root.
        out_hi = jnp.zeros(n, jnp.int32).at[graph.tensor_producer].add(size.hi)
        out_lo = jnp.zeros(n, jnp.int32).at[graph.tensor_producer].add(size.lo)
        cap = fp.from_float(jnp.where(bounded, capacity, 0.0), unit, MEMORY_LO_BITS)

        def merge(carry):
            k, root, inner_hi, inner_lo = carry
            v = visit[k]
            target = root[consumer[v]]
            merged = fp.add(fp.add(fp.Fixed(inner_hi[v], inner_lo[v]),
                                   fp.Fixed(inner_hi[target], inner_lo[target]),
                                   MEMORY_LO_BITS),
                            fp.Fixed(out_hi[v], out_lo[v]), MEMORY_LO_BITS)
            fits = ~fp.greater(merged, cap)
            root = jnp.where(fits & (root == v), target, root)
            inner_hi = inner_hi.at[target].set(jnp.where(fits, merged.hi, inner_hi[target]))
            inner_lo = inner_lo.at[target].set(jnp.where(fits, merged.lo, inner_lo[target]))
            return k + 1, root, inner_hi, inner_lo

        zeros = jnp.zeros(n, jnp.int32)
        start = (jnp.int32(0), jnp.arange(n, dtype=jnp.int32), zeros, zeros)
        return lax.while_loop(lambda carry: carry[0] < num_candidates, merge, start)[1]

    # A finite capacity makes the visit order matter; without one every merge fits.
    return lax.cond(bounded, greedy, unbounded, None)


def _group_sum(values: jnp.ndarray, root: jnp.ndarray, mask: jnp.ndarray) -> jnp.ndarray:
    """``[N]`` float32: Σ ``values`` over each root's group (0 at non-roots), exact in fixed
    point before the one final rounding; an op alone in its group keeps its value exactly."""
    values = jnp.where(mask, values, 0.0)
    unit = fp.choose_unit(fp.ordered_sum(values), _SUM_VALUE_BITS)
    fixed = fp.from_float(values, unit, _SUM_LO_BITS)
    total = fp.normalize(fp.Fixed(jnp.zeros_like(fixed.hi).at[root].add(fixed.hi),
                                  jnp.zeros_like(fixed.lo).at[root].add(fixed.lo)),
                         _SUM_LO_BITS)
    members = jnp.zeros(root.shape, jnp.int32).at[root].add(mask.astype(jnp.int32))
    return jnp.where(members > 1, fp.to_float(total, unit, _SUM_LO_BITS), values)


def _ranges(owner: jnp.ndarray, keep: jnp.ndarray, size: int) -> tuple[jnp.ndarray, ...]:
    """``[start, end)`` of each owner's run in a list sorted by owner whose kept entries come
    first (the jittable twin of ``gsched.core.padding``'s host-side ranges)."""
    counts = jnp.zeros(size, jnp.int32).at[owner].add(keep.astype(jnp.int32))
    end = jnp.cumsum(counts, dtype=jnp.int32)
    return end - counts, end


def _dedup_sorted(mask: jnp.ndarray, first: jnp.ndarray, first_size: int,
                  second: jnp.ndarray, second_size: int):
    """Sorts the relation ``(first, second)`` (``[M]`` int32, values below ``first_size`` /
    ``second_size``) restricted to ``mask`` by ``(first, second)``, drops repeated pairs and
    packs the rest at the front. Returns ``(keep, first, second)``, 0 in dropped entries.

    One sort of a packed integer key ``first · 2^s + second`` (``s`` bits for ``second``):
    XLA sorts one key alone far faster than ``lexsort``'s three (25 against 210 µs per
    1,024 entries on a CPU); int64 only where the two values need more than 30 bits."""
    second_bits = max(1, (second_size - 1).bit_length())
    wide = (first_size - 1).bit_length() + second_bits > 30
    size = mask.shape[0]
    with jax.enable_x64(wide):
        dtype = jnp.int64 if wide else jnp.int32
        absent = jnp.iinfo(dtype).max  # above every packed pair
        key = jnp.where(mask, (first.astype(dtype) << second_bits) | second, absent)
        key = jnp.sort(key)
        keep = (key != absent) & jnp.concatenate([jnp.ones(1, bool), key[1:] != key[:-1]])
        # The distinct keys to the front (one scatter of the packed pair), then unpacked.
        slot = jnp.where(keep, inclusive_count(keep) - 1, size)  # size: dropped
        key = jnp.zeros(size, dtype).at[slot].set(key, mode="drop")
        first = (key >> second_bits).astype(jnp.int32)
        second = (key & ((1 << second_bits) - 1)).astype(jnp.int32)
    return jnp.arange(size) < jnp.sum(keep, dtype=jnp.int32), first, second


def contract(graph: PaddedGraph, root: jnp.ndarray) -> PaddedGraph:
    """The contracted program of fusion groups ``root [N]`` as a graph of the same bucket (see
    the module docstring). With every op its own root it schedules, scores and moves bytes
    exactly like ``graph``."""
    n, t = graph.op_mask.shape[0], graph.tensor_mask.shape[0]
    is_root = graph.op_mask & (root == jnp.arange(n))
    producer = graph.tensor_producer
    tensor_mask = graph.tensor_mask & is_root[producer]  # other tensors are internal

    edge_keep, edge_tensor, edge_consumer = _dedup_sorted(
        graph.edge_mask & tensor_mask[graph.edge_tensor], graph.edge_tensor, t,
        root[graph.edge_consumer], n)
    consumer_start, consumer_end = _ranges(edge_tensor, edge_keep, t)
    pair_keep, pair_producer, pair_consumer = _dedup_sorted(
        edge_keep, producer[edge_tensor], n, edge_consumer, n)
    pair_start, pair_end = _ranges(pair_producer, pair_keep, n)

    return graph._replace(
        op_mask=is_root,
        compute_cost=_group_sum(graph.compute_cost, root, graph.op_mask),
        temporary_memory=_group_sum(graph.temporary_memory, root, graph.op_mask),
        tensor_mask=tensor_mask,
        edge_mask=edge_keep,
        edge_tensor=edge_tensor,
        edge_consumer=edge_consumer,
        pair_mask=pair_keep,
        pair_producer=pair_producer,
        pair_consumer=pair_consumer,
        op_pair_start=pair_start,
        op_pair_end=pair_end,
        consumer_by_tensor=edge_consumer,
        tensor_consumer_start=consumer_start,
        tensor_consumer_end=consumer_end,
    )
