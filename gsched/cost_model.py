"""The cost model: chromosome → placement, schedule, peak memory and runtime (SPEC §2–§4).

``evaluate`` is pure and written for one chromosome on one padded graph; ``evaluate_population``
and ``evaluate_batch`` are its ``vmap``s. ``score`` turns an evaluation into the scalar an
optimizer minimizes. Host-side helpers validate inputs and convert results to plain Python.
"""

from __future__ import annotations

import functools
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from gsched.decoder import (CostParams, decode_placement, schedule_init, schedule_result,
                            schedule_step)
from gsched.graph import Graph
from gsched.memory import peak_memory
from gsched.padding import Bucket, PaddedGraph, bucket_for, pad_graph, pad_keys

Objective = Literal["peak_memory", "runtime"]
OBJECTIVES = ("peak_memory", "runtime")


class Evaluation(NamedTuple):
    """Everything the cost model says about one chromosome (padded shapes)."""

    placement: jnp.ndarray  # [N] int32 device per op
    order: jnp.ndarray  # [V] int32 item per step (−1 after the last); see ``item_to_tuple``
    num_steps: jnp.ndarray  # [] int32
    device_peaks: jnp.ndarray  # [D] float32
    peak_memory: jnp.ndarray  # [] float32
    runtime: jnp.ndarray  # [] float32
    feasible: jnp.ndarray  # [] bool: every device peak ≤ capacity
    excess: jnp.ndarray  # [] float32: Σ_d max(0, peak_d − capacity)
    runtime_bound: jnp.ndarray  # [] float32: an upper bound on any schedule's runtime


def _lift(fn, graph_batched: tuple[bool, ...]):
    """vmaps ``fn(graph, pinned, params, x)`` over leading axes of ``x``; at each level the
    graph (and ``pinned``) is batched too when ``graph_batched`` says so (outermost first)."""
    for batched in reversed(graph_batched):
        axis = 0 if batched else None
        fn = jax.vmap(fn, in_axes=(axis, axis, None, 0))
    return fn


def _evaluate(graph: PaddedGraph, pinned, params: CostParams, keys: jnp.ndarray,
              num_devices: int, chunk: int, graph_batched: tuple[bool, ...]) -> Evaluation:
    """Evaluates ``keys [*batch, L]``. The schedule's ``while_loop`` runs *outside* the vmaps
    with an unbatched predicate ("any chromosome unfinished"), so the loop state is updated in
    place instead of being copied by a per-iteration select, as vmap-of-while_loop would do."""

    def init(g, pin, prm, k):
        k = jnp.asarray(k, jnp.float32)
        placement = decode_placement(g, k, num_devices, pin)
        return placement, schedule_init(g, k, placement, prm, num_devices)

    def step(g, pin, prm, tables_and_state):
        tables, state = tables_and_state
        return tables, schedule_step(tables, state, num_devices, chunk)

    def finish(g, pin, prm, x):
        placement, (tables, state) = x
        schedule = schedule_result(tables, state)
        memory = peak_memory(g, placement, schedule, prm.capacity, num_devices)
        return Evaluation(
            placement=jnp.where(g.op_mask, placement.device, -1),
            order=schedule.order,
            num_steps=schedule.num_steps,
            device_peaks=memory.device_peaks,
            peak_memory=memory.peak_memory,
            runtime=schedule.runtime,
            feasible=memory.feasible,
            excess=memory.excess,
            runtime_bound=schedule.runtime_bound,
        )

    graph, params = jax.tree.map(jnp.asarray, (graph, params))
    placement, loop = _lift(init, graph_batched)(graph, pinned, params, keys)
    batched_step = _lift(step, graph_batched)
    loop = jax.lax.while_loop(lambda x: ~jnp.all(x[1]["done"]),
                              lambda x: batched_step(graph, pinned, params, x), loop)
    return _lift(finish, graph_batched)(graph, pinned, params, (placement, loop))


def evaluate(graph: PaddedGraph, keys: jnp.ndarray, params: CostParams = CostParams(),
             *, num_devices: int, pinned: jnp.ndarray | None = None,
             chunk: int = 8) -> Evaluation:
    """Decodes and scores one chromosome ``keys`` (``[N·D + N + T·D]``, padded layout).

    Pure and traceable; prefer :func:`evaluate_population` / :func:`evaluate_batch` for many
    chromosomes (``jax.vmap`` of this function works but copies the loop state every step).
    """
    return _evaluate(graph, pinned, params, keys, num_devices, chunk, ())


