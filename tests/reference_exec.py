"""Slow, literal, pure-Python reference of SPEC §1 program inputs and §8 (execution model).

This module is a *test oracle* for ``/work/shared/SPEC.md`` §1 ("Program inputs") and §8
(roofline kernel time, the ``"priority"`` / ``"fifo"`` event-driven schedulers with
asynchronous copy-in streams, fusion by priority with group contraction). It follows the words
of the SPEC step by step, favouring obviousness over speed, and does all arithmetic exactly
with :class:`fractions.Fraction` (every float64 size, cost, latency, bandwidth and capacity
converts to a Fraction without rounding). Floats are produced only at the very end.

It reads only the host-side arrays of a :class:`gsched.Graph` and reuses from
``tests/reference_spec.py`` (the §2–§4 oracle) only the §2 placement rule
(:func:`reference_spec.placement_from_keys`, pins included). Everything else — the contracted
program, §2 transfers and dependencies, the §2 list schedule, the §3 peak-memory walk, the §4
runtime and the §8.2 event loop — is written out again here on the contracted program, so
that with the defaults (``scheduler="list"``, no fusion, ``hbm_bandwidth=inf``,
``launch_overhead=0``, no program inputs) the result can be checked to equal
:func:`reference_spec.decode` exactly (tests/test_reference_exec.py does).

Public functions:

* :func:`evaluate` — the one entry point: chromosome → placement (§2) → fusion groups (§8.3)
  → contracted program → schedule (§2 list, or §8.2 ``"priority"`` / ``"fifo"``) → §3 memory,
  §4 / §8.2 times with §8.1 kernel times.
* Building blocks: :func:`program_inputs` (§1), :func:`fusion_groups` (§8.3),
  :func:`contract` (§8.3), :func:`kernel_time` (§8.1), :func:`transfers` and
  :func:`dependencies` (§2 on the contracted program), :func:`list_schedule` (§2 + §1),
  :func:`list_times` (§4), :func:`dynamic_schedule` (§8.2), :func:`memory_walk` (§3).

Items are tuples ``("op", k)`` (``k`` the op index, or with fusion the index of the kernel's
root) and ``("xfer", t, d)`` (``t`` the *original* tensor index).

Decisions where the SPEC leaves room:

1. **Program inputs** come from ``inputs`` (op indices, or a boolean mask of shape ``[N]``),
   else from ``getattr(graph, "is_input", None)`` (a boolean mask; ``None`` → no inputs).
   An input that reads any tensor — data *or* control — is rejected (``ValueError`` naming
   the op): §1 "it has no dependencies". Repeated indices count once.
2. **List scheduler + inputs**: the schedule is every input op in op index order, then the §2
   priority sort of all remaining items (inputs count as already scheduled). Transfers of an
   input's tensors come after all inputs. §4 times then follow from this order as usual.
3. **Dynamic schedulers + inputs**: on a compute stream, a ready input outranks every other
   item; among inputs the smaller op index wins. The stream choice of §8.2 is unchanged, so
   inputs come first per device, not globally (as §8.2 says).
4. **Inputs are ordinary kernels** for §8.1: an input op lasts
   ``max(c, b / hbm_bandwidth) + launch_overhead`` like any op.
5. **Kernel bytes (§8.1)**: ``b`` = Σ sizes of the distinct tensors the kernel reads (for a
   group: the tensors read from outside the group) + Σ sizes of the tensors it writes (for a
   group: the root's outputs; internal tensors count neither way). Control tensors are
   included; they have size 0 so this never matters. A transferred copy has the size of the
   tensor. With ``hbm_bandwidth = inf`` the memory term is 0, so the kernel lasts ``c``
   (+ overhead).
6. **Transfers are not kernels**: ``X(t, d)`` lasts ``latency + size(t) / bandwidth`` under
   every scheduler — no roofline term, no ``launch_overhead``. Under ``"list"`` a transfer
   is synchronous as in §4 (occupies source and destination); under ``"priority"``/``"fifo"``
   it occupies only the copy-in stream of ``d`` (§8.2).
7. **Fusion candidate (§8.3)**: op ``v`` is a candidate iff its fusion key is ≥ 0.5, it is not
   a program input, none of its output tensors is a graph output (a tensor with no consumers),
   and the set of distinct ops that read *any* of its output tensors (data and control
   together) is exactly ``{c}`` with ``c`` placed on ``v``'s device. So an op with several
   output tensors all read by the same op ``c`` is a candidate, and an op with no output
   tensors (zero consumers) is not. Candidacy is decided once, before any merge.
8. **Merging**: candidates are visited in descending fusion key, ties by smaller op index.
   When ``v`` is visited it is still the root of its own group (only ``v``'s own visit can
   merge it away). "The group of ``c``" is the group that currently contains ``c``. The merged
   group's *internal bytes* are Σ sizes of the tensors whose producer is in the merged group
   and that at least one op of the merged group reads; the merge is skipped iff that sum is
   strictly greater than ``fusion_capacity`` (equal is allowed). A skipped candidate stays the
   root of its group and is not visited again.
9. **Contraction**: a group becomes the kernel ``("op", root)``. Its device, scheduling
   priority (``keys[N·D + root]``) and tie-breaking index are the root's. Its outputs are the
   root's output tensors, which keep their *original* tensor indices; so a transfer
   ``X(t, d)`` of a kernel output uses the original key ``keys[N·D + N + t·D + d]`` and ties
   between transfers compare original ``(t, d)``. The transfer keys of internal tensors are
   ignored. Its inputs are the distinct tensors its ops read that are produced outside the
   group, each read once by the kernel (one consumer, §1), and ``compute_cost`` and
   ``temporary_memory`` are the sums over its ops. Internal tensors are never allocated,
   transferred or counted anywhere. A contracted kernel is placed where its root is (all
   members are on that device anyway).
10. **Event loop (§8.2)**: an item's ready time becomes known once all its §2 dependencies have
    *started*; it is the latest end time of those dependencies (an op: the time its inputs are
    ready on its device, via the producer on the same device or the transfer into it; a
    transfer ``X(t, d)``: the end of ``t``'s producer, i.e. ``t`` ready on its source), and 0
    for an item with no dependencies. The stream with the smallest
    ``max(free time, smallest known ready time among its unstarted items)`` goes next; ties:
    compute before copy-in, then the smaller device. On it, among its items whose known ready
    time is ≤ that start, the first by: ready program input (smaller index first); then for
    ``"priority"`` the largest priority, for ``"fifo"`` the earliest ready time then the
    largest priority; then §2's ties (smaller op index / smaller ``(tensor, device)``). The
    item starts at that start time and occupies its stream until ``start + duration``. The
    schedule order for §3 is the order of the loop's steps (start times are nondecreasing
    along it; equal start times keep the loop's step order).
11. **Memory (§3)** is the literal walk of the schedule order on the contracted program,
    with the readers of §3: consumer *kernels* on the device plus, on the producer's device,
    the transfers that copy the tensor away. A kernel's step counts
    ``live_d + Σ size(root's outputs) + Σ temporary_memory(members)``. The walk is
    order-based, not time-based (a copy that runs beside a kernel is not counted as
    overlapping with that kernel's temporary memory).
12. **Keys**: compared as float64, as given; NaN rejected; values outside ``[0, 1]``
    accepted. The fusion keys are only read when ``fusion=True``; a chromosome whose length
    is that of the other mode is rejected with a message saying so.
13. **Parameters**: ``latency``, ``launch_overhead`` must be finite and ≥ 0; ``bandwidth`` and
    ``hbm_bandwidth`` > 0 (``inf`` allowed); ``capacity`` ``None`` or ≥ 0 (``inf`` → always
    feasible); ``fusion_capacity`` ≥ 0 (``inf`` allowed; validated even without fusion);
    ``scheduler`` one of ``"list"``, ``"priority"``, ``"fifo"``. Bad values raise
    ``ValueError``; a wrong *type* (``fusion`` not a bool, ``num_devices`` a bool, program
    inputs neither integers nor a bool mask) raises ``TypeError``.
14. A device that runs nothing has peak 0; an empty schedule has runtime 0; streams and
    devices are free from time 0.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import operator
from fractions import Fraction

import numpy as np

from gsched import Graph

try:  # the same import style as tests/test_reference_spec.py (pytest adds the repo root)
    from tests import reference_spec
except ImportError:  # pragma: no cover - run from inside tests/
    import reference_spec

INF = math.inf
SCHEDULERS = ("list", "priority", "fifo")

__all__ = [
    "SCHEDULERS",
    "Program",
    "contract",
    "dependencies",
    "dynamic_schedule",
    "evaluate",
    "fusion_groups",
    "kernel_time",
    "list_schedule",
    "list_times",
    "memory_walk",
    "program_inputs",
    "transfers",
]


# ----------------------------------------------------------------------------------------------
# Graph helpers
# ----------------------------------------------------------------------------------------------

def _label(graph: Graph, j: int) -> str:
    names = getattr(graph, "op_names", None)
    name = names[j] if names is not None and 0 <= j < len(names) else "?"
    return f"op {j} ({name!r})"


def _structure(graph: Graph):
    """(N, T, producer[t], consumers[t] (sorted), reads[j] (sorted), outputs[j] (sorted))."""
    n, t_count = graph.num_ops, graph.num_tensors
    producer = [int(p) for p in np.asarray(graph.tensor_producer).tolist()]
    consumers = [set() for _ in range(t_count)]
    reads = [set() for _ in range(n)]
    for t, c in zip(np.asarray(graph.edge_tensor).tolist(),
                    np.asarray(graph.edge_consumer).tolist()):
        consumers[int(t)].add(int(c))
        reads[int(c)].add(int(t))
    outputs = [[] for _ in range(n)]
    for t, p in enumerate(producer):
        outputs[p].append(t)
    return n, t_count, producer, [sorted(s) for s in consumers], [sorted(s) for s in reads], \
        outputs


def _fractions(values) -> list[Fraction]:
    return [Fraction(float(v)) for v in np.asarray(values, np.float64).tolist()]


# ----------------------------------------------------------------------------------------------
# Parameter / key validation
# ----------------------------------------------------------------------------------------------

def _nonneg_finite(x, what: str) -> Fraction:
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {x!r}") from None
    if math.isnan(v) or math.isinf(v):
        raise ValueError(f"{what} must be finite, got {x!r}")
    if v < 0:
        raise ValueError(f"{what} must be >= 0, got {x!r}")
    return Fraction(v)


def _positive_or_inf(x, what: str) -> Fraction | None:
    """A rate > 0; ``None`` stands for ``inf``."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {x!r}") from None
    if math.isnan(v) or v <= 0:
        raise ValueError(f"{what} must be > 0 (inf allowed), got {x!r}")
    return None if math.isinf(v) else Fraction(v)


