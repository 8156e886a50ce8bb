"""Device-side padded graphs: fixed-size arrays with ``*_mask`` fields, padded to size buckets.

A :class:`PaddedGraph` is a pytree of arrays whose shapes are a :class:`Bucket`; every jitted
entry point compiles once per bucket (and number of devices). Padding is inert: padded ops are
never scheduled, padded tensors and edges are masked out of every sum and maximum, so the same
graph padded into a larger bucket gives identical results.

Besides the graph itself the padded form carries the CSR lists the scheduler walks when an
item finishes (see ``gsched.costmodel.schedule``): for op ``p`` its distinct consumer ops (one per
(p, c) pair, however many tensors of ``p`` that ``c`` reads) and its output tensors (each
standing for the transfers ``X(t, ·)`` it may need); for tensor ``t`` its consumer ops.
:func:`topological_level` and :func:`topological_rank` are traceable functions of a padded graph.
"""

from __future__ import annotations

import zlib
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.graph import Graph


class Bucket(NamedTuple):
    """Padded sizes: ops, tensors, consumer relations (edges)."""

    num_ops: int
    num_tensors: int
    num_edges: int

    def chromosome_length(self, num_devices: int, fusion: bool = False) -> int:
        """Padded SPEC §2 layout: ``N·D + N + T·D`` with the bucket's sizes, ``+ N`` fusion keys
        with ``fusion`` (SPEC §8.3)."""
        base = self.num_ops * (num_devices + 1) + self.num_tensors * num_devices
        return base + self.num_ops if fusion else base


class PaddedGraph(NamedTuple):
    """A graph padded to a :class:`Bucket` (``N`` ops, ``T`` tensors, ``E`` edges).

    A leading batch axis is allowed everywhere. Ranges ``[start, end)`` index the array named
    in the comment; padded ops and tensors have empty ranges.
    """

    op_mask: np.ndarray  # [N] bool
    compute_cost: np.ndarray  # [N] float32
    temporary_memory: np.ndarray  # [N] float32
    tensor_mask: np.ndarray  # [T] bool
    tensor_producer: np.ndarray  # [T] int32 (0 for padding)
    tensor_size: np.ndarray  # [T] float32
    tensor_is_control: np.ndarray  # [T] bool
    edge_mask: np.ndarray  # [E] bool
    edge_tensor: np.ndarray  # [E] int32 (0 for padding)
    edge_consumer: np.ndarray  # [E] int32 (0 for padding)
    pair_mask: np.ndarray  # [E] bool: distinct (producer, consumer) op pairs, by producer
    pair_producer: np.ndarray  # [E] int32
    pair_consumer: np.ndarray  # [E] int32
    op_pair_start: np.ndarray  # [N] int32 → pair_*
    op_pair_end: np.ndarray  # [N] int32
    tensor_by_producer: np.ndarray  # [T] int32 tensor ids sorted by producer
    op_tensor_start: np.ndarray  # [N] int32 → tensor_by_producer
    op_tensor_end: np.ndarray  # [N] int32
    consumer_by_tensor: np.ndarray  # [E] int32 consumer ops sorted by tensor
    tensor_consumer_start: np.ndarray  # [T] int32 → consumer_by_tensor
    tensor_consumer_end: np.ndarray  # [T] int32
    op_is_input: np.ndarray  # [N] bool program inputs (SPEC §1; False for padding)
    op_type_hash: np.ndarray  # [N] int32 CRC-32 of the op type (31 bits; 0 for "" and padding)

    @property
    def bucket(self) -> Bucket:
        return Bucket(self.op_mask.shape[-1], self.tensor_mask.shape[-1],
                      self.edge_mask.shape[-1])


def next_pow2(x: int, minimum: int = 1) -> int:
    """The smallest power of two ≥ ``x`` and ≥ ``minimum``."""
    return max(minimum, 1 << max(0, int(x) - 1).bit_length())


def bucket_for(graphs: Graph | Sequence[Graph], minimum: int = 8) -> Bucket:
    """The smallest power-of-two bucket (each size ≥ ``minimum``) that holds every graph."""
    graphs = [graphs] if isinstance(graphs, Graph) else list(graphs)
    return Bucket(
        next_pow2(max(g.num_ops for g in graphs), minimum),
        next_pow2(max(g.num_tensors for g in graphs), minimum),
        next_pow2(max(g.num_edges for g in graphs), minimum),
    )