@functools.partial(jax.jit, static_argnames=("num_devices", "chunk"))
def evaluate_population(graph: PaddedGraph, keys: jnp.ndarray,
                        params: CostParams = CostParams(), *, num_devices: int,
                        pinned: jnp.ndarray | None = None, chunk: int = 8) -> Evaluation:
    """``keys [P, L]`` on one graph → an :class:`Evaluation` with leading axis ``[P]``.

    ``pinned`` (``[N]`` int32, −1 = free) fixes ops to devices.
    """
    return _evaluate(graph, pinned, params, keys, num_devices, chunk, (False,))


@functools.partial(jax.jit, static_argnames=("num_devices", "chunk"))
def evaluate_batch(graphs: PaddedGraph, keys: jnp.ndarray, params: CostParams = CostParams(),
                   *, num_devices: int, pinned: jnp.ndarray | None = None,
                   chunk: int = 8) -> Evaluation:
    """``graphs`` with leading axis ``[B]``, ``keys [B, P, L]`` → leading axes ``[B, P]``.

    ``pinned``, if given, is ``[B, N]``.
    """
    return _evaluate(graphs, pinned, params, keys, num_devices, chunk, (True, False))


@functools.cache
def _sharded_population_fn(mesh: jax.sharding.Mesh, axis: str, num_devices: int, chunk: int):
    spec = jax.sharding.PartitionSpec

    def local(graph, keys, params, pinned):
        return _evaluate(graph, pinned, params, keys, num_devices, chunk, (False,))

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(spec(), spec(axis), spec(), spec()),
                                 out_specs=spec(axis), check_vma=False))


def evaluate_population_sharded(graph: PaddedGraph, keys: jnp.ndarray,
                                params: CostParams = CostParams(), *, num_devices: int,
                                mesh: jax.sharding.Mesh, axis: str | None = None,
                                pinned: jnp.ndarray | None = None,
                                chunk: int = 8) -> Evaluation:
    """:func:`evaluate_population` with the population split over ``mesh``'s devices.

    Each device runs its own schedule loop on its share (no per-step communication), so on a
    CPU with ``--xla_force_host_platform_device_count=<cores>`` every core works on separate
    chromosomes. ``P`` must be divisible by the mesh size along ``axis`` (default: the mesh's
    first axis). Compiles once per (mesh, bucket, number of devices).
    """
    axis = axis or mesh.axis_names[0]
    if keys.shape[0] % mesh.shape[axis]:
        raise ValueError(f"population {keys.shape[0]} is not divisible by the {mesh.shape[axis]} "
                         f"devices of mesh axis {axis!r}")
    pinned = jnp.full(graph.op_mask.shape, -1, jnp.int32) if pinned is None else pinned
    fn = _sharded_population_fn(mesh, axis, num_devices, chunk)
    return fn(graph, keys, jax.tree.map(jnp.asarray, params), pinned)


def score(evaluation: Evaluation, objective: Objective, params: CostParams) -> jnp.ndarray:
    """The value an optimizer minimizes (float32, any batch shape).

    ``peak_memory``: the peak itself (an infeasible peak exceeds the capacity, so it already
    ranks after every feasible one). ``runtime``: the runtime when feasible; otherwise
    ``2·B + 1 + (excess / capacity)·(B + 1)`` with ``B`` the evaluation's runtime bound (≥ any
    runtime), so every feasible solution scores strictly better than every infeasible one and
    a smaller excess scores better (SPEC §4; ties possible only through float32 rounding).
    """
    if objective == "peak_memory":
        return evaluation.peak_memory
    if objective != "runtime":
        raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")
    bound = evaluation.runtime_bound
    ratio = evaluation.excess / jnp.asarray(params.capacity, jnp.float32)
    penalty = 2.0 * bound + 1.0 + ratio * (bound + 1.0)
    return jnp.where(evaluation.feasible, evaluation.runtime, penalty)