def _nonneg_or_inf(x, what: str) -> Fraction | None:
    """A bound ≥ 0; ``None`` stands for ``inf``."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {x!r}") from None
    if math.isnan(v) or v < 0:
        raise ValueError(f"{what} must be >= 0 (inf allowed), got {x!r}")
    return None if math.isinf(v) else Fraction(v)


def _num_devices(num_devices) -> int:
    if isinstance(num_devices, bool):
        raise TypeError(f"num_devices must be an integer, got {num_devices!r}")
    try:
        d = operator.index(num_devices)
    except TypeError:
        raise ValueError(f"num_devices must be an integer, got {num_devices!r}") from None
    if d < 1:
        raise ValueError(f"num_devices must be >= 1, got {d}")
    return d


def _check_keys(graph: Graph, keys, num_devices: int, fusion: bool) -> list[float]:
    arr = np.asarray(keys, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"chromosome must be a 1-D sequence, got shape {arr.shape}")
    n, t = graph.num_ops, graph.num_tensors
    base = n * num_devices + n + t * num_devices
    want = base + n if fusion else base
    if arr.shape[0] != want:
        hint = "N*D + N + T*D + N" if fusion else "N*D + N + T*D"
        msg = (f"chromosome has {arr.shape[0]} keys, expected {hint} = {want} "
               f"(N={n}, T={t}, D={num_devices})")
        if fusion and arr.shape[0] == base:
            msg += "; fusion=True needs N fusion keys after the transfer keys"
        if not fusion and arr.shape[0] == base + n:
            msg += "; fusion keys are only allowed with fusion=True"
        raise ValueError(msg)
    out = arr.tolist()
    for i, k in enumerate(out):
        if math.isnan(k):
            raise ValueError(f"chromosome key {i} is NaN")
    return out


# ----------------------------------------------------------------------------------------------
# SPEC §1: program inputs
# ----------------------------------------------------------------------------------------------

def program_inputs(graph: Graph, inputs=None) -> list[int]:
    """The program-input ops (sorted), from ``inputs`` (op indices or a bool mask ``[N]``) or
    else ``graph.is_input`` (bool mask; absent/None → none). Raises ``ValueError`` for a
    missing op, a wrong mask shape, or an input op that reads a tensor (§1: no dependencies).
    """
    n = graph.num_ops
    source = inputs if inputs is not None else getattr(graph, "is_input", None)
    if source is None:
        return []
    arr = np.asarray(list(source) if not isinstance(source, np.ndarray) else source)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(f"program-input mask has shape {arr.shape}, expected ({n},)")
        chosen = [int(j) for j in np.flatnonzero(arr).tolist()]
    else:
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"program inputs must be op indices or a bool mask, got {source!r}")
        chosen = [int(j) for j in arr.reshape(-1).tolist()]
        for j in chosen:
            if not 0 <= j < n:
                raise ValueError(f"program input op {j} does not exist (graph has {n} ops)")
    chosen = sorted(set(chosen))
    _, _, producer, _, reads, _ = _structure(graph)
    for j in chosen:
        if reads[j]:
            t = reads[j][0]
            raise ValueError(
                f"{_label(graph, j)} is a program input but reads tensor {t} (produced by "
                f"{_label(graph, producer[t])}); a program input has no dependencies (SPEC §1)")
    return chosen


# ----------------------------------------------------------------------------------------------
# SPEC §8.3: fusion groups
# ----------------------------------------------------------------------------------------------

def fusion_groups(graph: Graph, fusion_keys, placement, fusion_capacity=INF,
                  inputs=None) -> list[int]:
    """SPEC §8.3 grouping: returns ``root[j]`` for every op (an unfused op is its own root).

    ``fusion_keys``: ``N`` floats; ``placement``: a device per op; ``inputs``: as in
    :func:`program_inputs` (program inputs never fuse).
    """
    n, t_count, producer, consumers, _, outputs = _structure(graph)
    fkeys = [float(k) for k in np.asarray(fusion_keys, np.float64).reshape(-1).tolist()]
    if len(fkeys) != n:
        raise ValueError(f"expected {n} fusion keys, got {len(fkeys)}")
    if any(math.isnan(k) for k in fkeys):
        raise ValueError("a fusion key is NaN")
    placement = [operator.index(p) for p in list(placement)]
    if len(placement) != n:
        raise ValueError(f"placement has {len(placement)} entries, expected {n}")
    cap = _nonneg_or_inf(fusion_capacity, "fusion_capacity")
    is_input = set(program_inputs(graph, inputs))
    size = _fractions(graph.tensor_size)

    # Candidates (decision 7), decided once before merging.
    consumer_of: dict[int, int] = {}
    for v in range(n):
        if fkeys[v] < 0.5 or v in is_input:
            continue
        if any(not consumers[t] for t in outputs[v]):  # produces a graph output
            continue
        readers = set()
        for t in outputs[v]:
            readers.update(consumers[t])
        if len(readers) != 1:
            continue
        (c,) = readers
        if placement[c] != placement[v]:
            continue
        consumer_of[v] = c

    root = list(range(n))
    members = {j: {j} for j in range(n)}

    def internal_bytes(group: set[int]) -> Fraction:
        total = Fraction(0)
        for t in range(t_count):
            if producer[t] in group and any(c in group for c in consumers[t]):
                total += size[t]
        return total

    for v in sorted(consumer_of, key=lambda j: (-fkeys[j], j)):
        c = consumer_of[v]
        assert root[v] == v, "a candidate is merged away only by its own visit"
        r = root[c]
        merged = members[v] | members[r]
        if cap is not None and internal_bytes(merged) > cap:
            continue
        for j in members[v]:
            root[j] = r
        members[r] = merged
        del members[v]
    return root


# ----------------------------------------------------------------------------------------------
# SPEC §8.3: contraction
# ----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Program:
    """The contracted program (identity contraction without fusion).

    kernels: sorted roots; members[k]: sorted ops of kernel ``k``; device[k]; inputs[k]:
    sorted tensors read from outside; outputs[k]: the root's tensors; cost[k], temp[k]:
    sums; read_bytes[k], write_bytes[k]; tensors: kept (non-internal) tensor indices;
    producer[t]: kernel producing kept ``t``; consumers[t]: sorted kernels reading it;
    size[t]: Fraction for every original tensor.
    """

    kernels: list[int]
    members: dict[int, list[int]]
    device: dict[int, int]
    inputs: dict[int, list[int]]
    outputs: dict[int, list[int]]
    cost: dict[int, Fraction]
    temp: dict[int, Fraction]
    read_bytes: dict[int, Fraction]
    write_bytes: dict[int, Fraction]
    tensors: list[int]
    producer: dict[int, int]
    consumers: dict[int, list[int]]
    size: list[Fraction]


def contract(graph: Graph, roots, placement) -> Program:
    """Contracts each group ``{j : roots[j] == r}`` into the kernel ``r`` (decision 9)."""
    n, t_count, producer, consumers, reads, outputs = _structure(graph)
    roots = [operator.index(r) for r in list(roots)]
    placement = [operator.index(p) for p in list(placement)]
    if len(roots) != n or len(placement) != n:
        raise ValueError("roots and placement must have one entry per op")
    cost = _fractions(graph.compute_cost)
    temp = _fractions(graph.temporary_memory)
    size = _fractions(graph.tensor_size)
    kernels = sorted(set(roots))
    for j, r in enumerate(roots):
        if roots[r] != r:
            raise ValueError(f"root {r} of op {j} is not its own root")
    members = {k: [j for j in range(n) if roots[j] == k] for k in kernels}
    prog_in, prog_out = {}, {}
    k_cost, k_temp, rb, wb = {}, {}, {}, {}
    for k in kernels:
        group = set(members[k])
        ins = sorted({t for j in group for t in reads[j] if producer[t] not in group})
        prog_in[k] = ins
        prog_out[k] = list(outputs[k])
        k_cost[k] = sum((cost[j] for j in group), Fraction(0))
        k_temp[k] = sum((temp[j] for j in group), Fraction(0))
        rb[k] = sum((size[t] for t in ins), Fraction(0))
        wb[k] = sum((size[t] for t in prog_out[k]), Fraction(0))
    kept = []
    k_producer, k_consumers = {}, {}
    for t in range(t_count):
        k = roots[producer[t]]
        outside = sorted({roots[c] for c in consumers[t] if roots[c] != k})
        internal = any(roots[c] == k for c in consumers[t])
        if internal:
            # Decision 9 / §8.3: a tensor produced and consumed inside a group is internal; the
            # group is an in-tree, so it then has no reader outside and is not a root output.
            assert producer[t] != k and not outside, (
                f"tensor {t} is read inside and outside its group: not an in-tree")
            continue
        assert producer[t] == k, f"tensor {t} of a non-root op leaves its group"
        kept.append(t)
        k_producer[t] = k
        k_consumers[t] = outside
    return Program(kernels=kernels, members=members,
                   device={k: placement[k] for k in kernels}, inputs=prog_in, outputs=prog_out,
                   cost=k_cost, temp=k_temp, read_bytes=rb, write_bytes=wb, tensors=kept,
                   producer=k_producer, consumers=k_consumers, size=size)


# ----------------------------------------------------------------------------------------------
# SPEC §8.1: kernel time
# ----------------------------------------------------------------------------------------------

def kernel_time(program: Program, k: int, hbm_bandwidth=INF, launch_overhead=0) -> Fraction:
    """``max(c, b / hbm_bandwidth) + launch_overhead`` (decision 5)."""
    hbm = _positive_or_inf(hbm_bandwidth, "hbm_bandwidth")
    over = _nonneg_finite(launch_overhead, "launch_overhead")
    b = program.read_bytes[k] + program.write_bytes[k]
    memory_term = Fraction(0) if hbm is None else b / hbm
    return max(program.cost[k], memory_term) + over


# ----------------------------------------------------------------------------------------------
# SPEC §2 on the contracted program: transfers, dependencies, list schedule
# ----------------------------------------------------------------------------------------------

def transfers(program: Program) -> list[tuple[int, int]]:
    """``(t, d)`` for each kept tensor and each other device holding ≥ 1 consumer kernel."""
    out = set()
    for t in program.tensors:
        s = program.device[program.producer[t]]
        for c in program.consumers[t]:
            if program.device[c] != s:
                out.add((t, program.device[c]))
    return sorted(out)


def dependencies(program: Program) -> dict[tuple, set[tuple]]:
    """Item → the items it depends on (§2, "instead of the producer")."""
    deps: dict[tuple, set[tuple]] = {("op", k): set() for k in program.kernels}
    for t, d in transfers(program):
        deps[("xfer", t, d)] = {("op", program.producer[t])}
    for k in program.kernels:
        for t in program.inputs[k]:
            p = program.producer[t]
            if program.device[p] == program.device[k]:
                deps[("op", k)].add(("op", p))
            else:
                deps[("op", k)].add(("xfer", t, program.device[k]))
    return deps


def _priority(item, keys: list[float], n: int, num_devices: int) -> float:
    if item[0] == "op":
        return keys[num_devices * n + item[1]]
    _, t, d = item
    return keys[num_devices * n + n + t * num_devices + d]


def _tie(item) -> tuple:
    """§2's exact ties: ops before transfers, smaller op index, smaller (tensor, device)."""
    if item[0] == "op":
        return (0, item[1], 0)
    return (1, item[1], item[2])


