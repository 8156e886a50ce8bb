"""The optimizers the CLI (``python -m gsched optimize``) and the evaluation harness run.

A method is an entry of ``METHODS``: a :class:`Method` whose ``build(**options)`` returns its
runner. Two kinds:

* ``"search"`` — a traceable ``fn(key, graphs [B], cost_params, *, num_devices, budget,
  objective)`` returning a result with ``best_evaluation`` (leading ``[B]``) and ``evals_used``
  (``[B]``). :func:`optimize` jits it over the whole batch and compiles it ahead of time, so
  ``wall_seconds`` excludes compilation (``compile_seconds``). A runner with an
  ``info(objective)`` method (the learned ones: which checkpoint ran) adds its JSON scalars
  to every row.
* ``"heuristic"`` — a host ``fn(graph, num_devices, seed)`` returning ``(order [N],
  placement [N])`` or ``(order, placement, info)`` (``info``: JSON scalars added to the
  graph's result row), scored by the cost model; it counts ``min_evals`` evaluations.

Optional heavy imports (OR-Tools, checkpoints) happen inside ``build``, never at import.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import numpy as np

from gsched import brkga, local_search, random_search, tuning
from gsched.baselines import EVALUATIONS, HEURISTICS, cpsat, dp, ordering
from gsched.cost_model import (OBJECTIVES, CostParams, check_cost_params, check_search_settings, evaluate_order,
                               evaluation_to_dict)
from gsched.graph import Graph, topological_order
from gsched.padding import batch_graphs, bucket_for
from gsched.topoformer import hybrid as topoformer_hybrid
from gsched.topoformer import method as topoformer_method


@dataclasses.dataclass(frozen=True)
class Method:
    """An optimizer: ``build(**options)`` returns its runner (see the module docstring)."""
    summary: str
    kind: str  # "search" or "heuristic"
    build: Callable[..., Callable]
    options: tuple[str, ...] = ()  # option names ``build`` accepts
    min_evals: int = 1  # evaluations a heuristic counts
    max_devices: int | None = None  # largest D the method supports (None: any)
    objectives: tuple[str, ...] = OBJECTIVES  # objectives the method can optimize


class Outcome(NamedTuple):
    """What :func:`optimize` returns."""
    results: list[dict]  # one per graph: value, evals_used, SPEC §6 fields, method's info
    wall_seconds: float  # the search itself (and the heuristics' scoring)
    compile_seconds: float  # ahead-of-time compilation, excluded from wall_seconds


def _search(fn: Callable, **fixed) -> Callable[[], Callable]:
    """A ``build`` for ``fn(key, graphs, *, cost_params, ...)`` with ``fixed`` settings."""
    def runner(key, graphs, cost_params, **settings):
        return fn(key, graphs, cost_params=cost_params, **fixed, **settings)
    return lambda: runner


def _heuristic(name: str) -> Callable[[], Callable]:
    return lambda: HEURISTICS[name]


def _learned(name: str) -> Callable[..., Callable]:
    """A ``build`` for a REGAL-family method (``gsched.regal.method``, imported on build)."""
    def build(**options):
        from gsched.regal import method as regal_method
        return getattr(regal_method, f"build_{name}")(**options)
    return build


# Random search, BRKGA and local search take the whole cost-model interface; their defaults
# are the papers' (BRKGA: π = 100, π_e = 10, π_c = 80, ρ = 0.7, uniform genes).
METHODS: dict[str, Method] = {
    "brkga": Method("BRKGA with REGAL's defaults (uniform genes, elite bias 0.7)", "search",
                    _search(brkga.run_batch, config=brkga.BRKGAConfig())),
    "tuned_brkga": Method("BRKGA with the grid-searched setting of the objective "
                          "(gsched/baselines/tuned_brkga.json)", "search",
                          lambda: tuning.tuned_run_batch),
    "random": Method("random search: the best of the budget's uniform chromosomes", "search",
                     _search(random_search.run_batch)),
    "local_search": Method("local search: sampled best one-step device/order moves, restarts",
                           "search", _search(local_search.run_batch)),
    "regal": Method("REGAL: a GNN policy's per-node Betas guide BRKGA (400 evals of features)",
                    "search", _learned("regal"), options=("checkpoint", "decode")),
    "gas": Method("GAS: REGAL's heads on an LSTM over the topologically sorted nodes",
                  "search", _learned("gas"), options=("checkpoint", "decode")),
    "idrs": Method("IDRS: the REGAL policy's Betas with plain random sampling, no BRKGA",
                   "search", _learned("idrs"), options=("checkpoint", "decode")),
    **{name: Method(f"classical heuristic {name}", "heuristic", _heuristic(name),
                    min_evals=EVALUATIONS[name]) for name in HEURISTICS},
    # Neural Topological Ordering's single-device baselines (§5, C.3).
    "dfs_order": Method("depth-first sequencing (one device)", "heuristic",
                        functools.partial(ordering.runner, "dfs_order"), max_devices=1),
    "bfs_order": Method("breadth-first sequencing (one device)", "heuristic",
                        functools.partial(ordering.runner, "bfs_order"), max_devices=1),
    "random_orders": Method("the best of 100 random topological orders (one device)",
                            "heuristic", functools.partial(ordering.runner, "random_orders"),
                            min_evals=ordering.NUM_RANDOM_ORDERS, max_devices=1),
    "approx_dp": Method("approximate DP: beam of K sets with state collapsing (K = 100,000; "
                        "one device)", "search", dp.approx_dp_runner, options=("beam_size",),
                        max_devices=1, objectives=("peak_memory",)),
    "dfs_dp": Method("depth-first DP with a time limit (default 60 s; one device)", "heuristic",
                     dp.dfs_dp_runner, options=("time_limit",), max_devices=1,
                     objectives=("peak_memory",)),
    "cpsat": Method("CP-SAT (OR-Tools extra): exact min peak memory over orders and placements, "
                    "transfers after producers; time limit (default 60 s)", "heuristic",
                    cpsat.build, options=("time_limit",), objectives=("peak_memory",)),
    "exact_dp": Method("exact DP over scheduled sets, graphs of <= 25 ops (one device)",
                       "heuristic", dp.exact_dp_runner, max_devices=1,
                       objectives=("peak_memory",)),
    "topoformer": Method("Neural Topological Ordering: Topoformer priorities decoded greedy / "
                         "sample / beam (width 16, state collapsing); one device",
                         "search", topoformer_method.build, options=("checkpoint", "decode"),
                         max_devices=1),
    "topoformer_brkga": Method("Topoformer-seeded BRKGA: the decoded orders seed BRKGA, mutants "
                               "from rank Betas around the best one; one device", "search",
                               topoformer_hybrid.build,
                               options=("checkpoint", "decode", "concentration"),
                               max_devices=1, objectives=("peak_memory",)),
}


def method(name: str) -> Method:
    """The registered method ``name``; a ``ValueError`` lists the available ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r} (available: {', '.join(METHODS)})")
    return METHODS[name]