def order_keys(graph: PaddedGraph, op_order: jnp.ndarray, placement: jnp.ndarray,
               num_devices: int) -> jnp.ndarray:
    """A chromosome (padded layout) whose decoding gives a chosen placement and op order.

    ``op_order [N]`` lists ops in run order (padded ops anywhere after the real ones),
    ``placement [N]`` their devices. Op priorities fall with position; each transfer gets a
    priority just below its producer's, so transfers run as soon as their producer finishes
    (the convention for scoring explicit orders, e.g. from DP or heuristics). If ``op_order``
    is a topological order the decoded op order equals it exactly; otherwise it differs
    (compare with ``Evaluation.order``). Jittable; all priorities are distinct in float32.
    """
    n = op_order.shape[0]
    position = jnp.zeros(n, jnp.int32).at[op_order].set(jnp.arange(n, dtype=jnp.int32))
    op_priority = (2 * n - 2 * position).astype(jnp.float32) / (2 * n)
    xfer_priority = (2 * n - 2 * position[graph.tensor_producer] - 1).astype(jnp.float32) / (2 * n)
    affinity = jax.nn.one_hot(placement, num_devices, dtype=jnp.float32)
    return jnp.concatenate([affinity.reshape(-1), op_priority,
                            jnp.repeat(xfer_priority, num_devices)])


# --- Host-side helpers -------------------------------------------------------------------


def validate_keys(keys, graph: Graph, num_devices: int) -> np.ndarray:
    """Checks a real (unpadded) chromosome: length ``N·D + N + T·D``, finite, in [0, 1]."""
    keys = np.asarray(keys)
    if not np.issubdtype(keys.dtype, np.floating) and not np.issubdtype(keys.dtype, np.integer):
        raise ValueError(f"chromosome must be numeric, got dtype {keys.dtype}")
    want = graph.chromosome_length(num_devices)
    if keys.ndim != 1 or keys.shape[0] != want:
        raise ValueError(
            f"chromosome has shape {keys.shape}, expected ({want},) = N·D + N + T·D with "
            f"N={graph.num_ops}, T={graph.num_tensors}, D={num_devices}")
    bad = np.flatnonzero(~np.isfinite(keys) | (keys < 0) | (keys > 1))
    if bad.size:
        raise ValueError(f"chromosome key {int(bad[0])} is {float(keys[bad[0]])!r}; keys must be "
                         "finite and in [0, 1]")
    return keys


def exact_float32_keys(keys: np.ndarray) -> np.ndarray:
    """Maps keys to float32 without changing any comparison between them.

    Decoding only compares keys, so replacing each by its dense rank (scaled into [0, 1])
    keeps placement and order exactly as with the original float64 values, where a plain
    float32 cast could merge distinct keys into ties.
    """
    keys = np.asarray(keys)
    if keys.dtype == np.float32 or keys.size == 0:
        return keys.astype(np.float32)
    if np.unique(keys.astype(np.float32)).size == np.unique(keys).size:  # no new ties
        return keys.astype(np.float32)
    values, dense = np.unique(keys, return_inverse=True)
    return (dense / max(values.size - 1, 1)).astype(np.float32)


def check_cost_params(latency: float = 0.0, bandwidth: float = float("inf"),
                      capacity: float | None = None) -> CostParams:
    """Validates cost-model settings on the host, as the float32 values the model will use."""
    with np.errstate(over="ignore", under="ignore"):
        lat, bw = np.float32(latency), np.float32(bandwidth)
        cap = np.float32(np.inf if capacity is None else capacity)
    if not (np.isfinite(lat) and lat >= 0):
        raise ValueError(f"latency must be finite, >= 0 and within float32, got {latency!r}")
    if np.isnan(bw) or not bw > 0:
        raise ValueError(f"bandwidth must be > 0 (inf allowed) within float32, got {bandwidth!r}")
    if capacity is not None and not (np.isfinite(cap) and cap >= 0):
        raise ValueError(f"capacity must be finite, >= 0 and within float32, got {capacity!r}")
    return CostParams(lat, bw, cap)


