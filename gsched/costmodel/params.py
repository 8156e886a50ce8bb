"""Cost-model settings and the checks every optimizer shares (SPEC §4, §6, §8).

Settings come in two kinds:

* **dynamic** — :class:`CostParams`: float32 arrays (``latency``, ``bandwidth``, ``capacity``,
  SPEC §8.1's ``hbm_bandwidth``, ``launch_overhead`` and §8.3's ``fusion_capacity``). They are
  traced values, so changing them never recompiles and a sweep can ``vmap`` over them. With
  the defaults (``hbm_bandwidth = inf``, ``launch_overhead = 0``) an op lasts exactly its
  ``compute_cost``: every result is bit-identical to the §2–§4 model.
* **static** — the ``scheduler`` (``"list"``, SPEC §2–§4; ``"priority"`` or ``"fifo"``, SPEC
  §8.2), ``fusion`` (SPEC §8.3: on or off) and ``num_devices``: keyword arguments of the jitted
  entry points (``gsched.costmodel.evaluate``), because they change the computation itself (a
  different loop, a longer chromosome); one compile per bucket, number of devices, scheduler and
  fusion. :func:`check_scheduler` and :func:`check_fusion` validate them. ``fusion_capacity``
  (§8.3, bytes) is dynamic, in ``CostParams``.

``OBJECTIVES`` are what an optimizer may minimize. The host-side checks turn bad settings into
errors that name them.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax.numpy as jnp
import numpy as np

from gsched.core.graph import Graph
from gsched.core.padding import FIXED_POINT_FLOOR, FLOAT32_LIMIT, FLOAT32_TINY

Objective = Literal["peak_memory", "runtime"]
OBJECTIVES = ("peak_memory", "runtime")
SCHEDULERS = ("list", "priority", "fifo")


class CostParams(NamedTuple):
    """Run-time (dynamic) cost-model settings (SPEC §4, §8.1); arrays, so a sweep can ``vmap``
    over them. The scheduler is static: see the module docstring."""

    latency: jnp.ndarray | float = 0.0  # time units per transfer
    bandwidth: jnp.ndarray | float = float("inf")  # bytes per time unit
    capacity: jnp.ndarray | float = float("inf")  # bytes per device; inf = no limit
    hbm_bandwidth: jnp.ndarray | float = float("inf")  # bytes per time unit (§8.1 roofline)
    launch_overhead: jnp.ndarray | float = 0.0  # time units per kernel (§8.1)
    fusion_capacity: jnp.ndarray | float = float("inf")  # bytes inside a fused group (§8.3)


def check_scheduler(scheduler) -> str:
    """Validates a scheduler name (a static setting): ``"list"``, ``"priority"`` or ``"fifo"``."""
    if not isinstance(scheduler, str) or scheduler not in SCHEDULERS:
        raise ValueError(f"unknown scheduler {scheduler!r}; expected one of {SCHEDULERS}")
    return scheduler


def check_chunk(chunk) -> int | None:
    """Validates the successor entries walked per iteration (a static setting): an int ≥ 1, or
    None for the decoder's own default (``LOOP_CHUNK`` / ``KERNEL_CHUNK``)."""
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer))
                              or chunk < 1):
        raise ValueError(f"chunk must be an int >= 1 or None, got {chunk!r}")
    return None if chunk is None else int(chunk)


def check_fusion(fusion) -> bool:
    """Validates the fusion switch (a static setting): a bool."""
    if not isinstance(fusion, (bool, np.bool_)):
        raise TypeError(f"fusion must be a bool, got {fusion!r}")
    return bool(fusion)


