"""Slow, literal, pure-Python reference of the cost-model contract (SPEC §2, §3, §4).

This module is a *test oracle*: it follows the words of ``/work/shared/SPEC.md`` step by step,
favouring obviousness over speed. It reads only the host-side :class:`gsched.core.graph.Graph`
arrays and does all arithmetic exactly with :class:`fractions.Fraction` (every float64 size,
cost, latency and capacity converts to a Fraction without rounding). Floats are produced only
at the very end, for convenience.

Public functions:

* :func:`decode` — chromosome → placement (§2) → schedule (§2) → :func:`evaluate_order`.
* :func:`evaluate_order` — scores an explicitly given placement + schedule (§3, §4) after
  checking that it is a valid topological order of the extended graph that contains exactly
  the transfers required by the placement.
* Building blocks: :func:`placement_from_keys`, :func:`required_transfers`,
  :func:`dependencies`, :func:`schedule_from_keys`.

Items of a schedule are tuples ``("op", j)`` and ``("xfer", t, d)``.

Decisions where the SPEC leaves room (also listed in the module's report):

* A transfer step's usage is counted on the destination device only (``live_d + size(t)``),
  exactly as written. Counting ``live_s`` on the source would never change any peak anyway:
  a device's resident set only grows at steps that already counted it and otherwise shrinks.
* Frees happen "right after" a step: the step's usage includes every input it reads (they are
  still resident while it runs) and every output it makes, even outputs freed right after.
* A device that runs nothing has peak 0. The runtime of an empty schedule is 0.
* Keys are compared exactly as given (as Python floats, i.e. float64). NaN keys are rejected.
  Keys outside ``[0, 1]`` are accepted (only their order matters).
* Devices are free from time 0; an op with no inputs starts at ``free_d``.
"""

from __future__ import annotations

import heapq
import math
import operator
from fractions import Fraction

from gsched.core.graph import Graph

INF = math.inf

__all__ = [
    "decode",
    "evaluate_order",
    "placement_from_keys",
    "required_transfers",
    "dependencies",
    "schedule_from_keys",
]


# ----------------------------------------------------------------------------------------------
# Graph helpers (plain Python lists/sets built from the Graph arrays)
# ----------------------------------------------------------------------------------------------

def _num_devices(num_devices) -> int:
    try:
        d = operator.index(num_devices)
    except TypeError:
        raise ValueError(f"num_devices must be an integer, got {num_devices!r}") from None
    if d < 1:
        raise ValueError(f"num_devices must be >= 1, got {d}")
    return d


def _structure(graph: Graph):
    """Returns (N, T, producer[t], consumers[t] (sorted list), inputs[j] (sorted list),
    outputs[j] (sorted list))."""
    n, t_count = graph.num_ops, graph.num_tensors
    producer = [int(p) for p in graph.tensor_producer.tolist()]
    consumers = [set() for _ in range(t_count)]
    inputs = [set() for _ in range(n)]
    for t, c in zip(graph.edge_tensor.tolist(), graph.edge_consumer.tolist()):
        consumers[int(t)].add(int(c))
        inputs[int(c)].add(int(t))
    outputs = [[] for _ in range(n)]
    for t, p in enumerate(producer):
        outputs[p].append(t)
    return (n, t_count, producer, [sorted(s) for s in consumers], [sorted(s) for s in inputs],
            outputs)


def _exact(x, what: str) -> Fraction:
    x = float(x)
    if not math.isfinite(x):
        raise ValueError(f"{what} must be finite, got {x!r}")
    return Fraction(x)


# ----------------------------------------------------------------------------------------------
# SPEC §2: placement, transfers, dependencies, schedule
# ----------------------------------------------------------------------------------------------

def _check_keys(graph: Graph, keys, num_devices: int) -> list[float]:
    keys = [float(k) for k in list(_flatten(keys))]
    want = graph.chromosome_length(num_devices)
    if len(keys) != want:
        raise ValueError(f"chromosome has {len(keys)} keys, expected N*D + N + T*D = {want} "
                         f"(N={graph.num_ops}, T={graph.num_tensors}, D={num_devices})")
    for i, k in enumerate(keys):
        if math.isnan(k):
            raise ValueError(f"chromosome key {i} is NaN")
    return keys


def _flatten(keys):
    import numpy as np

    arr = np.asarray(keys)
    if arr.ndim != 1:
        raise ValueError(f"chromosome must be a 1-D sequence, got shape {arr.shape}")
    return arr.tolist()


