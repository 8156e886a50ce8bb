"""Host-side computation graph (SPEC §1): ops, tensors, consumers, sizes and costs.

A :class:`Graph` is an immutable bundle of NumPy arrays. It is validated on construction, so
every graph that exists is acyclic, references only existing ops and tensors, and has finite,
non-negative sizes and costs. Device-side (padded, jittable) views live in ``gsched.core.padding``.
"""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np


class GraphError(ValueError):
    """A graph violates SPEC §1 (cycle, missing reference, bad size or cost, ...)."""


@dataclasses.dataclass(frozen=True, eq=False)
class Graph:
    """A computation graph with ``N`` ops, ``T`` tensors and ``E`` consumer relations.

    Attributes:
      compute_cost: ``[N]`` float64, time units, ≥ 0.
      temporary_memory: ``[N]`` float64, bytes alive only while the op runs, ≥ 0.
      tensor_producer: ``[T]`` int64, the op that produces each tensor.
      tensor_size: ``[T]`` float64, bytes, ≥ 0 (0 for control dependencies).
      tensor_is_control: ``[T]`` bool, True for control-dependency tensors.
      tensor_port: ``[T]`` int64, the producer's output port (−1 for control tensors).
      edge_tensor: ``[E]`` int64, tensor read by each consumer relation.
      edge_consumer: ``[E]`` int64, the op that reads it. Each (tensor, consumer) pair is unique.
      op_names: ``N`` names (default ``"op{j}"``).
      op_types: ``N`` op type strings (default ``""``).
      op_ids: ``[N]`` int64, ids used by the source format (CostGraphDef ``id``), default ``j``.
      name: the graph's name (e.g. the file stem).
      is_input: ``[N]`` bool, True for program inputs (SPEC §1: arguments of an imported
        program; no dependencies, scheduled before every other item in op index order).
        Default: no inputs.
      op_scopes: ``N`` scope strings, the ``jax.named_scope`` / ``name_stack`` path of an
        imported op (default ``""``).
      op_flops: ``[N]`` float64, floating-point operations of each op (finite, ≥ 0; default
        0). Importers set ``compute_cost = op_flops / peak_flops`` (SPEC §8.1).
    """

    compute_cost: np.ndarray
    temporary_memory: np.ndarray
    tensor_producer: np.ndarray
    tensor_size: np.ndarray
    tensor_is_control: np.ndarray
    tensor_port: np.ndarray
    edge_tensor: np.ndarray
    edge_consumer: np.ndarray
    op_names: tuple[str, ...]
    op_types: tuple[str, ...]
    op_ids: np.ndarray
    name: str = ""
    is_input: np.ndarray | None = None
    op_scopes: tuple[str, ...] | None = None
    op_flops: np.ndarray | None = None

    def __post_init__(self):
        if self.is_input is None:
            object.__setattr__(self, "is_input", np.zeros(self.num_ops, bool))
        if self.op_scopes is None:
            object.__setattr__(self, "op_scopes", ("",) * self.num_ops)
        else:
            object.__setattr__(self, "op_scopes", tuple(self.op_scopes))
        if self.op_flops is None:
            object.__setattr__(self, "op_flops", np.zeros(self.num_ops, np.float64))
        validate(self)

    @property
    def has_inputs(self) -> bool:
        """Whether any op is a program input."""
        return bool(self.is_input.any())

    @property
    def num_ops(self) -> int:
        return int(self.compute_cost.shape[0])

    @property
    def num_tensors(self) -> int:
        return int(self.tensor_size.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.edge_tensor.shape[0])

    def chromosome_length(self, num_devices: int) -> int:
        """SPEC §2: ``N·D + N + T·D`` keys."""
        return self.num_ops * num_devices + self.num_ops + self.num_tensors * num_devices

    def gnn_edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The multigraph view (SPEC §1, REGAL §3.3): one directed edge per
        (producer, tensor, consumer) triple, parallel edges kept.

        Returns ``(senders [E], receivers [E], sizes [E], is_control [E])``.
        """
        t = self.edge_tensor
        return (self.tensor_producer[t], self.edge_consumer, self.tensor_size[t],
                self.tensor_is_control[t])

    def topology_hash(self) -> str:
        """A hash of the topology alone (ops, producers, consumer relations), ignoring sizes,
        costs and names: augmented copies of one graph share it (REGAL A.1 dedup/splits)."""
        h = hashlib.sha256()
        for a in (np.int64(self.num_ops), self.tensor_producer, self.tensor_is_control,
                  self.edge_tensor, self.edge_consumer):
            h.update(np.ascontiguousarray(np.asarray(a, np.int64)).tobytes())
            h.update(b"|")
        return h.hexdigest()

    def replace(self, **changes) -> "Graph":
        """A copy with some fields replaced (validated again)."""
        return dataclasses.replace(self, **changes)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Graph):
            return NotImplemented
        return all(
            _field_equal(getattr(self, f.name), getattr(other, f.name))
            for f in dataclasses.fields(self))

    __hash__ = None


def _field_equal(a, b) -> bool:
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and bool(np.array_equal(a, b))
    return a == b


def make_graph(
    *,
    compute_cost,
    temporary_memory,
    tensor_producer,
    tensor_size,
    edge_tensor,
    edge_consumer,
    tensor_is_control=None,
    tensor_port=None,
    op_names=None,
    op_types=None,
    op_ids=None,
    name: str = "",
    is_input=None,
    op_scopes=None,
    op_flops=None,
) -> Graph:
    """Builds and validates a :class:`Graph` from array-likes, filling the optional fields.

    Consumer relations are taken as given; a repeated (tensor, consumer) pair is an error
    (SPEC §1: an op reading a tensor through several inputs is one consumer — formats
    deduplicate before calling this).
    """
    compute_cost = np.asarray(compute_cost, np.float64).reshape(-1)
    n = compute_cost.shape[0]
    tensor_size = np.asarray(tensor_size, np.float64).reshape(-1)
    t = tensor_size.shape[0]
    if tensor_is_control is None:
        tensor_is_control = np.zeros(t, bool)
    tensor_is_control = np.asarray(tensor_is_control, bool).reshape(-1)
    if tensor_port is None:
        tensor_port = _default_ports(np.asarray(tensor_producer, np.int64).reshape(-1),
                                     tensor_is_control)
    return Graph(
        compute_cost=compute_cost,
        temporary_memory=np.asarray(temporary_memory, np.float64).reshape(-1),
        tensor_producer=np.asarray(tensor_producer, np.int64).reshape(-1),
        tensor_size=tensor_size,
        tensor_is_control=tensor_is_control,
        tensor_port=np.asarray(tensor_port, np.int64).reshape(-1),
        edge_tensor=np.asarray(edge_tensor, np.int64).reshape(-1),
        edge_consumer=np.asarray(edge_consumer, np.int64).reshape(-1),
        op_names=tuple(op_names) if op_names is not None else tuple(f"op{j}" for j in range(n)),
        op_types=tuple(op_types) if op_types is not None else ("",) * n,
        op_ids=(np.asarray(op_ids, np.int64).reshape(-1) if op_ids is not None
                else np.arange(n, dtype=np.int64)),
        name=name,
        is_input=None if is_input is None else np.asarray(is_input, bool).reshape(-1),
        op_scopes=None if op_scopes is None else tuple(op_scopes),
        op_flops=None if op_flops is None else np.asarray(op_flops, np.float64).reshape(-1),
    )


def _default_ports(producer: np.ndarray, is_control: np.ndarray) -> np.ndarray:
    """Port k = k-th non-control tensor of its producer, in tensor order; −1 for control."""
    ports = np.full(producer.shape, -1, np.int64)
    seen: dict[int, int] = {}
    for i, (p, c) in enumerate(zip(producer.tolist(), is_control.tolist())):
        if not c:
            ports[i] = seen.get(p, 0)
            seen[p] = ports[i] + 1
    return ports


def _op_label(graph: Graph, j: int) -> str:
    name = graph.op_names[j] if 0 <= j < len(graph.op_names) else "?"
    return f"op {j} ({name!r})"


def _reject_first(bad: np.ndarray, message) -> None:
    """Raises ``GraphError(message(k))`` for the first index ``k`` where ``bad`` is True."""
    hits = np.flatnonzero(bad)
    if hits.size:
        raise GraphError(message(int(hits[0])))


def validate(graph: Graph) -> None:
    """Raises :class:`GraphError` naming the offending op if ``graph`` breaks SPEC §1."""
    n, t, e = graph.num_ops, graph.num_tensors, graph.num_edges
    lengths = {
        "temporary_memory": (graph.temporary_memory.shape, (n,)),
        "op_ids": (graph.op_ids.shape, (n,)),
        "tensor_producer": (graph.tensor_producer.shape, (t,)),
        "tensor_is_control": (graph.tensor_is_control.shape, (t,)),
        "tensor_port": (graph.tensor_port.shape, (t,)),
        "edge_consumer": (graph.edge_consumer.shape, (e,)),
        "is_input": (np.shape(graph.is_input), (n,)),
        "op_flops": (np.shape(graph.op_flops), (n,)),
    }
    for field, (got, want) in lengths.items():
        if got != want:
            raise GraphError(f"{field} has shape {got}, expected {want}")
    if len(graph.op_names) != n or len(graph.op_types) != n or len(graph.op_scopes) != n:
        raise GraphError(f"op_names/op_types/op_scopes must have {n} entries")
    if not all(isinstance(s, str) for s in graph.op_scopes):
        raise GraphError("op_scopes must be strings")
    if np.asarray(graph.is_input).dtype != bool:
        raise GraphError(f"is_input must be a bool array, got dtype {graph.is_input.dtype}")

    ids, first = np.unique(graph.op_ids, return_index=True)
    if ids.size != n:
        j = int(np.setdiff1d(np.arange(n), first)[0])
        raise GraphError(f"{_op_label(graph, j)} repeats op id {int(graph.op_ids[j])}")
    if np.asarray(graph.op_flops).dtype != np.float64:
        raise GraphError(f"op_flops must be a float64 array, got dtype {graph.op_flops.dtype}")
    for field in ("compute_cost", "temporary_memory", "op_flops"):
        values = getattr(graph, field)
        _reject_first(~np.isfinite(values) | (values < 0), lambda j: (
            f"{_op_label(graph, j)} has invalid {field} {float(values[j])!r} "
            "(must be finite and >= 0)"))
    producer, size = graph.tensor_producer, graph.tensor_size
    _reject_first((producer < 0) | (producer >= n), lambda k: (
        f"tensor {k} has missing producer op {int(producer[k])} (graph has {n} ops)"))
    _reject_first(~np.isfinite(size) | (size < 0), lambda k: (
        f"{_op_label(graph, int(producer[k]))} produces tensor {k} with invalid size "
        f"{float(size[k])!r} (must be finite and >= 0)"))
    _reject_first(graph.tensor_is_control & (size != 0), lambda k: (
        f"control tensor {k} of {_op_label(graph, int(producer[k]))} must have size 0"))
    consumer, tensor = graph.edge_consumer, graph.edge_tensor
    _reject_first((consumer < 0) | (consumer >= n), lambda k: (
        f"consumer relation {k} names missing op {int(consumer[k])} (graph has {n} ops)"))
    _reject_first((tensor < 0) | (tensor >= t), lambda k: (
        f"{_op_label(graph, int(consumer[k]))} reads missing tensor {int(tensor[k])} "
        f"(graph has {t} tensors)"))
    pairs = graph.edge_tensor * max(n, 1) + graph.edge_consumer
    uniq, counts = np.unique(pairs, return_counts=True)
    if uniq.size != e:
        k = int(np.flatnonzero(np.isin(pairs, uniq[counts > 1]))[0])
        raise GraphError(f"{_op_label(graph, int(graph.edge_consumer[k]))} is listed twice as a "
                         f"consumer of tensor {int(graph.edge_tensor[k])}")
    _reject_first(graph.is_input[consumer], lambda k: (
        f"{_op_label(graph, int(consumer[k]))} is a program input but reads tensor "
        f"{int(tensor[k])} (a program input has no dependencies)"))
    cycle_op = find_cycle_op(n, graph.tensor_producer[graph.edge_tensor], graph.edge_consumer)
    if cycle_op is not None:
        raise GraphError(f"graph has a cycle through {_op_label(graph, cycle_op)}")


def _successors(n: int, senders: np.ndarray, receivers: np.ndarray) -> list[list[int]]:
    succ: list[list[int]] = [[] for _ in range(n)]
    for s, r in zip(senders.tolist(), receivers.tolist()):
        succ[s].append(r)
    return succ


def find_cycle_op(n: int, senders: np.ndarray, receivers: np.ndarray) -> int | None:
    """Kahn's algorithm on op→op edges; returns an op on a cycle, or None if acyclic."""
    if bool(np.all(senders < receivers)):  # ops already numbered in a topological order
        return None
    succ = _successors(n, senders, receivers)
    indeg = np.bincount(receivers, minlength=n).tolist()
    stack = [j for j in range(n) if indeg[j] == 0]
    seen = 0
    while stack:
        j = stack.pop()
        seen += 1
        for c in succ[j]:
            indeg[c] -= 1
            if indeg[c] == 0:
                stack.append(c)
    if seen == n:
        return None
    # Walk backwards along unfinished predecessors until an op repeats: it lies on a cycle.
    pred_of = {}
    for s, r in zip(senders.tolist(), receivers.tolist()):
        if indeg[r] > 0 and indeg[s] > 0:
            pred_of.setdefault(r, s)
    j = next(k for k in range(n) if indeg[k] > 0)
    visited = set()
    while j not in visited:
        visited.add(j)
        j = pred_of[j]
    return int(j)


def topological_order(graph: Graph) -> np.ndarray:
    """``[N]`` one topological order of the ops (smallest index first among ready ops)."""
    import heapq

    n = graph.num_ops
    receivers = graph.edge_consumer
    succ = _successors(n, graph.tensor_producer[graph.edge_tensor], receivers)
    indeg = np.bincount(receivers, minlength=n).tolist()
    heap = [j for j in range(n) if indeg[j] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        j = heapq.heappop(heap)
        out.append(j)
        for c in succ[j]:
            indeg[c] -= 1
            if indeg[c] == 0:
                heapq.heappush(heap, c)
    return np.asarray(out, np.int64)