def check_cost_params(latency: float = 0.0, bandwidth: float = float("inf"),
                      capacity: float | None = None, *, hbm_bandwidth: float = float("inf"),
                      launch_overhead: float = 0.0,
                      fusion_capacity: float = float("inf")) -> CostParams:
    """Validates cost-model settings on the host, as the float32 values the model will use."""
    with np.errstate(over="ignore", under="ignore"):
        lat, bw = np.float32(latency), np.float32(bandwidth)
        cap = np.float32(np.inf if capacity is None else capacity)
        hbm, over = np.float32(hbm_bandwidth), np.float32(launch_overhead)
        fcap = np.float32(fusion_capacity)
    if not (np.isfinite(lat) and lat >= 0):
        raise ValueError(f"latency must be finite, >= 0 and within float32, got {latency!r}")
    if np.isnan(bw) or not bw > 0:
        raise ValueError(f"bandwidth must be > 0 (inf allowed) within float32, got {bandwidth!r}")
    if capacity is not None and not (np.isfinite(cap) and cap >= 0):
        raise ValueError(f"capacity must be finite, >= 0 and within float32, got {capacity!r}")
    if np.isnan(hbm) or not hbm > 0:
        raise ValueError(f"hbm_bandwidth must be > 0 (inf allowed) within float32, "
                         f"got {hbm_bandwidth!r}")
    if not (np.isfinite(over) and over >= 0):
        raise ValueError(f"launch_overhead must be finite, >= 0 and within float32, "
                         f"got {launch_overhead!r}")
    if np.isnan(fcap) or not fcap >= 0:
        raise ValueError(f"fusion_capacity must be >= 0 (inf allowed) within float32, "
                         f"got {fusion_capacity!r}")
    for name, given, value in (("latency", latency, lat), ("bandwidth", bandwidth, bw),
                               ("hbm_bandwidth", hbm_bandwidth, hbm),
                               ("launch_overhead", launch_overhead, over)):
        if 0 < abs(float(given)) and value < FLOAT32_TINY:
            raise ValueError(f"{name} {given!r} is below float32's smallest normal number "
                             f"({FLOAT32_TINY:.3g}), which XLA may flush to zero; rescale units")
    return CostParams(lat, bw, cap, hbm, over, fcap)


def check_duration_range(graph: Graph, params: CostParams, num_devices: int) -> None:
    """Raises if the durations of ``graph``'s items under ``params`` (SPEC §4, §8.1) could sum
    past :data:`~gsched.core.padding.FLOAT32_LIMIT`, or could sum to a nonzero total below
    :data:`~gsched.core.padding.FIXED_POINT_FLOOR`. The cost model's times are exact multiples
    of a unit chosen for their sum in float32: a sum that overflows leaves no unit (the jitted
    model then reports an infinite runtime), and units are normal floats, so a tiny sum would
    keep few bits. Every chromosome runs every op, so the ops' durations bound its sum from
    below (when they are all 0, so do its transfers'); from above, every op's duration and
    ``D − 1`` transfers of every tensor, in float64."""
    size = graph.tensor_size
    moved = (np.bincount(graph.edge_consumer, size[graph.edge_tensor], graph.num_ops)
             + np.bincount(graph.tensor_producer, size, graph.num_ops))  # bytes per op (§8.1)
    read = np.bincount(graph.edge_tensor, minlength=graph.num_tensors) > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ops = float(np.sum(np.maximum(graph.compute_cost, moved / float(params.hbm_bandwidth))
                           + float(params.launch_overhead)))
        # A transfer's duration, for each tensor that can move (none with one device).
        copies = (float(params.latency) + size[read] / float(params.bandwidth)
                  if num_devices > 1 else np.zeros(0))
    bound = ops + (num_devices - 1) * float(np.sum(copies))
    if not bound <= FLOAT32_LIMIT:
        raise ValueError(f"graph {graph.name!r}: with these cost settings its durations may sum "
                         f"to {bound:.3g}, beyond what the float32 cost model supports "
                         f"({FLOAT32_LIMIT:.0e}); rescale units")
    least = ops if ops > 0 else float(np.min(copies[copies > 0], initial=np.inf))
    if least < FIXED_POINT_FLOOR:
        raise ValueError(f"graph {graph.name!r}: with these cost settings its durations may sum "
                         f"to {least:.3g}, below what the float32 cost model keeps exact "
                         f"({FIXED_POINT_FLOOR:.3g}); rescale units")


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