def placement_from_keys(graph: Graph, keys, num_devices, pinned=None) -> list[int]:
    """SPEC §2 placement: op ``j`` → device with the largest ``keys[j·D + d]``; the first such
    device on exact ties. Ops in ``pinned`` ({op: device}) go to their pinned device."""
    num_devices = _num_devices(num_devices)
    keys = _check_keys(graph, keys, num_devices)
    pinned = _check_pinned(graph, pinned, num_devices)
    placement = []
    for j in range(graph.num_ops):
        if j in pinned:
            placement.append(pinned[j])
            continue
        best_d, best_key = 0, keys[j * num_devices + 0]
        for d in range(1, num_devices):
            if keys[j * num_devices + d] > best_key:  # strictly larger: first device wins ties
                best_d, best_key = d, keys[j * num_devices + d]
        placement.append(best_d)
    return placement


def _check_pinned(graph: Graph, pinned, num_devices: int) -> dict[int, int]:
    if pinned is None:
        return {}
    out = {}
    for j, d in dict(pinned).items():
        j, d = operator.index(j), operator.index(d)
        if not 0 <= j < graph.num_ops:
            raise ValueError(f"pinned op {j} does not exist (graph has {graph.num_ops} ops)")
        if not 0 <= d < num_devices:
            raise ValueError(f"op {j} pinned to device {d}, but there are {num_devices} devices")
        out[j] = d
    return out


def _check_placement(graph: Graph, placement, num_devices: int) -> list[int]:
    placement = [operator.index(p) for p in list(placement)]
    if len(placement) != graph.num_ops:
        raise ValueError(f"placement has {len(placement)} entries, expected {graph.num_ops}")
    for j, d in enumerate(placement):
        if not 0 <= d < num_devices:
            raise ValueError(f"op {j} placed on device {d}, but there are {num_devices} devices")
    return placement


def required_transfers(graph: Graph, placement, num_devices) -> list[tuple[int, int]]:
    """SPEC §2 transfers: ``(t, d)`` for each tensor ``t`` and each device ``d`` other than its
    producer's device holding ≥ 1 consumer of ``t`` (control tensors included). Sorted."""
    num_devices = _num_devices(num_devices)
    placement = _check_placement(graph, placement, num_devices)
    _, t_count, producer, consumers, _, _ = _structure(graph)
    out = set()
    for t in range(t_count):
        s = placement[producer[t]]
        for c in consumers[t]:
            if placement[c] != s:
                out.add((t, placement[c]))
    return sorted(out)


def dependencies(graph: Graph, placement, num_devices) -> dict[tuple, set[tuple]]:
    """The extended graph (SPEC §2): item → set of items it depends on.

    ``X(t, d)`` depends on the producer of ``t``. A consumer ``j`` of ``t`` depends on the
    producer of ``t`` when both are on the same device, and on ``X(t, placement[j])``
    otherwise ("instead of the producer")."""
    num_devices = _num_devices(num_devices)
    placement = _check_placement(graph, placement, num_devices)
    n, _, producer, _, inputs, _ = _structure(graph)
    deps: dict[tuple, set[tuple]] = {("op", j): set() for j in range(n)}
    for t, d in required_transfers(graph, placement, num_devices):
        deps[("xfer", t, d)] = {("op", producer[t])}
    for j in range(n):
        for t in inputs[j]:
            if placement[producer[t]] == placement[j]:
                deps[("op", j)].add(("op", producer[t]))
            else:
                deps[("op", j)].add(("xfer", t, placement[j]))
    return deps


def _priority(item, keys: list[float], n: int, num_devices: int) -> float:
    if item[0] == "op":
        return keys[num_devices * n + item[1]]
    _, t, d = item
    return keys[num_devices * n + n + t * num_devices + d]


def _heap_key(item, keys, n, num_devices):
    """Smallest heap key = runs first: largest priority, then ops before transfers, then the
    smaller op index / (tensor, device)."""
    prio = _priority(item, keys, n, num_devices)
    if item[0] == "op":
        return (-prio, 0, item[1], 0)
    return (-prio, 1, item[1], item[2])


def schedule_from_keys(graph: Graph, keys, num_devices, placement) -> list[tuple]:
    """SPEC §2 schedule: repeatedly run the ready item with the largest priority
    (op ``j``: ``keys[N·D + j]``; ``X(t, d)``: ``keys[N·D + N + t·D + d]``)."""
    num_devices = _num_devices(num_devices)
    keys = _check_keys(graph, keys, num_devices)
    n = graph.num_ops
    deps = dependencies(graph, placement, num_devices)
    waiting = {item: set(ds) for item, ds in deps.items()}
    dependents: dict[tuple, list[tuple]] = {item: [] for item in deps}
    for item, ds in deps.items():
        for dep in ds:
            dependents[dep].append(item)
    heap = [(_heap_key(item, keys, n, num_devices), item)
            for item, ds in waiting.items() if not ds]
    heapq.heapify(heap)
    order = []
    while heap:
        _, item = heapq.heappop(heap)
        order.append(item)
        for nxt in dependents[item]:
            waiting[nxt].discard(item)
            if not waiting[nxt]:
                heapq.heappush(heap, (_heap_key(nxt, keys, n, num_devices), nxt))
    if len(order) != len(deps):  # cannot happen for a validated (acyclic) Graph
        raise AssertionError("extended graph has a cycle")
    return order