def list_schedule(program: Program, keys: list[float], num_devices: int,
                  inputs=()) -> list[tuple]:
    """§2 schedule with §1: every program input first, in op index order; then repeatedly the
    ready item with the largest priority (ties :func:`_tie`)."""
    deps = dependencies(program)
    n_ops = _n_from(program)
    order = [("op", j) for j in sorted(set(inputs))]
    for item in order:
        assert item in deps and not deps[item], f"program input {item} has dependencies"
    scheduled = set(order)
    # Items not yet scheduled -> their dependencies not yet scheduled.
    waiting = {item: set(ds) - scheduled for item, ds in deps.items() if item not in scheduled}
    dependents: dict[tuple, list[tuple]] = {item: [] for item in deps}
    for item, ds in deps.items():
        for dep in ds:
            dependents[dep].append(item)

    def heap_key(item):
        return (-_priority(item, keys, n_ops, num_devices),) + _tie(item)

    heap = [(heap_key(item), item) for item, ds in waiting.items() if not ds]
    heapq.heapify(heap)
    while heap:
        _, item = heapq.heappop(heap)
        order.append(item)
        for nxt in dependents[item]:
            waiting[nxt].discard(item)
            if not waiting[nxt]:
                heapq.heappush(heap, (heap_key(nxt), nxt))
    if len(order) != len(deps):
        raise AssertionError("extended graph has a cycle")
    return order


