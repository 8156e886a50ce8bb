"""Host-side cost-model entry points: validate a real (unpadded) graph's inputs, pad, evaluate
one chromosome or an explicit order, and return plain Python with padding removed (SPEC §6).
Not for hot loops: batched code calls :mod:`gsched.costmodel.evaluate` directly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.graph import Graph
from gsched.core.padding import Bucket, PaddedGraph, bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import Evaluation, evaluate_population, order_keys
from gsched.costmodel.params import (
    CostParams,
    check_cost_params,
    check_duration_range,
    check_fusion,
    check_scheduler,
)


def validate_keys(keys, graph: Graph, num_devices: int, fusion: bool = False) -> np.ndarray:
    """Checks a real (unpadded) chromosome: length ``N·D + N + T·D`` (``+ N`` fusion keys with
    ``fusion``), finite, in [0, 1]."""
    keys = np.asarray(keys)
    if not np.issubdtype(keys.dtype, np.floating) and not np.issubdtype(keys.dtype, np.integer):
        raise ValueError(f"chromosome must be numeric, got dtype {keys.dtype}")
    base = graph.chromosome_length(num_devices)
    want = base + graph.num_ops if fusion else base
    if keys.ndim != 1 or keys.shape[0] != want:
        layout = "N·D + N + T·D + N" if fusion else "N·D + N + T·D"
        hint = ""
        if keys.ndim == 1 and keys.shape[0] == base + graph.num_ops and not fusion:
            hint = "; N fusion keys are only allowed with fusion on"
        elif keys.ndim == 1 and keys.shape[0] == base and fusion:
            hint = "; fusion needs N fusion keys after the transfer keys"
        raise ValueError(
            f"chromosome has shape {keys.shape}, expected ({want},) = {layout} with "
            f"N={graph.num_ops}, T={graph.num_tensors}, D={num_devices}{hint}")
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


def item_to_tuple(item: int, num_ops_padded: int, num_devices: int) -> tuple:
    """Padded item id → ``("op", j)`` or ``("xfer", t, d)``."""
    if item < num_ops_padded:
        return ("op", int(item))
    t, d = divmod(int(item) - num_ops_padded, num_devices)
    return ("xfer", t, d)


def evaluation_to_dict(evaluation: Evaluation, graph: Graph, bucket: Bucket,
                       num_devices: int) -> dict:
    """One (unbatched) evaluation as plain Python, with padding removed (SPEC §6 fields).

    For the dynamic schedulers (SPEC §8.2) it also holds ``start`` and ``end``: the start and
    end time of each item of ``order``, in the same order; with fusion (SPEC §8.3), ``fusion``:
    the root of every op's group (a fused kernel appears in ``order`` as ``["op", root]``)."""
    ev = jax.device_get(evaluation)
    steps = int(ev.num_steps)
    times = {}
    if ev.start is not None:
        items = ev.order[:steps]
        times = {"start": [float(x) for x in ev.start[items]],
                 "end": [float(x) for x in ev.end[items]]}
    if ev.fusion is not None:
        times["fusion"] = [int(x) for x in ev.fusion[: graph.num_ops]]
    return {
        "peak_memory": float(ev.peak_memory),
        "device_peaks": [float(x) for x in ev.device_peaks],
        "runtime": float(ev.runtime),
        "feasible": bool(ev.feasible),
        "placement": [int(x) for x in ev.placement[: graph.num_ops]],
        "order": [list(item_to_tuple(i, bucket.num_ops, num_devices))
                  for i in ev.order[:steps]],
        **times,
    }


