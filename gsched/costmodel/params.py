"""Cost-model settings and the checks every optimizer shares (SPEC §4, §6).

:class:`CostParams` holds the run-time settings (arrays, so a sweep can ``vmap`` over them);
``OBJECTIVES`` are what an optimizer may minimize. The host-side checks turn bad settings into
errors that name them.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import jax.numpy as jnp
import numpy as np

Objective = Literal["peak_memory", "runtime"]
OBJECTIVES = ("peak_memory", "runtime")


class CostParams(NamedTuple):
    """Run-time cost-model settings (SPEC §4); arrays, so a sweep can ``vmap`` over them."""

    latency: jnp.ndarray | float = 0.0  # time units per transfer
    bandwidth: jnp.ndarray | float = float("inf")  # bytes per time unit
    capacity: jnp.ndarray | float = float("inf")  # bytes per device; inf = no limit


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