def _n_from(program: Program) -> int:
    """Number of ops of the original graph (every op belongs to exactly one kernel)."""
    return sum(len(m) for m in program.members.values())


# ----------------------------------------------------------------------------------------------
# Durations
# ----------------------------------------------------------------------------------------------

def _durations(program: Program, items, hbm_bandwidth, launch_overhead, latency, bandwidth):
    lat = _nonneg_finite(latency, "latency")
    bw = _positive_or_inf(bandwidth, "bandwidth")
    out = {}
    for item in items:
        if item[0] == "op":
            out[item] = kernel_time(program, item[1], hbm_bandwidth, launch_overhead)
        else:
            t = item[1]
            out[item] = lat + (Fraction(0) if bw is None else program.size[t] / bw)
    return out


# ----------------------------------------------------------------------------------------------
# SPEC §4: runtime of a list schedule (synchronous transfers)
# ----------------------------------------------------------------------------------------------

def list_times(program: Program, order, num_devices: int, duration) -> dict:
    """§4 times: op on ``d`` starts at ``max(free_d, inputs ready on d)``; a transfer at
    ``max(t ready on s, free_s, free_d)`` and keeps both devices busy."""
    free_at = [Fraction(0)] * num_devices
    ready: dict[tuple[int, int], Fraction] = {}
    times = {}
    for item in order:
        if item[0] == "op":
            k = item[1]
            d = program.device[k]
            start = max([free_at[d]] + [ready[(t, d)] for t in program.inputs[k]])
            end = start + duration[item]
            free_at[d] = end
            for t in program.outputs[k]:
                ready[(t, d)] = end
        else:
            _, t, d = item
            s = program.device[program.producer[t]]
            start = max(ready[(t, s)], free_at[s], free_at[d])
            end = start + duration[item]
            free_at[s] = free_at[d] = end
            ready[(t, d)] = end
        times[item] = (start, end)
    return times


