"""One call from a JAX program to a report: :func:`optimize_jax`.

``optimize_jax(fn, *args, method="brkga", devices=1, budget=5000)`` imports ``fn(*args)`` at the
compiled-HLO level (:func:`gsched.importers.import_jax`: one op per ENTRY instruction in XLA's
schedule, the arguments as program inputs, roofline costs of a device preset), scores XLA's own
schedule (``program_order``: every op on device 0, in the compiled module's order) and runs
``method`` with ``budget`` cost-model evaluations, then reports both under the same cost model.
"""

from __future__ import annotations

from typing import Any, Callable

from gsched.core.graph import Graph
from gsched.costmodel.params import CostParams
from gsched.importers import BACKEND, import_jax, preset
from gsched.methods import optimize


def _summary(row: dict) -> dict:
    keep = ("value", "peak_memory", "device_peaks", "runtime", "feasible", "evals_used",
            "placement", "order", "fusion", "start", "end")
    return {k: row[k] for k in keep if k in row}


def optimize_jax(fn: Callable, *args, method: str = "brkga", devices: int = 1,
                 budget: int = 5000, objective: str = "peak_memory", level: str = "hlo",
                 device: str = "h100", scheduler: str = "list", fusion: bool = False,
                 seed: int = 0, options: dict | None = None, backend=BACKEND,
                 **kwargs) -> dict[str, Any]:
    """Imports ``fn(*args, **kwargs)`` and compares XLA's schedule with ``method``'s result.

    ``devices``: ``D``; ``objective``: ``"peak_memory"`` or ``"runtime"``; ``device``: the preset
    whose peak flops set the costs and whose HBM bandwidth and launch overhead set the roofline
    (SPEC §8.1, time in µs); ``level``: ``"hlo"`` (XLA's schedule, the default) or ``"jaxpr"``
    (the program as written); ``backend``: the platform XLA compiles for at the HLO level
    (default the CPU, the same graph on every machine; see :func:`import_jax`);
    ``scheduler`` / ``fusion``: SPEC §8 (``program_order`` is scored under them too). Returns a dict: ``graph`` (the imported :class:`Graph`), ``baseline`` and
    ``optimized`` (value, peak memory, device peaks, runtime, placement, order, …),
    ``improvement`` (``1 − optimized / baseline`` of the objective; positive = better) and the
    settings. Raises :class:`gsched.importers.ImporterError` for a program that cannot be
    imported and ``ValueError`` for bad settings.
    """
    graph: Graph = import_jax(fn, *args, level=level, device=device, backend=backend, **kwargs)
    dev = preset(device)
    cost = CostParams(hbm_bandwidth=dev.hbm_bandwidth, launch_overhead=dev.launch_overhead)
    common = dict(num_devices=devices, objective=objective, cost_params=cost, seed=seed,
                  scheduler=scheduler, fusion=fusion)
    baseline = optimize("program_order", [graph], budget=max(budget, 1), **common).results[0]
    found = optimize(method, [graph], budget=budget, options=options, **common).results[0]
    base, best = baseline["value"], found["value"]
    return {
        "graph": graph, "num_ops": graph.num_ops, "num_tensors": graph.num_tensors,
        "method": method, "objective": objective, "devices": devices, "device": dev.name,
        "level": level, "backend": backend, "scheduler": scheduler, "fusion": fusion,
        "budget": budget,
        "baseline": _summary(baseline), "optimized": _summary(found),
        "improvement": (1.0 - best / base) if base > 0 else 0.0,
    }
