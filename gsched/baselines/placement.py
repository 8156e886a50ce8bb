"""Classical placement baselines of the GDP and GO papers (issue #13 §2).

GDP (and GO after it) compares its learned placer with three hand-made placements:

* **TF default** — every op on one device. This is :func:`single_device` in
  :mod:`gsched.baselines.heuristics` (e.g. ``HEURISTICS["xla_list"]``) and is not repeated here.
* **Human expert** (:func:`human_expert`) — the GNMT-style model-parallel placement: one LSTM
  layer per device, i.e. contiguous *layers* of the model split evenly over the devices.
* **METIS** (:func:`metis`) — a balanced min-cut partition of the op graph by the METIS graph
  partitioner, through the optional ``pymetis`` package; without it, the repository's own
  balanced min-cut Fiduccia–Mattheyses partitioner (:func:`kl_partition`) stands in.

Every baseline is called as ``fn(graph, num_devices, seed)`` and returns
``(op_order [N] int64, placement [N] int64, info)``; the order is
:func:`topological_order` (the papers measure a placement; each device runs its ops in that
relative order, and the dynamic schedulers of SPEC §8.2 reorder ready ops anyway).

Decisions where the papers are silent:

* **Layers.** An op's scope (``Graph.op_scopes``, e.g. ``"decoder/layer_2/attention"``) is a
  ``/``-separated path (empty components dropped). A *layer* is the scope truncated to its
  first ``K`` components, with ``K`` the smallest depth at which the graph has at least ``D``
  distinct layers (the full depth when no depth has that many). Layers are ordered by the
  topological position of their first op. E.g. GNMT scopes ``encoder/layer_i/...`` and
  ``decoder/layer_i/...`` give ``{encoder, decoder}`` for D = 2 and the eight
  ``{en,de}coder/layer_i`` for D = 4 or 8.
* **Balance.** An op weighs ``max(compute_cost, tiny)`` (``tiny`` = 1e-9 × the largest cost, or
  1 when every cost is 0, so cost-free graphs split by op count); a layer weighs the sum over
  its ops. Contiguous runs of layers go to devices 0, 1, …, cut by a greedy prefix split at the
  cumulative-weight quantiles (:func:`contiguous_split`): the boundary before device ``k`` is
  the prefix whose weight is closest to ``k/D`` of the total, pushed forward/back as needed so
  every device gets at least one layer. This is not always the min-max optimum, but it is
  O(L log L) and exact on evenly sized layers. With fewer layers than devices, layer ``l`` goes
  to device ``l`` and the last devices stay idle.
* **Unscoped ops and program inputs** (weights, optimizer state, the batch: SPEC §1) have no
  layer of their own and do not count toward the balance. Each goes with its *first consumer*
  (the consumer that comes first in the topological order) — a weight lives where it is
  read; an unscoped op with no consumer goes with its *last producer* (the producer of its
  inputs that comes last in the topological order); an isolated one goes to device 0.
  Resolution walks the topological order backwards, then forwards, so chains of unscoped ops
  follow the scoped op they lead to (or come from).
* **No scopes at all** (no ordinary op has a non-empty scope, e.g. a CostGraphDef): the
  topological split — contiguous chunks of :func:`topological_order` cut by the same quantile
  rule over per-op weights.
* **METIS graph.** Vertices are ops; an undirected edge joins two ops whenever one reads a
  tensor of the other, weighted by the bytes of all such tensors summed (METIS needs
  integers > 0: weights are used as they are when they are integers summing to at most 2^28,
  else scaled to that sum; an edge of only control / 0-byte tensors weighs 1). Vertex weights
  are ``compute_cost`` scaled proportionally to integers ≥ 1 (the largest to 2^16 unless the
  sum would pass 2^26; all 1 when every cost is 0). METIS balances
  these vertex weights with its default 3 % imbalance; the Fiduccia–Mattheyses fallback
  balances op counts (its documented behaviour) and minimizes the bytes transferred exactly
  (hyperedges, :func:`gsched.baselines.heuristics.transfer_bytes`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gsched.baselines.heuristics import kl_partition, op_structure
from gsched.core.graph import Graph, topological_order

__all__ = ["PLACEMENT_BASELINES", "contiguous_split", "human_expert", "metis", "metis_csr",
           "scope_layers"]

_METIS_EDGE_TOTAL = 2 ** 28  # edge weights sum to at most this (each appears twice in CSR)
_METIS_VERTEX_MAX = 2 ** 16  # the largest vertex weight (the resolution of the balance)
_METIS_VERTEX_TOTAL = 2 ** 26  # vertex weights sum to at most this (plus N for the ≥ 1 floor)


def _check_devices(num_devices) -> int:
    if isinstance(num_devices, bool) or int(num_devices) != num_devices or num_devices < 1:
        raise ValueError(f"num_devices must be an integer >= 1, got {num_devices!r}")
    return int(num_devices)


def _op_weights(cost: np.ndarray) -> np.ndarray:
    """``[N]`` ``max(cost, tiny)``: tiny = 1e-9 × max cost, or 1 when all costs are 0."""
    top = float(cost.max(initial=0.0))
    return np.maximum(cost, 1e-9 * top if top > 0 else 1.0)


def contiguous_split(weights, num_devices: int) -> np.ndarray:
    """``[L]`` a device per item for items in sequence with ``weights`` ``[L]`` (> 0):
    devices are non-decreasing along the sequence, each a contiguous run.

    With ``L <= D`` item ``l`` goes to device ``l``. Otherwise the boundary before device
    ``k`` (``k = 1..D-1``) is the prefix length ``i`` whose weight ``C_i`` is closest to
    ``k·C_L/D`` (the earlier on ties), clamped to ``[b_{k-1} + 1, L − (D − k)]`` so every
    device gets at least one item.
    """
    d = _check_devices(num_devices)
    weights = np.asarray(weights, np.float64).reshape(-1)
    n = weights.size
    if n <= d:
        return np.arange(n, dtype=np.int64)
    cumulative = np.concatenate([[0.0], np.cumsum(weights)])
    bounds = [0]
    for k in range(1, d):
        target = cumulative[-1] * k / d
        i = int(np.searchsorted(cumulative, target))  # cumulative[i-1] < target <= cumulative[i]
        if i > 0 and (i > n or target - cumulative[i - 1] <= cumulative[i] - target):
            i -= 1
        bounds.append(min(max(i, bounds[-1] + 1), n - (d - k)))
    bounds.append(n)
    return np.repeat(np.arange(d, dtype=np.int64), np.diff(bounds))


def _scope_parts(scope: str) -> tuple[str, ...]:
    return tuple(p for p in scope.split("/") if p)


def scope_layers(graph: Graph, num_devices: int) -> np.ndarray:
    """``[N]`` the layer of each op (``-1`` for unscoped ops and program inputs), layers
    numbered ``0..L-1`` by the topological position of their first op; see the module
    docstring for the depth rule."""
    d = _check_devices(num_devices)
    parts = [() if graph.is_input[j] else _scope_parts(s) for j, s in enumerate(graph.op_scopes)]
    depth = max((len(p) for p in parts), default=0)
    layer = np.full(graph.num_ops, -1, np.int64)
    if depth == 0:
        return layer
    for k in range(1, depth + 1):
        keys = [p[:k] if p else None for p in parts]
        if len({key for key in keys if key is not None}) >= d:
            break
    ids: dict[tuple[str, ...], int] = {}
    for j in topological_order(graph).tolist():
        if keys[j] is not None:
            layer[j] = ids.setdefault(keys[j], len(ids))
    return layer


def _attach_unassigned(graph: Graph, placement: np.ndarray, order: np.ndarray) -> None:
    """Places every op with ``placement == -1`` in place: first consumer, else last producer
    (by topological position), else device 0."""
    s = op_structure(graph)
    position = np.empty(graph.num_ops, np.int64)
    position[order] = np.arange(graph.num_ops)
    free = placement < 0
    for j in order[::-1].tolist():  # consumers come later: already placed when reached
        if free[j] and s.users[j]:
            placement[j] = placement[min(s.users[j], key=lambda c: position[c])]
    for j in order.tolist():  # sinks: producers come earlier
        if placement[j] < 0:
            placement[j] = (placement[max(s.operands[j], key=lambda p: position[p])]
                            if s.operands[j] else 0)


def human_expert(graph: Graph, num_devices: int, seed: int = 0
                 ) -> tuple[np.ndarray, np.ndarray, dict]:
    """GDP's "Human expert" row: contiguous layers split evenly over the devices.

    Returns ``(topological order [N], placement [N], {"split": "scope" | "topological",
    "layers": L})`` (``L`` = 0 for the topological split). ``seed`` is unused (deterministic).
    """
    d = _check_devices(num_devices)
    order = topological_order(graph)
    weight = _op_weights(graph.compute_cost)
    layer = scope_layers(graph, d)
    num_layers = int(layer.max(initial=-1)) + 1
    if num_layers == 0:
        placement = np.empty(graph.num_ops, np.int64)
        placement[order] = contiguous_split(weight[order], d)
        return order, placement, {"split": "topological", "layers": 0}
    scoped = layer >= 0
    layer_weight = np.bincount(layer[scoped], weight[scoped], minlength=num_layers)
    placement = np.full(graph.num_ops, -1, np.int64)
    placement[scoped] = contiguous_split(layer_weight, d)[layer[scoped]]
    _attach_unassigned(graph, placement, order)
    return order, placement, {"split": "scope", "layers": num_layers}


def _edge_ints(values: np.ndarray) -> np.ndarray:
    """Edge bytes (≥ 0) as int64 ≥ 1: as they are when integers summing to at most
    ``_METIS_EDGE_TOTAL``, else scaled to that sum and rounded."""
    total = float(values.sum())
    if total <= 0:
        return np.ones(values.shape, np.int64)
    exact = total <= _METIS_EDGE_TOTAL and np.array_equal(values, np.round(values))
    scale = 1.0 if exact else _METIS_EDGE_TOTAL / total
    return np.maximum(np.round(values * scale), 1).astype(np.int64)


def _vertex_ints(cost: np.ndarray) -> np.ndarray:
    """Compute costs (≥ 0, any unit) as int64 ≥ 1, proportional: the largest becomes
    ``_METIS_VERTEX_MAX`` unless the sum would pass ``_METIS_VERTEX_TOTAL``; all 1 when every
    cost is 0."""
    total, top = float(cost.sum()), float(cost.max(initial=0.0))
    if total <= 0:
        return np.ones(cost.shape, np.int64)
    scale = min(_METIS_VERTEX_MAX / top, _METIS_VERTEX_TOTAL / total)
    return np.maximum(np.round(cost * scale), 1).astype(np.int64)


def metis_csr(graph: Graph) -> tuple[list[int], list[int], list[int], list[int]]:
    """The op graph in METIS's CSR form: ``(xadj [N+1], adjncy [2M], vweights [N],
    eweights [2M])`` as Python int lists, neighbours of each op in increasing index order;
    see the module docstring for the weights."""
    n = graph.num_ops
    producer = graph.tensor_producer[graph.edge_tensor]
    consumer = graph.edge_consumer
    size = graph.tensor_size[graph.edge_tensor]
    lo, hi = np.minimum(producer, consumer), np.maximum(producer, consumer)
    pair, inverse = np.unique(lo * max(n, 1) + hi, return_inverse=True)
    pair_bytes = np.bincount(inverse.reshape(-1), size, minlength=pair.size)
    pair_weight = _edge_ints(pair_bytes)
    u, v = pair // max(n, 1), pair % max(n, 1)
    src = np.concatenate([u, v])
    dst = np.concatenate([v, u])
    w = np.concatenate([pair_weight, pair_weight])
    by = np.lexsort((dst, src))
    xadj = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=n))])
    vweights = _vertex_ints(graph.compute_cost)
    return (xadj.astype(np.int64).tolist(), dst[by].astype(np.int64).tolist(),
            vweights.tolist(), w[by].astype(np.int64).tolist())


def metis(graph: Graph, num_devices: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, dict]:
    """GDP's "METIS" row: a balanced min-cut partition of the op graph.

    Uses ``pymetis.part_graph`` when ``pymetis`` is importable, else :func:`kl_partition`
    (Fiduccia–Mattheyses recursive bisection, ``seed`` passed on; METIS itself is
    deterministic here). Returns ``(topological order [N], placement [N],
    {"partitioner": "pymetis" | "fiduccia_mattheyses" | "none"})`` — ``"none"`` for D = 1,
    where every op is on device 0 and no partitioner runs.
    """
    d = _check_devices(num_devices)
    order = topological_order(graph)
    n = graph.num_ops
    if d == 1 or n == 0:
        return order, np.zeros(n, np.int64), {"partitioner": "none"}
    try:
        import pymetis
    except ImportError:
        pymetis = None
    if pymetis is None:
        return (order, kl_partition(graph, d, seed=seed),
                {"partitioner": "fiduccia_mattheyses"})
    xadj, adjncy, vweights, eweights = metis_csr(graph)
    _, parts = pymetis.part_graph(d, xadj=xadj, adjncy=adjncy, vweights=vweights,
                                  eweights=eweights)
    placement = np.asarray(parts, np.int64).reshape(-1)
    if placement.shape != (n,) or placement.min() < 0 or placement.max() >= d:
        raise ValueError(f"pymetis returned an invalid partition for {n} ops and {d} devices: "
                         f"{placement.tolist()[:20]}")
    return order, placement, {"partitioner": "pymetis"}


PlacementBaseline = Callable[[Graph, int, int], tuple[np.ndarray, np.ndarray, dict]]

PLACEMENT_BASELINES: dict[str, tuple[str, PlacementBaseline]] = {
    "human_expert": (("GDP's human expert: contiguous scope layers split evenly over devices "
                      "(topological split without scopes)"), human_expert),
    "metis": ("GDP's METIS: balanced min-cut op partition (pymetis, else Fiduccia–Mattheyses)",
              metis),
}
"""Placement baselines by name: ``(summary, fn(graph, num_devices, seed) -> (op_order [N],
placement [N], info))``."""