def _check_fits(graph: Graph, bucket: Bucket) -> None:
    for what, have, room in (("ops", graph.num_ops, bucket.num_ops),
                             ("tensors", graph.num_tensors, bucket.num_tensors),
                             ("consumer relations", graph.num_edges, bucket.num_edges)):
        if have > room:
            raise ValueError(f"graph {graph.name!r} has {have} {what}, more than the padding "
                             f"bucket's {room}; use a larger bucket (gsched.bucket_for)")


FLOAT32_LIMIT = 1e30  # totals beyond this would overflow the cost model's float32 sums
FLOAT32_TINY = float(np.finfo(np.float32).tiny)  # 2**-126: below it XLA may flush to zero
# Nonzero totals below this keep fewer than 26 bits in the cost model's fixed point, whose
# units are normal floats (≥ 2**-126): rejected rather than rounded (docs/design.md, "Range").
FIXED_POINT_FLOOR = 2.0**-100


def _check_float32_range(graph: Graph) -> None:
    memory = {"total tensor size plus temporary memory":
              graph.tensor_size.sum() + graph.temporary_memory.max(initial=0.0),
              "total tensor size": graph.tensor_size.sum()}
    for what, total in {**memory, "total compute cost": graph.compute_cost.sum()}.items():
        if total > FLOAT32_LIMIT:
            raise ValueError(f"graph {graph.name!r}: {what} is {total:.3g}, beyond what the "
                             f"float32 cost model supports ({FLOAT32_LIMIT:.0e}); rescale units")
    for what, total in memory.items():  # times: params.check_duration_range
        if 0 < total < FIXED_POINT_FLOOR:
            raise ValueError(f"graph {graph.name!r}: {what} is {total:.3g}, below what the "
                             f"float32 cost model keeps exact ({FIXED_POINT_FLOOR:.3g}); "
                             f"rescale units")
    for what, values in (("tensor size", graph.tensor_size),
                         ("temporary memory", graph.temporary_memory),
                         ("compute cost", graph.compute_cost)):
        with np.errstate(under="ignore"):
            single = values.astype(np.float32)
        tiny = np.flatnonzero((values > 0) & (single < FLOAT32_TINY))
        if tiny.size:
            raise ValueError(f"graph {graph.name!r}: {what} {values[tiny[0]]:.3g} (index "
                             f"{int(tiny[0])}) is below float32's smallest normal number "
                             f"({FLOAT32_TINY:.3g}), which XLA may flush to zero; rescale units")


def _padded(values: np.ndarray, size: int, dtype) -> np.ndarray:
    out = np.zeros(size, dtype)
    out[: values.shape[0]] = values
    return out