# ----------------------------------------------------------------------------------------------
# Validation of an explicit schedule
# ----------------------------------------------------------------------------------------------

def _normalize_item(raw, graph: Graph, num_devices: int) -> tuple:
    try:
        seq = tuple(raw)
    except TypeError:
        raise ValueError(f"schedule item {raw!r} is not a tuple") from None
    if len(seq) == 2 and seq[0] == "op":
        j = operator.index(seq[1])
        if not 0 <= j < graph.num_ops:
            raise ValueError(f"schedule item {raw!r} names missing op {j}")
        return ("op", j)
    if len(seq) == 3 and seq[0] == "xfer":
        t, d = operator.index(seq[1]), operator.index(seq[2])
        if not 0 <= t < graph.num_tensors:
            raise ValueError(f"schedule item {raw!r} names missing tensor {t}")
        if not 0 <= d < num_devices:
            raise ValueError(f"schedule item {raw!r} names missing device {d}")
        return ("xfer", t, d)
    raise ValueError(f"schedule item {raw!r} is neither ('op', j) nor ('xfer', t, d)")


def _check_order(graph: Graph, placement: list[int], order, num_devices: int) -> list[tuple]:
    items = [_normalize_item(raw, graph, num_devices) for raw in list(order)]
    deps = dependencies(graph, placement, num_devices)
    seen = set()
    for pos, item in enumerate(items):
        if item in seen:
            raise ValueError(f"schedule item {item} appears twice (again at position {pos})")
        if item not in deps:
            raise ValueError(f"schedule item {item} at position {pos} is not a required "
                             "transfer for this placement")
        missing = deps[item] - seen
        if missing:
            raise ValueError(f"schedule item {item} at position {pos} runs before its "
                             f"dependency {min(missing)}")
        seen.add(item)
    absent = set(deps) - seen
    if absent:
        raise ValueError(f"schedule is missing item {min(absent)} "
                         f"({len(absent)} required item(s) absent)")
    return items


# ----------------------------------------------------------------------------------------------
# SPEC §3 memory and §4 runtime: one literal walk of the schedule
# ----------------------------------------------------------------------------------------------