def evaluate_order(graph: Graph, op_order, placement=None, num_devices: int = 1, *,
                   latency: float = 0.0, bandwidth: float = float("inf"),
                   capacity: float | None = None, bucket: Bucket | None = None,
                   hbm_bandwidth: float = float("inf"), launch_overhead: float = 0.0,
                   scheduler: str = "list", fusion: bool = False,
                   fusion_capacity: float = float("inf"), fusion_keys=None) -> dict:
    """Scores an explicit op order (and placement, default all on device 0) with the same cost
    model; transfers run as soon as their producer finishes. Raises if ``op_order`` is not a
    topological order of ``graph``'s ops.

    The order becomes priorities (:func:`order_keys`): the list scheduler reproduces it
    exactly; the dynamic schedulers (``"priority"`` / ``"fifo"``, SPEC §8.2) use them as
    priorities and may start ops in another order (see ``order`` in the result). With
    ``fusion`` (SPEC §8.3) the ops' fusion keys are ``fusion_keys`` (``[N]`` in [0, 1]), by
    default all 1: XLA-style greedy fusion of every op that may fuse."""
    check_scheduler(scheduler)
    fusion = check_fusion(fusion)
    params = check_cost_params(latency, bandwidth, capacity, hbm_bandwidth=hbm_bandwidth,
                               launch_overhead=launch_overhead, fusion_capacity=fusion_capacity)
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
    check_duration_range(graph, params, num_devices)
    bucket = bucket or bucket_for(graph)
    padded = pad_graph(graph, bucket)
    keys = order_chromosome(padded, op_order, placement, num_devices, fusion, fusion_keys)
    return _evaluate_padded(graph, padded, bucket, keys, num_devices, params, None, scheduler,
                            fusion)


def order_chromosome(padded: PaddedGraph, op_order: np.ndarray, placement: np.ndarray,
                     num_devices: int, fusion: bool = False, fusion_keys=None) -> jnp.ndarray:
    """``[L]`` the chromosome (padded layout) :func:`evaluate_order` scores for the real ops'
    ``op_order [n]`` (topological) and ``placement [n]``: :func:`order_keys`, then with
    ``fusion`` the fusion keys ``fusion_keys [n]`` (default all 1, XLA-style greedy fusion),
    0 for padding. Unchecked order and placement (``evaluate_order`` checks them)."""
    n, slots = len(op_order), padded.bucket.num_ops
    full_order = np.concatenate([op_order, np.arange(n, slots)])
    full_placement = np.concatenate([placement, np.zeros(slots - n, np.int64)])
    keys = order_keys(padded, jnp.asarray(full_order, jnp.int32),
                      jnp.asarray(full_placement, jnp.int32), num_devices)
    if fusion:
        fusion_keys = np.ones(n) if fusion_keys is None else np.asarray(fusion_keys, np.float64)
        if fusion_keys.shape != (n,) or not np.all((fusion_keys >= 0) & (fusion_keys <= 1)):
            raise ValueError(f"fusion_keys must be {n} keys in [0, 1]")
        keys = jnp.concatenate([keys, jnp.asarray(
            np.concatenate([fusion_keys, np.zeros(slots - n)]), jnp.float32)])
    elif fusion_keys is not None:
        raise ValueError("fusion_keys need fusion=True")
    return keys


def _evaluate_padded(graph: Graph, padded: PaddedGraph, bucket: Bucket, keys, num_devices: int,
                     params: CostParams, pinned, scheduler: str, fusion: bool) -> dict:
    ev = evaluate_population(padded, jnp.asarray(keys)[None], params, num_devices=num_devices,
                             pinned=pinned, scheduler=scheduler, fusion=fusion)
    return evaluation_to_dict(jax.tree.map(lambda x: x[0], ev), graph, bucket, num_devices)


def evaluate_graph(graph: Graph, keys, num_devices: int, *, latency: float = 0.0,
                   bandwidth: float = float("inf"), capacity: float | None = None,
                   pinned: dict[int, int] | None = None, bucket: Bucket | None = None,
                   hbm_bandwidth: float = float("inf"), launch_overhead: float = 0.0,
                   scheduler: str = "list", fusion: bool = False,
                   fusion_capacity: float = float("inf")) -> dict:
    """Validates inputs, evaluates one chromosome of ``graph`` and returns plain Python
    (the ``evaluate`` command of SPEC §6; with ``scheduler`` ``"priority"`` / ``"fifo"`` also
    ``start`` / ``end`` per ``order`` item; with ``fusion`` (keys ``N`` longer) also ``fusion``,
    the root of each op). Not for hot loops: use :func:`evaluate_population`."""
    if num_devices < 1:
        raise ValueError(f"number of devices must be >= 1, got {num_devices}")
    check_scheduler(scheduler)
    fusion = check_fusion(fusion)
    params = check_cost_params(latency, bandwidth, capacity, hbm_bandwidth=hbm_bandwidth,
                               launch_overhead=launch_overhead, fusion_capacity=fusion_capacity)
    keys = exact_float32_keys(validate_keys(keys, graph, num_devices, fusion))
    check_duration_range(graph, params, num_devices)
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
                            num_devices, params, pin, scheduler, fusion)
