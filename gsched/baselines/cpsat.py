"""Exact peak-memory placement + order with CP-SAT (REGAL §4.2's "CP-SAT" baseline).

An optional extra (``pip install -e .[cpsat]``): OR-Tools is imported inside :func:`solve`,
never when gsched is imported.

**What is optimal.** :func:`solve` returns an op order and a placement, scored like every
heuristic by :func:`gsched.evaluate_order`, whose convention runs each transfer ``X(t, d)``
right after its producer (SPEC §2's decoding with those priorities). The model is exactly
SPEC §3's peak memory of that schedule class, so its optimum is the best (order, placement)
under that convention — the true single-device optimum for ``D = 1``; for ``D ≥ 2`` a
chromosome that delays a transfer can, in principle, do better. Only ``peak_memory`` is
modelled (runtime: ``ValueError``).

**Model** (position-based, for graphs up to a few dozen ops). ``x[j, s]``: op ``j`` runs in
slot ``s`` (a permutation); ``z[j, d]``: op ``j`` on device ``d``; every producer precedes
its consumers. Slot ``s`` holds the op step of ``order[s]`` and then its transfers. SPEC §3
gives, for device ``d`` and slot ``s``, the largest usage sampled there (or, when ``d``
samples nothing in slot ``s``, a value no larger than an earlier sample on ``d``):

    usage[d, s] = Σ_t size(t) · r[t, d, s] + temporary_memory(order[s]) · [order[s] on d]

where copy ``(t, d)`` counts (``r = 1``) iff ``pos(producer) ≤ s`` and either ``s`` is the
producer's slot and ``d`` its device (the op step's outputs; graph outputs are freed right
after it), or some consumer of ``t`` on ``d`` runs at a slot ``≥ s`` (the copy is resident
until its last reader on ``d``; at the producer's slot this is the transfer step to ``d``).
Only the implications ``condition ⇒ r = 1`` are posted: minimizing ``max usage`` sets every
unforced ``r`` to 0 at the optimum, so the optimal objective is the cost model's peak. Ops
are pinned to slot ranges by their ancestor / descendant counts, and op 0 sits on device 0
(devices are interchangeable).

**Units.** Memory is integer in CP-SAT: sizes are rounded to the cost model's own unit
(:mod:`gsched.costmodel.memory`) and divided by their gcd, so the optimum equals the cost model's exact
value (integer byte sizes with a total below 2⁴⁰ B are not rounded at all).
"""

from __future__ import annotations

import math
import time

import jax.numpy as jnp
import numpy as np

from gsched.core import fixedpoint as fp
from gsched.core.graph import Graph, topological_order
from gsched.costmodel.memory import MEMORY_VALUE_BITS

MAX_CONSTRAINTS = 2_000_000  # model-size guard: the position model is for small graphs
_STATUS = {"OPTIMAL": "optimal", "FEASIBLE": "feasible", "UNKNOWN": "unknown"}


class MissingExtraError(ImportError, ValueError):
    """An optional dependency is not installed (a ``ValueError`` too, for CLI reporting)."""


def _cp_model():
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        raise MissingExtraError("method cpsat needs OR-Tools: pip install -e .[cpsat]") from None
    return cp_model


def memory_units(graph: Graph) -> tuple[np.ndarray, np.ndarray, float]:
    """``(sizes [T], temporary [N], scale)``: integer memory with ``value ≈ integer · scale``,
    rounded exactly as the cost model rounds to its unit."""
    size = graph.tensor_size.astype(np.float32)
    temp = graph.temporary_memory.astype(np.float32)
    total = np.sum(size, dtype=np.float32) + np.max(temp, initial=np.float32(0))
    unit = float(fp.choose_unit(jnp.float32(total), MEMORY_VALUE_BITS))
    q_size = np.rint(size.astype(np.float64) / unit).astype(np.int64)
    q_temp = np.rint(temp.astype(np.float64) / unit).astype(np.int64)
    g = math.gcd(*(int(v) for v in np.concatenate([q_size, q_temp]) if v)) or 1
    return q_size // g, q_temp // g, g * unit