def is_int(x) -> bool:
    """A Python or NumPy integer (not a bool)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def check_search_settings(budget, num_devices, objective) -> None:
    """Validates the settings every optimizer shares: an int budget of evaluations > 0, an int
    number of devices ≥ 1 and a known objective."""
    if not is_int(budget):
        raise TypeError(f"budget must be an int (number of cost-model evaluations), "
                        f"got {budget!r}")
    if budget <= 0:
        raise ValueError(f"budget must be a positive number of evaluations, got {budget}")
    if not is_int(num_devices) or num_devices < 1:
        raise ValueError(f"num_devices must be an int >= 1, got {num_devices!r}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; expected one of {OBJECTIVES}")


def item_to_tuple(item: int, num_ops_padded: int, num_devices: int) -> tuple:
    """Padded item id → ``("op", j)`` or ``("xfer", t, d)``."""
    if item < num_ops_padded:
        return ("op", int(item))
    t, d = divmod(int(item) - num_ops_padded, num_devices)
    return ("xfer", t, d)


def evaluation_to_dict(evaluation: Evaluation, graph: Graph, bucket: Bucket,
                       num_devices: int) -> dict:
    """One (unbatched) evaluation as plain Python, with padding removed (SPEC §6 fields)."""
    ev = jax.device_get(evaluation)
    steps = int(ev.num_steps)
    return {
        "peak_memory": float(ev.peak_memory),
        "device_peaks": [float(x) for x in ev.device_peaks],
        "runtime": float(ev.runtime),
        "feasible": bool(ev.feasible),
        "placement": [int(x) for x in ev.placement[: graph.num_ops]],
        "order": [list(item_to_tuple(i, bucket.num_ops, num_devices))
                  for i in ev.order[:steps]],
    }


def evaluate_order(graph: Graph, op_order, placement=None, num_devices: int = 1, *,
                   latency: float = 0.0, bandwidth: float = float("inf"),
                   capacity: float | None = None, bucket: Bucket | None = None) -> dict:
    """Scores an explicit op order (and placement, default all on device 0) with the same cost
    model; transfers run as soon as their producer finishes. Raises if ``op_order`` is not a
    topological order of ``graph``'s ops."""
    op_order = np.asarray(op_order, np.int64)
    n = graph.num_ops
    if op_order.shape != (n,) or not np.array_equal(np.sort(op_order), np.arange(n)):
        raise ValueError(f"op order must be a permutation of the graph's {n} ops")
    position = np.empty(n, np.int64)
    position[op_order] = np.arange(n)
    producer = graph.tensor_producer[graph.edge_tensor]
    late = np.flatnonzero(position[producer] >= position[graph.edge_consumer])
    if late.size:
        k = int(late[0])
        raise ValueError(f"op order is not topological: op {int(graph.edge_consumer[k])} runs "
                         f"before its input's producer op {int(producer[k])}")
    placement = np.zeros(n, np.int64) if placement is None else np.asarray(placement, np.int64)
    if placement.shape != (n,) or placement.min(initial=0) < 0 or \
            placement.max(initial=0) >= num_devices:
        raise ValueError(f"placement must give each of the {n} ops a device in [0, {num_devices})")
    bucket = bucket or bucket_for(graph)
    padded = pad_graph(graph, bucket)
    full_order = np.concatenate([op_order, np.arange(n, bucket.num_ops)])
    full_placement = np.concatenate([placement, np.zeros(bucket.num_ops - n, np.int64)])
    keys = order_keys(padded, jnp.asarray(full_order, jnp.int32),
                      jnp.asarray(full_placement, jnp.int32), num_devices)
    return _evaluate_padded(graph, padded, bucket, keys, num_devices,
                            check_cost_params(latency, bandwidth, capacity), None)


def _evaluate_padded(graph: Graph, padded: PaddedGraph, bucket: Bucket, keys, num_devices: int,
                     params: CostParams, pinned) -> dict:
    ev = evaluate_population(padded, jnp.asarray(keys)[None], params, num_devices=num_devices,
                             pinned=pinned)
    return evaluation_to_dict(jax.tree.map(lambda x: x[0], ev), graph, bucket, num_devices)


def evaluate_graph(graph: Graph, keys, num_devices: int, *, latency: float = 0.0,
                   bandwidth: float = float("inf"), capacity: float | None = None,
                   pinned: dict[int, int] | None = None, bucket: Bucket | None = None) -> dict:
    """Validates inputs, evaluates one chromosome of ``graph`` and returns plain Python
    (the ``evaluate`` command of SPEC §6). Not for hot loops: use :func:`evaluate_population`."""
    if num_devices < 1:
        raise ValueError(f"number of devices must be >= 1, got {num_devices}")
    params = check_cost_params(latency, bandwidth, capacity)
    keys = exact_float32_keys(validate_keys(keys, graph, num_devices))
    bucket = bucket or bucket_for(graph)
    padded = pad_graph(graph, bucket)
    pin = None
    if pinned:
        pin = np.full(bucket.num_ops, -1, np.int32)
        for op, dev in pinned.items():
            if not (0 <= op < graph.num_ops and 0 <= dev < num_devices):
                raise ValueError(f"cannot pin op {op} to device {dev}")
            pin[op] = dev
    return _evaluate_padded(graph, padded, bucket, pad_keys(keys, graph, bucket, num_devices),
                            num_devices, params, pin)