# ----------------------------------------------------------------------------------------------
# SPEC §8.2: dynamic (event-driven) scheduling
# ----------------------------------------------------------------------------------------------

def _stream(program: Program, item) -> tuple[int, int]:
    """(0, d) = compute stream of d, (1, d) = copy-in stream of d: tuple order is §8.2's tie."""
    if item[0] == "op":
        return (0, program.device[item[1]])
    return (1, item[2])


def dynamic_schedule(program: Program, keys: list[float], num_devices: int, scheduler: str,
                     duration, inputs=()) -> tuple[list[tuple], dict, dict]:
    """§8.2 event loop. Returns ``(order, times, ready)``: the start order, item →
    ``(start, end)`` and item → its ready time (all Fractions)."""
    if scheduler not in ("priority", "fifo"):
        raise ValueError(f"dynamic scheduler must be 'priority' or 'fifo', got {scheduler!r}")
    n_ops = _n_from(program)
    inputs = set(inputs)
    deps = dependencies(program)
    dependents: dict[tuple, list[tuple]] = {item: [] for item in deps}
    for item, ds in deps.items():
        for dep in ds:
            dependents[dep].append(item)
    streams = sorted({(0, d) for d in range(num_devices)} | {(1, d) for d in range(num_devices)})
    free = {s: Fraction(0) for s in streams}
    times: dict[tuple, tuple[Fraction, Fraction]] = {}
    ready_time: dict[tuple, Fraction] = {}
    known: set[tuple] = set()  # unstarted items whose ready time is known
    started: set[tuple] = set()
    order: list[tuple] = []

    def compute_ready(item) -> Fraction:
        """Decision 10: the latest time its inputs are ready (where it needs them)."""
        if item[0] == "op":
            k = item[1]
            d = program.device[k]
            when = [Fraction(0)]
            for t in program.inputs[k]:
                p = program.producer[t]
                src = ("op", p) if program.device[p] == d else ("xfer", t, d)
                when.append(times[src][1])  # t ready on d
            return max(when)
        _, t, _ = item
        return times[("op", program.producer[t])][1]  # t ready on its source

    def rank(item):
        prio = _priority(item, keys, n_ops, num_devices)
        is_in = item[0] == "op" and item[1] in inputs
        first = (0, item[1]) if is_in else (1, 0)
        if scheduler == "priority":
            return first + (-prio,) + _tie(item)
        return first + (ready_time[item], -prio) + _tie(item)

    for item, ds in deps.items():
        if not ds:
            ready_time[item] = compute_ready(item)
            known.add(item)

    while len(order) < len(deps):
        best = None
        for s in streams:
            mine = [i for i in known if _stream(program, i) == s]
            if not mine:
                continue
            start = max(free[s], min(ready_time[i] for i in mine))
            if best is None or (start, s) < best:
                best = (start, s)
        assert best is not None, "no stream has a known item: the extended graph has a cycle"
        start, s = best
        candidates = [i for i in known if _stream(program, i) == s and ready_time[i] <= start]
        item = min(candidates, key=rank)
        end = start + duration[item]
        times[item] = (start, end)
        free[s] = end
        known.discard(item)
        started.add(item)
        order.append(item)
        for nxt in dependents[item]:
            if nxt not in started and nxt not in known and deps[nxt] <= started:
                ready_time[nxt] = compute_ready(nxt)
                known.add(nxt)
    return order, times, ready_time