def _check(name: str, spec: Method, num_devices: int, budget: int, objective: str,
           options: Mapping[str, Any]) -> None:
    unknown = sorted(set(options) - set(spec.options))
    if unknown:
        accepted = ", ".join(spec.options) or "none"
        raise ValueError(f"method {name} does not take option(s) {', '.join(unknown)} "
                         f"(accepted: {accepted})")
    check_search_settings(budget=budget, num_devices=num_devices, objective=objective)
    if spec.max_devices is not None and num_devices > spec.max_devices:
        raise ValueError(f"method {name} supports at most {spec.max_devices} device(s), "
                         f"got {num_devices}")
    if objective not in spec.objectives:
        raise ValueError(f"method {name} optimizes only {', '.join(spec.objectives)}, "
                         f"not {objective}")
    if budget < spec.min_evals:
        raise ValueError(f"method {name} needs {spec.min_evals} evaluations, the budget is "
                         f"{budget}")


@functools.lru_cache(maxsize=16)
def _compiled(runner: Callable, num_devices: int, budget: int, objective: str, signature):
    """``runner`` traced and compiled ahead of time for operands of the given shapes."""
    search = jax.jit(functools.partial(runner, num_devices=num_devices, budget=budget,
                                       objective=objective))
    return search.lower(*signature).compile()


@functools.lru_cache(maxsize=16)
def _runner(name: str, options: tuple) -> Callable:
    """Built runners are cached so the compiled search is too (same function object)."""
    return METHODS[name].build(**dict(options))