def evaluate_order(graph: Graph, placement, order, num_devices, latency=0.0, bandwidth=INF,
                   capacity=None) -> dict:
    """Scores ``placement`` + ``order`` per SPEC §3/§4. See :func:`decode` for the result."""
    num_devices = _num_devices(num_devices)
    placement = _check_placement(graph, placement, num_devices)
    items = _check_order(graph, placement, order, num_devices)
    n, t_count, producer, consumers, inputs, outputs = _structure(graph)

    lat = _exact(latency, "latency")
    if lat < 0:
        raise ValueError(f"latency must be >= 0, got {latency!r}")
    bw = float(bandwidth)
    if math.isnan(bw) or bw <= 0:
        raise ValueError(f"bandwidth must be > 0, got {bandwidth!r}")
    bw = None if math.isinf(bw) else Fraction(bw)
    cap = None
    if capacity is not None:
        c = float(capacity)
        if math.isnan(c):
            raise ValueError("capacity is NaN")
        cap = None if c == INF else Fraction(c)  # +inf: everything feasible

    size = [Fraction(float(s)) for s in graph.tensor_size.tolist()]
    cost = [Fraction(float(c)) for c in graph.compute_cost.tolist()]
    temp = [Fraction(float(m)) for m in graph.temporary_memory.tolist()]
    transfers = {(item[1], item[2]) for item in items if item[0] == "xfer"}

    def readers(t: int, dev: int) -> set[tuple]:
        """Readers of tensor t's copy on device dev (SPEC §3)."""
        s = placement[producer[t]]
        ops_here = {("op", c) for c in consumers[t] if placement[c] == dev}
        if dev == s:
            return ops_here | {("xfer", t, d) for (tt, d) in transfers if tt == t}
        return ops_here

    # --- memory state ---
    resident: list[dict[int, Fraction]] = [dict() for _ in range(num_devices)]
    pending: dict[tuple[int, int], set[tuple]] = {}  # (t, dev) -> readers not yet run
    peaks = [Fraction(0)] * num_devices
    step_usage = []

    def live(dev: int) -> Fraction:
        return sum(resident[dev].values(), Fraction(0))

    def make_resident(t: int, dev: int) -> None:
        assert t not in resident[dev], f"tensor {t} made resident twice on device {dev}"
        resident[dev][t] = size[t]
        pending[(t, dev)] = readers(t, dev)

    def read(t: int, dev: int, reader: tuple) -> None:
        assert t in resident[dev], f"{reader} reads tensor {t} not resident on device {dev}"
        pending[(t, dev)].discard(reader)

    def free_unread(dev: int) -> None:
        for t in [t for t in resident[dev] if not pending[(t, dev)]]:
            del resident[dev][t]
            del pending[(t, dev)]

    # --- time state ---
    free_at = [Fraction(0)] * num_devices
    ready: dict[tuple[int, int], Fraction] = {}  # (t, dev) -> time t is ready on dev
    times: dict[tuple, tuple[Fraction, Fraction]] = {}

    for item in items:
        if item[0] == "op":
            j = item[1]
            d = placement[j]
            # memory: usage while j runs, then outputs resident, then frees.
            usage = live(d) + sum((size[t] for t in outputs[j]), Fraction(0)) + temp[j]
            peaks[d] = max(peaks[d], usage)
            step_usage.append((item, d, usage))
            for t in outputs[j]:
                make_resident(t, d)
            for t in inputs[j]:
                read(t, d, item)
            free_unread(d)
            # time
            start = max([free_at[d]] + [ready[(t, d)] for t in inputs[j]])
            end = start + cost[j]
            free_at[d] = end
            for t in outputs[j]:
                ready[(t, d)] = end
        else:
            _, t, d = item
            s = placement[producer[t]]
            usage = live(d) + size[t]
            peaks[d] = max(peaks[d], usage)
            step_usage.append((item, d, usage))
            make_resident(t, d)
            read(t, s, item)
            free_unread(s)
            free_unread(d)
            duration = lat + (Fraction(0) if bw is None else size[t] / bw)
            start = max(ready[(t, s)], free_at[s], free_at[d])
            end = start + duration
            free_at[s] = free_at[d] = end
            ready[(t, d)] = end
        times[item] = (start, end)

    assert all(not r for r in resident), f"tensors still resident after the schedule: {resident}"

    peak = max(peaks) if peaks else Fraction(0)
    runtime = max((e for _, e in times.values()), default=Fraction(0))
    if cap is None:
        feasible = True
        excess = [Fraction(0)] * num_devices
    else:
        feasible = all(p <= cap for p in peaks)
        excess = [max(Fraction(0), p - cap) for p in peaks]
    return {
        "placement": list(placement),
        "order": list(items),
        "device_peaks": [float(p) for p in peaks],
        "device_peaks_exact": list(peaks),
        "peak_memory": float(peak),
        "peak_memory_exact": peak,
        "runtime": float(runtime),
        "runtime_exact": runtime,
        "feasible": feasible,
        "device_excess_exact": excess,
        "times": {k: (float(a), float(b)) for k, (a, b) in times.items()},
        "times_exact": times,
        "step_usage": step_usage,  # [(item, device, exact usage counted at that step)]
    }


def decode(graph: Graph, keys, num_devices, pinned=None, latency=0.0, bandwidth=INF,
           capacity=None) -> dict:
    """Decodes a chromosome (SPEC §2) and scores it (SPEC §3, §4).

    Args:
      graph: a validated :class:`Graph`.
      keys: ``N·D + N + T·D`` floats (ValueError otherwise).
      num_devices: ``D ≥ 1``.
      pinned: optional ``{op: device}``; pinned ops ignore their affinities.
      latency, bandwidth: transfer time ``latency + size / bandwidth``.
      capacity: optional per-device memory capacity; ``feasible`` = all peaks ≤ capacity.

    Returns a dict: ``placement`` (list of ints), ``order`` (list of ``("op", j)`` /
    ``("xfer", t, d)``), ``device_peaks`` (floats) and ``device_peaks_exact`` (Fractions),
    ``peak_memory`` (+ ``_exact``), ``runtime`` (+ ``_exact``), ``feasible``,
    ``device_excess_exact``, ``times`` (item → (start, end) floats, + ``times_exact``),
    ``step_usage``.
    """
    num_devices = _num_devices(num_devices)
    keys = _check_keys(graph, keys, num_devices)
    placement = placement_from_keys(graph, keys, num_devices, pinned)
    order = schedule_from_keys(graph, keys, num_devices, placement)
    return evaluate_order(graph, placement, order, num_devices, latency=latency,
                          bandwidth=bandwidth, capacity=capacity)
