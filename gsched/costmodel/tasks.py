"""The standard optimization tasks and their cost settings — the one home of these numbers.

A task is an objective with its transfer latency and bandwidth and a per-device memory
capacity given as a *fraction* of the graphs' total tensor size (REGAL's zero-shot runtime
task sets a capacity so that some solutions are infeasible; the peak-memory task has none).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

from gsched.core.graph import Graph


class Task(NamedTuple):
    """Cost settings of one objective (SPEC §4): latency and bandwidth of a transfer, and the
    capacity as a fraction of Σ tensor sizes (``None``: no capacity)."""

    latency: float
    bandwidth: float
    capacity_fraction: float | None


TASKS = {
    "runtime": Task(latency=0.5, bandwidth=2e4, capacity_fraction=0.6),
    "peak_memory": Task(latency=0.0, bandwidth=math.inf, capacity_fraction=None),
}


def total_tensor_size(graph: Graph) -> float:
    """Σ tensor sizes of a graph, in bytes."""
    return float(graph.tensor_size.sum())


def fraction_capacity(fraction: float | None, totals: Iterable[float]) -> float | None:
    """The capacity in bytes: ``fraction`` × the smallest of ``totals`` (the Σ tensor sizes of
    the graphs that share one capacity, e.g. a batch); ``None`` when ``fraction`` is."""
    return None if fraction is None else fraction * min(totals)