def _row(graph: Graph, fields: dict, objective: str, evals_used: int, info=None) -> dict:
    return {"value": fields[objective], "evals_used": evals_used, "num_ops": graph.num_ops,
            "num_tensors": graph.num_tensors, **fields, **(info or {})}


def _placement(mesh: jax.sharding.Mesh | None, batch: int):
    """Where (key, graphs, cost params) go: the default device, or the graphs' leading axis
    split over ``mesh``'s first axis (the rest replicated), so the jitted search runs SPMD."""
    if mesh is None:
        return None
    axis = mesh.axis_names[0]
    if batch % mesh.shape[axis]:
        raise ValueError(f"{batch} graphs are not divisible by the {mesh.shape[axis]} devices "
                         f"of mesh axis {axis!r}")
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    split = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    return (replicated, split, replicated)


def _run_search(runner, graphs, num_devices, budget, objective, cost_params, seed,
                mesh) -> Outcome:
    bucket = bucket_for(graphs)
    operands = jax.device_put((jax.random.PRNGKey(seed), batch_graphs(graphs, bucket),
                               cost_params), _placement(mesh, len(graphs)))
    signature = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                            sharding=x.sharding), operands)
    start = time.perf_counter()
    compiled = _compiled(runner, num_devices, budget, objective, signature)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(*operands))
    wall_seconds = time.perf_counter() - start
    evaluations, evals_used = jax.device_get((result.best_evaluation, result.evals_used))
    info = runner.info(objective) if hasattr(runner, "info") else None
    rows = [_row(g, evaluation_to_dict(jax.tree.map(lambda x: x[b], evaluations), g, bucket,
                                       num_devices), objective, int(evals_used[b]), info)
            for b, g in enumerate(graphs)]
    return Outcome(rows, wall_seconds, compile_seconds)


def _run_heuristic(runner, spec, graphs, num_devices, objective, cost_params, seed) -> Outcome:
    costs = _cost_kwargs(cost_params)
    bucket = bucket_for(graphs)
    start = time.perf_counter()  # compile the scoring (every bucket the heuristics use) first
    warm = {(bucket, num_devices): graphs[0]}
    if spec.min_evals > 1:  # xla_default also scores its candidates with D = 1, own buckets
        warm |= {(bucket_for(g), 1): g for g in graphs}
    for (b, devices), g in warm.items():
        evaluate_order(g, topological_order(g), np.zeros(g.num_ops, np.int64), devices,
                       bucket=b, **(costs if devices == num_devices else {}))
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    rows = []
    for g in graphs:
        order, placement, *info = runner(g, num_devices, seed)
        fields = evaluate_order(g, order, placement, num_devices, bucket=bucket, **costs)
        rows.append(_row(g, fields, objective, spec.min_evals, *info))
    return Outcome(rows, time.perf_counter() - start, compile_seconds)


def _cost_kwargs(cost_params: CostParams) -> dict:
    """``CostParams`` as the keyword arguments of the host entry points (inf capacity = None)."""
    capacity = float(cost_params.capacity)
    return dict(latency=float(cost_params.latency), bandwidth=float(cost_params.bandwidth),
                capacity=None if np.isinf(capacity) else capacity)


def optimize(name: str, graphs: Sequence[Graph], *, num_devices: int, budget: int,
             objective: str = "peak_memory", cost_params: CostParams = CostParams(),
             seed: int = 0, options: Mapping[str, Any] | None = None,
             mesh: jax.sharding.Mesh | None = None) -> Outcome:
    """Runs method ``name`` on ``graphs`` (one batch, padded to one bucket) with ``budget``
    cost-model evaluations per graph. Bad settings raise ``ValueError`` naming the problem.

    ``mesh``: a search method's batch is split over its first axis (the number of graphs must
    be divisible by its size); the results are those of the unsharded run. Heuristics run on
    the host and ignore it."""
    spec = method(name)
    options = dict(options or {})
    _check(name, spec, num_devices, budget, objective, options)
    if not graphs:
        raise ValueError("no graphs to optimize")
    cost_params = check_cost_params(**_cost_kwargs(cost_params))
    runner = _runner(name, tuple(sorted(options.items())))
    if spec.kind == "search":
        return _run_search(runner, list(graphs), num_devices, budget, objective, cost_params,
                           seed, mesh)
    return _run_heuristic(runner, spec, list(graphs), num_devices, objective, cost_params, seed)