# ----------------------------------------------------------------------------------------------
# SPEC §3: peak memory walk
# ----------------------------------------------------------------------------------------------

def memory_walk(program: Program, order, num_devices: int) -> tuple[list[Fraction], list]:
    """Literal §3 walk of ``order`` (decision 11). Returns ``(device peaks, step usage)``."""
    items = list(order)
    xfers = {(i[1], i[2]) for i in items if i[0] == "xfer"}
    size = program.size

    def readers(t: int, dev: int) -> set[tuple]:
        s = program.device[program.producer[t]]
        here = {("op", c) for c in program.consumers[t] if program.device[c] == dev}
        if dev == s:
            return here | {("xfer", t, d) for (tt, d) in xfers if tt == t}
        return here

    resident: list[dict[int, Fraction]] = [{} for _ in range(num_devices)]
    pending: dict[tuple[int, int], set[tuple]] = {}
    peaks = [Fraction(0)] * num_devices
    steps = []

    def live(dev):
        return sum(resident[dev].values(), Fraction(0))

    def make_resident(t, dev):
        assert t not in resident[dev], f"tensor {t} made resident twice on device {dev}"
        resident[dev][t] = size[t]
        pending[(t, dev)] = readers(t, dev)

    def read(t, dev, reader):
        assert t in resident[dev], f"{reader} reads tensor {t} not resident on device {dev}"
        pending[(t, dev)].discard(reader)

    def free_unread(dev):
        for t in [t for t in resident[dev] if not pending[(t, dev)]]:
            del resident[dev][t]
            del pending[(t, dev)]

    for item in items:
        if item[0] == "op":
            k = item[1]
            d = program.device[k]
            usage = live(d) + sum((size[t] for t in program.outputs[k]), Fraction(0)) \
                + program.temp[k]
            peaks[d] = max(peaks[d], usage)
            steps.append((item, d, usage))
            for t in program.outputs[k]:
                make_resident(t, d)
            for t in program.inputs[k]:
                read(t, d, item)
            free_unread(d)
        else:
            _, t, d = item
            s = program.device[program.producer[t]]
            usage = live(d) + size[t]
            peaks[d] = max(peaks[d], usage)
            steps.append((item, d, usage))
            make_resident(t, d)
            read(t, s, item)
            free_unread(s)
            free_unread(d)
    assert all(not r for r in resident), f"tensors still resident after the schedule: {resident}"
    return peaks, steps