def _reach_counts(graph: Graph, pairs: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Number of ancestors and of descendants of every op."""
    n = graph.num_ops
    succ = [set() for _ in range(n)]
    for a, c in pairs:
        succ[a].add(c)
    desc = [0] * n
    reach: list[set[int]] = [set() for _ in range(n)]
    for j in reversed(topological_order(graph)):
        for c in succ[j]:
            reach[j] |= reach[c] | {c}
        desc[j] = len(reach[j])
    anc = np.zeros(n, np.int64)
    for j in range(n):
        for c in reach[j]:
            anc[c] += 1
    return anc, np.asarray(desc, np.int64)


def solve(graph: Graph, num_devices: int, time_limit: float = 60.0, seed: int = 0,
          num_workers: int = 1) -> tuple[np.ndarray, np.ndarray, dict]:
    """Minimum peak memory over op orders and placements (transfers right after producers).

    Returns ``(order [N], placement [N], info)`` with ``info = {"status": "optimal" |
    "feasible" | "unknown", "bound": lower bound on the peak, "cpsat_peak": CP-SAT's peak of
    the returned solution (≥ its cost-model value; equal when optimal), "solve_seconds"}``.
    With status ``"unknown"`` (no solution within ``time_limit``) the returned solution is the
    model's hint: a topological order with every op on device 0. One search worker by
    default: the same graph and seed then give the same solution whenever the search ends
    before ``time_limit`` (several workers return different optimal solutions run to run).
    """
    cp_model = _cp_model()
    if not (isinstance(num_devices, (int, np.integer)) and num_devices >= 1):
        raise ValueError(f"num_devices must be an int >= 1, got {num_devices!r}")
    if not (math.isfinite(time_limit) and time_limit > 0):
        raise ValueError(f"time_limit must be a positive number of seconds, got {time_limit!r}")
    n, num_d = graph.num_ops, int(num_devices)
    consumers = [sorted(set(graph.edge_consumer[graph.edge_tensor == t].tolist()))
                 for t in range(graph.num_tensors)]
    producer = graph.tensor_producer.tolist()
    pairs = sorted({(producer[t], c) for t in range(graph.num_tensors) for c in consumers[t]})
    size, temp, scale = memory_units(graph)
    estimate = num_d * n * sum(len(c) + 1 for t, c in enumerate(consumers) if size[t])
    if estimate > MAX_CONSTRAINTS:
        raise ValueError(f"graph {graph.name!r} ({n} ops, {graph.num_tensors} tensors) is too "
                         f"large for the CP-SAT position model (~{estimate:,} constraints > "
                         f"{MAX_CONSTRAINTS:,}); it is meant for small graphs")
    anc, desc = _reach_counts(graph, pairs)
    first, last = anc, n - 1 - desc  # slot range of each op

    model = cp_model.CpModel()
    x = {(j, s): model.NewBoolVar(f"x{j}_{s}") for j in range(n)
         for s in range(first[j], last[j] + 1)}
    for j in range(n):
        model.AddExactlyOne(x[j, s] for s in range(first[j], last[j] + 1))
    for s in range(n):
        model.AddExactlyOne(x[j, s] for j in range(n) if (j, s) in x)
    pos = [sum(s * x[j, s] for s in range(first[j], last[j] + 1)) for j in range(n)]
    for a, c in pairs:
        model.Add(pos[a] + 1 <= pos[c])

    def by_slot(j: int, s: int):  # pos(j) ≤ s, as a 0/1 linear expression
        return sum(x[j, u] for u in range(first[j], min(s, last[j]) + 1))

    z = [[model.NewBoolVar(f"z{j}_{d}") for d in range(num_d)] for j in range(n)]
    for j in range(n):
        model.AddExactlyOne(z[j])
    model.Add(z[0][0] == 1)

    peak = model.NewIntVar(0, int(size.sum() + temp.max(initial=0)), "peak")
    usage = [[[] for _ in range(n)] for _ in range(num_d)]  # linear terms per (d, s)
    for t in range(graph.num_tensors):
        if not size[t]:
            continue
        a = producer[t]
        end = max([last[c] for c in consumers[t]], default=last[a])
        for d in range(num_d):
            for s in range(first[a], end + 1):
                r = model.NewBoolVar(f"r{t}_{d}_{s}")
                usage[d][s].append(int(size[t]) * r)
                if (a, s) in x:
                    model.Add(r >= x[a, s] + z[a][d] - 1)
                for c in consumers[t]:
                    if s <= last[c]:  # c at a slot ≥ s on d, producer already run
                        model.Add(r >= by_slot(a, s) + z[c][d] - by_slot(c, s - 1) - 1)
    for j in np.flatnonzero(temp):
        for s in range(first[j], last[j] + 1):
            for d in range(num_d):
                on = model.NewBoolVar(f"u{j}_{d}_{s}")  # op j runs in slot s on device d
                model.Add(on >= x[j, s] + z[j][d] - 1)
                usage[d][s].append(int(temp[j]) * on)
    for d in range(num_d):
        for s in range(n):
            if usage[d][s]:
                model.Add(peak >= sum(usage[d][s]))
    model.Minimize(peak)

    hint = topological_order(graph)
    for s, j in enumerate(hint):
        for u in range(first[j], last[j] + 1):
            model.AddHint(x[j, u], int(u == s))
        for d in range(num_d):
            model.AddHint(z[j][d], int(d == 0))

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit)
    solver.parameters.random_seed = int(seed)
    solver.parameters.num_workers = int(num_workers)
    start = time.perf_counter()
    code = solver.Solve(model)
    seconds = time.perf_counter() - start
    name = solver.StatusName(code)
    if name not in _STATUS:
        raise RuntimeError(f"CP-SAT returned {name} on graph {graph.name!r} (a model bug)")
    info = {"status": _STATUS[name], "bound": float(solver.BestObjectiveBound()) * scale,
            "solve_seconds": seconds}
    if name == "UNKNOWN":
        return np.asarray(hint, np.int64), np.zeros(n, np.int64), info
    slot = [next(s for s in range(first[j], last[j] + 1) if solver.Value(x[j, s]))
            for j in range(n)]
    placement = [next(d for d in range(num_d) if solver.Value(z[j][d])) for j in range(n)]
    info["cpsat_peak"] = float(solver.ObjectiveValue()) * scale
    return np.argsort(slot).astype(np.int64), np.asarray(placement, np.int64), info


def build_cpsat(time_limit: float = 60.0):
    """The ``cpsat`` method's runner ``(graph, num_devices, seed) → (order, placement, info)``;
    fails early with a clear error when OR-Tools is missing."""
    _cp_model()
    time_limit = float(time_limit)
    return lambda graph, num_devices, seed: solve(graph, num_devices, time_limit, seed)