def _ranges(owner: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``[start, end)`` of each owner's run in ``owner`` sorted (stably) by owner."""
    counts = np.bincount(owner, minlength=size)
    end = np.cumsum(counts)
    return (end - counts).astype(np.int32), end.astype(np.int32)


def type_hash(op_type: str) -> int:
    """A stable 31-bit hash of an op type string: ``crc32(utf-8) & 0x7FFFFFFF``, 0 for ``""``."""
    return zlib.crc32(op_type.encode()) & 0x7FFFFFFF if op_type else 0


def pad_graph(graph: Graph, bucket: Bucket | None = None) -> PaddedGraph:
    """Pads ``graph`` into ``bucket`` (default: :func:`bucket_for`). Raises if it does not fit."""
    bucket = bucket or bucket_for(graph)
    _check_fits(graph, bucket)
    _check_float32_range(graph)
    n, t, e = graph.num_ops, graph.num_tensors, graph.num_edges
    nb, tb, eb = bucket

    producer = graph.tensor_producer
    pair_keys = np.unique(producer[graph.edge_tensor] * n + graph.edge_consumer)
    pair_producer, pair_consumer = pair_keys // max(n, 1), pair_keys % max(n, 1)
    pair_start, pair_end = _ranges(pair_producer, nb)
    tensor_by_producer = np.argsort(producer, kind="stable")
    tensor_start, tensor_end = _ranges(producer, nb)
    by_tensor = np.argsort(graph.edge_tensor, kind="stable")
    consumer_start, consumer_end = _ranges(graph.edge_tensor, tb)

    return PaddedGraph(
        op_mask=_padded(np.ones(n, bool), nb, bool),
        compute_cost=_padded(graph.compute_cost, nb, np.float32),
        temporary_memory=_padded(graph.temporary_memory, nb, np.float32),
        tensor_mask=_padded(np.ones(t, bool), tb, bool),
        tensor_producer=_padded(producer, tb, np.int32),
        tensor_size=_padded(graph.tensor_size, tb, np.float32),
        tensor_is_control=_padded(graph.tensor_is_control, tb, bool),
        edge_mask=_padded(np.ones(e, bool), eb, bool),
        edge_tensor=_padded(graph.edge_tensor, eb, np.int32),
        edge_consumer=_padded(graph.edge_consumer, eb, np.int32),
        pair_mask=_padded(np.ones(len(pair_keys), bool), eb, bool),
        pair_producer=_padded(pair_producer, eb, np.int32),
        pair_consumer=_padded(pair_consumer, eb, np.int32),
        op_pair_start=pair_start,
        op_pair_end=pair_end,
        tensor_by_producer=_padded(tensor_by_producer, tb, np.int32),
        op_tensor_start=tensor_start,
        op_tensor_end=tensor_end,
        consumer_by_tensor=_padded(graph.edge_consumer[by_tensor], eb, np.int32),
        tensor_consumer_start=consumer_start,
        tensor_consumer_end=consumer_end,
        op_is_input=_padded(graph.is_input, nb, bool),
        op_type_hash=_padded(np.array([type_hash(t) for t in graph.op_types], np.int64), nb,
                             np.int32),
    )


def topological_level(graph: PaddedGraph) -> jnp.ndarray:
    """``[N]`` int32 longest-path level of each op from the sources (0 for padding): one graph,
    no batch axis. Iterates level relaxation to its fixpoint (at most depth + 1 rounds of a
    scatter-max over the edges)."""
    n = graph.op_mask.shape[0]
    sender = graph.tensor_producer[graph.edge_tensor]

    def relax(state):
        level, _ = state
        candidate = jnp.where(graph.edge_mask, level[sender] + 1, 0)
        new = jnp.zeros(n, jnp.int32).at[graph.edge_consumer].max(candidate)
        return new, jnp.any(new != level)

    level, _ = jax.lax.while_loop(lambda s: s[1], relax,
                                  (jnp.zeros(n, jnp.int32), jnp.array(True)))
    return level


def topological_rank(graph: PaddedGraph) -> jnp.ndarray:
    """``[N]`` int32 position of each op in a topological order (longest-path level from the
    sources, ties by op index; padded ops last). Iterates level relaxation to its fixpoint
    (at most depth + 1 rounds of a scatter-max over the edges)."""
    n = graph.op_mask.shape[0]
    key = jnp.where(graph.op_mask, topological_level(graph), n) * n + jnp.arange(n)
    return jnp.zeros(n, jnp.int32).at[jnp.argsort(key)].set(jnp.arange(n, dtype=jnp.int32))


def batch_graphs(graphs: Sequence[Graph], bucket: Bucket | None = None) -> PaddedGraph:
    """Pads graphs of different sizes into one bucket and stacks them: leading axis ``[B]``."""
    bucket = bucket or bucket_for(graphs)
    padded = [pad_graph(g, bucket) for g in graphs]
    return jax.tree.map(lambda *xs: np.stack(xs), *padded)


def pad_keys(keys: np.ndarray, graph: Graph, bucket: Bucket, num_devices: int) -> np.ndarray:
    """Places a real chromosome (SPEC §2 layout ``[..., N·D + N + T·D]``, or §8.3's with ``N``
    fusion keys more) into the padded layout of ``bucket``; padding genes are 0."""
    keys = np.asarray(keys, np.float32)
    n, t, d = graph.num_ops, graph.num_tensors, num_devices
    nb, tb = bucket.num_ops, bucket.num_tensors
    base = n * (d + 1) + t * d
    if keys.shape[-1] not in (base, base + n):
        raise ValueError(f"chromosome length {keys.shape[-1]} is neither N·D + N + T·D = {base} "
                         f"nor, with fusion keys, {base + n}")
    lead = keys.shape[:-1]
    aff = np.zeros(lead + (nb, d), np.float32)
    prio = np.zeros(lead + (nb,), np.float32)
    xfer = np.zeros(lead + (tb, d), np.float32)
    aff[..., :n, :] = keys[..., : n * d].reshape(lead + (n, d))
    prio[..., :n] = keys[..., n * d: n * d + n]
    xfer[..., :t, :] = keys[..., n * d + n: base].reshape(lead + (t, d))
    parts = [aff.reshape(lead + (-1,)), prio, xfer.reshape(lead + (-1,))]
    if keys.shape[-1] == base + n:
        fuse = np.zeros(lead + (nb,), np.float32)
        fuse[..., :n] = keys[..., base:]
        parts.append(fuse)
    return np.concatenate(parts, -1)