def _check_order(deps: dict, order: list[tuple]) -> None:
    seen = set()
    for item in order:
        assert item in deps and item not in seen, f"bad schedule item {item}"
        assert deps[item] <= seen, f"{item} scheduled before its dependencies"
        seen.add(item)
    assert seen == set(deps), "schedule misses items"


# ----------------------------------------------------------------------------------------------
# The entry point
# ----------------------------------------------------------------------------------------------

def evaluate(graph: Graph, keys, num_devices, *, latency=0, bandwidth=INF, capacity=None,
             hbm_bandwidth=INF, launch_overhead=0, scheduler="list", fusion=False,
             fusion_capacity=INF, inputs=None, pinned=None) -> dict:
    """Decodes and scores a chromosome per SPEC §1–§4 and §8.

    Args:
      graph: a validated :class:`gsched.Graph`.
      keys: ``N·D + N + T·D`` floats, or ``N·D + N + T·D + N`` with ``fusion=True``.
      num_devices: ``D ≥ 1``.
      latency, bandwidth: transfer time ``latency + size / bandwidth``.
      capacity: optional per-device memory capacity.
      hbm_bandwidth, launch_overhead: §8.1 kernel time.
      scheduler: ``"list"`` (§2–§4), ``"priority"`` or ``"fifo"`` (§8.2).
      fusion, fusion_capacity: §8.3.
      inputs: program-input op indices (or a bool mask); ``None`` → ``graph.is_input`` if any.
      pinned: optional ``{op: device}``.

    Returns a dict with ``placement`` (device per op), ``fusion`` (root per op), ``groups``
    (root → sorted members), ``inputs`` (sorted program inputs), ``order``, ``device_peaks``
    (+ ``_exact``), ``peak_memory`` (+ ``_exact``), ``runtime`` (+ ``_exact``), ``feasible``,
    ``device_excess_exact``, ``times`` (item → (start, end), + ``times_exact``),
    ``ready_exact`` (item → ready time; dynamic schedulers only, else ``None``),
    ``durations_exact`` (item → duration), ``step_usage``.
    """
    num_devices = _num_devices(num_devices)
    if scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; expected one of {SCHEDULERS}")
    if not isinstance(fusion, (bool, np.bool_)):
        raise TypeError(f"fusion must be a bool, got {fusion!r}")
    fusion = bool(fusion)
    keys = _check_keys(graph, keys, num_devices, fusion)
    # Validate every parameter up front (decision 13), even the ones this call does not use.
    _nonneg_finite(latency, "latency")
    _positive_or_inf(bandwidth, "bandwidth")
    _positive_or_inf(hbm_bandwidth, "hbm_bandwidth")
    _nonneg_finite(launch_overhead, "launch_overhead")
    _nonneg_or_inf(fusion_capacity, "fusion_capacity")
    cap = None if capacity is None else _nonneg_or_inf(capacity, "capacity")
    infeasible_never = capacity is None or cap is None

    n, t_count = graph.num_ops, graph.num_tensors
    base = n * num_devices + n + t_count * num_devices
    prog_inputs = program_inputs(graph, inputs)

    # §2 placement (reused from the §2–§4 oracle, pins included).
    placement = reference_spec.placement_from_keys(graph, np.asarray(keys[:base]), num_devices,
                                                   pinned)

    # §8.3 groups and contraction.
    if fusion:
        roots = fusion_groups(graph, keys[base:], placement, fusion_capacity, prog_inputs)
    else:
        roots = list(range(n))
    program = contract(graph, roots, placement)

    deps = dependencies(program)
    duration = _durations(program, deps, hbm_bandwidth, launch_overhead, latency, bandwidth)
    ready = None
    if scheduler == "list":
        order = list_schedule(program, keys, num_devices, prog_inputs)
        times = list_times(program, order, num_devices, duration)
    else:
        order, times, ready = dynamic_schedule(program, keys, num_devices, scheduler, duration,
                                               prog_inputs)
    _check_order(deps, order)
    peaks, steps = memory_walk(program, order, num_devices)

    peak = max(peaks) if peaks else Fraction(0)
    runtime = max((e for _, e in times.values()), default=Fraction(0))
    if infeasible_never:
        feasible = True
        excess = [Fraction(0)] * num_devices
    else:
        feasible = all(p <= cap for p in peaks)
        excess = [max(Fraction(0), p - cap) for p in peaks]
    return {
        "placement": list(placement),
        "fusion": list(roots),
        "groups": {k: list(program.members[k]) for k in program.kernels},
        "inputs": list(prog_inputs),
        "order": list(order),
        "device_peaks": [float(p) for p in peaks],
        "device_peaks_exact": list(peaks),
        "peak_memory": float(peak),
        "peak_memory_exact": peak,
        "runtime": float(runtime),
        "runtime_exact": runtime,
        "feasible": feasible,
        "device_excess_exact": excess,
        "times": {k: (float(a), float(b)) for k, (a, b) in times.items()},
        "times_exact": dict(times),
        "ready_exact": ready,
        "durations_exact": duration,
        "step_usage": steps,
        "program": program,
    }
