"""The method registry: every optimizer the CLI (``python -m gsched optimize``) and the
evaluation harness run, by name, and :func:`optimize`, which runs one on a batch of graphs.

``METHODS`` merges the built-in searches and baselines with the entries that each policy
package exports (``PLUGINS``: a package with a ``METHODS`` dict of :class:`Method`). Adding a
learned policy = its package under ``gsched/policies/`` + one line in ``PLUGINS`` + a training
config. What a method and its runner are: :mod:`gsched.registry`.

A search runner is jitted over the whole batch and compiled ahead of time, so
``wall_seconds`` excludes compilation (``compile_seconds``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import jax
import numpy as np

from gsched.baselines import EVALUATIONS, HEURISTICS, cpsat, dp, ordering, program_order
from gsched.baselines.heuristics import single_device
from gsched.baselines.placement import PLACEMENT_BASELINES
from gsched.core.graph import Graph, topological_order
from gsched.core.padding import batch_graphs, bucket_for, pad_graph
from gsched.costmodel.host import evaluate_order, evaluation_to_dict, order_chromosome
from gsched.costmodel.params import (
    CostParams,
    check_cost_params,
    check_duration_range,
    check_fusion,
    check_scheduler,
    check_search_settings,
)
from gsched.infra import resources
from gsched.policies import go, hdp, regal, topoformer
from gsched.registry import GENES, SEED_FROM, TIME_LIMIT, Method, Option, Search
from gsched.search import annealing, brkga
from gsched.search import local as local_search
from gsched.search import random as random_search
from gsched.search import tuned as tuning
from gsched.search.common import SearchResult

PLUGINS = (regal, topoformer, go, hdp)  # packages exporting METHODS


class Outcome(NamedTuple):
    """What :func:`optimize` returns."""
    results: list[dict]  # one per graph: value, evals_used, SPEC §6 fields, method's info
    wall_seconds: float  # the search itself (and the heuristics' scoring)
    compile_seconds: float  # ahead-of-time compilation, excluded from wall_seconds


def _searched(run_batch: Callable, **fixed) -> Callable[..., Search]:
    """A ``build`` for ``run_batch`` with ``fixed`` settings, to which the method's options
    (``genes``, ...) are added."""
    return lambda **options: Search(run_batch, {**fixed, **options})


def _brkga(run_batch: Callable, **fixed) -> Callable[..., Search]:
    """:func:`_searched` for a BRKGA ``run_batch``: the runner returns the
    :class:`SearchResult` part of its result."""
    return _searched(lambda *a, **kw: run_batch(*a, **kw).search_result(), **fixed)


def _heuristic(name: str) -> Callable[[], Callable]:
    return lambda: HEURISTICS[name]


BEAM_SIZE = Option("beam_size", int, "approx_dp: beam width K (default 100,000)")

CHAINS = Option("chains", int, "annealing: independent Metropolis chains per graph (default 8)")


# Random search, BRKGA, local search and annealing take the whole cost-model interface (SPEC §8
# included); BRKGA's defaults are the paper's (π = 100, π_e = 10, π_c = 80, ρ = 0.7, uniform
# genes).
_BUILT_IN: dict[str, Method] = {
    "brkga": Method("BRKGA with REGAL's defaults (uniform genes, elite bias 0.7)", "search",
                    _brkga(brkga.run_batch, config=brkga.BRKGAConfig()),
                    options=(GENES, SEED_FROM), exec_model=True),
    "tuned_brkga": Method("BRKGA with the grid-searched setting of the objective "
                          "(gsched/search/tuned_brkga.json)", "search",
                          _brkga(tuning.tuned_run_batch), options=(GENES, SEED_FROM),
                          exec_model=True),
    "random": Method("random search: the best of the budget's uniform chromosomes", "search",
                     _searched(random_search.run_batch), options=(GENES,), exec_model=True),
    "local_search": Method("local search: sampled best one-step device/order/fusion moves, "
                           "restarts", "search", _searched(local_search.run_batch),
                           options=(GENES, SEED_FROM), exec_model=True),
    "annealing": Method("simulated annealing (GO's SA baseline): Metropolis chains of one-op "
                        "device/priority/fusion moves", "search",
                        _searched(annealing.run_batch), options=(GENES, CHAINS, SEED_FROM),
                        exec_model=True),
}
_BASELINES: dict[str, Method] = {
    **{name: Method(f"classical heuristic {name}", "heuristic", _heuristic(name),
                    min_evals=EVALUATIONS[name]) for name in HEURISTICS},
    # Neural Topological Ordering's single-device baselines (§5, C.3).
    "dfs_order": Method("depth-first sequencing (one device)", "heuristic",
                        functools.partial(ordering.build, "dfs_order"), max_devices=1),
    "bfs_order": Method("breadth-first sequencing (one device)", "heuristic",
                        functools.partial(ordering.build, "bfs_order"), max_devices=1),
    "random_orders": Method("the best of 100 random topological orders (one device)",
                            "heuristic", functools.partial(ordering.build, "random_orders"),
                            min_evals=ordering.NUM_RANDOM_ORDERS, max_devices=1),
    "approx_dp": Method("approximate DP: beam of K sets with state collapsing (K = 100,000; "
                        "one device)", "search", dp.build_approx_dp, options=(BEAM_SIZE,),
                        max_devices=1, objectives=("peak_memory",)),
    "dfs_dp": Method("depth-first DP with a time limit (default 60 s; one device)", "heuristic",
                     dp.build_dfs_dp, options=(TIME_LIMIT,), max_devices=1,
                     objectives=("peak_memory",)),
    "cpsat": Method("CP-SAT (OR-Tools extra): exact min peak memory over orders and placements, "
                    "transfers after producers; time limit (default 60 s)", "heuristic",
                    cpsat.build_cpsat, options=(TIME_LIMIT,), objectives=("peak_memory",)),
    "program_order": Method("the graph file's own op order (program order of a jaxpr import, "
                            "XLA's schedule of an HLO import), every op on device 0",
                            "heuristic", program_order.build),
    "exact_dp": Method("exact DP over scheduled sets, graphs of <= 25 ops (one device)",
                       "heuristic", dp.build_exact_dp, max_devices=1,
                       objectives=("peak_memory",)),
    # GDP's and GO's placement baselines (score them with --scheduler fifo, as the papers do).
    "tf_default": Method("TensorFlow's default (GDP's single-GPU row): every op on device 0, "
                         "topological order", "heuristic",
                         lambda: single_device(topological_order)),
    **{name: Method(summary, "heuristic", lambda fn=fn: fn)
       for name, (summary, fn) in PLACEMENT_BASELINES.items()},
}


def _merge(*tables: Mapping[str, Method]) -> dict[str, Method]:
    merged: dict[str, Method] = {}
    for table in tables:
        clash = sorted(set(merged) & set(table))
        if clash:
            raise ValueError(f"method name(s) registered twice: {', '.join(clash)}")
        merged.update(table)
    return merged


# Order: searches, REGAL's family, the baselines, then the other plugins (the CLI lists it).
METHODS: dict[str, Method] = _merge(_BUILT_IN, PLUGINS[0].METHODS, _BASELINES,
                                    *(plugin.METHODS for plugin in PLUGINS[1:]))


def options() -> dict[str, tuple[Option, list[str]]]:
    """Every option of the registry → (the option, the methods that take it). Methods that
    share an option name must share its type (``ValueError`` otherwise)."""
    found: dict[str, tuple[Option, list[str]]] = {}
    for name, spec in METHODS.items():
        for option in spec.options:
            known, users = found.setdefault(option.name, (option, []))
            if known.type is not option.type:
                raise ValueError(f"option {option.name!r} has type {known.type.__name__} for "
                                 f"{users[0]} but {option.type.__name__} for {name}")
            users.append(name)
    return found


def method(name: str) -> Method:
    """The registered method ``name``; a ``ValueError`` lists the available ones."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r} (available: {', '.join(METHODS)})")
    return METHODS[name]


def _check(name: str, spec: Method, num_devices: int, budget: int, objective: str,
           options: Mapping[str, Any], scheduler: str = "list", fusion: bool = False) -> None:
    unknown = sorted(set(options) - set(spec.option_names))
    if unknown:
        accepted = ", ".join(spec.option_names) or "none"
        raise ValueError(f"method {name} does not take option(s) {', '.join(unknown)} "
                         f"(accepted: {accepted})")
    check_search_settings(budget=budget, num_devices=num_devices, objective=objective)
    if spec.max_devices is not None and num_devices > spec.max_devices:
        raise ValueError(f"method {name} supports at most {spec.max_devices} device(s), "
                         f"got {num_devices}")
    if objective not in spec.objectives:
        raise ValueError(f"method {name} optimizes only {', '.join(spec.objectives)}, "
                         f"not {objective}")
    check_scheduler(scheduler)
    if spec.kind == "search" and not spec.exec_model and (scheduler != "list" or fusion):
        raise ValueError(f"method {name} runs only under the list scheduler without fusion "
                         f"(got scheduler {scheduler!r}, fusion {fusion})")
    if budget < spec.min_evals:
        raise ValueError(f"method {name} needs {spec.min_evals} evaluations, the budget is "
                         f"{budget}")


@functools.lru_cache(maxsize=16)
def _compiled(runner: Callable, num_devices: int, budget: int, objective: str, signature,
              model: tuple = ()):
    """``runner`` traced and compiled ahead of time for operands of the given shapes;
    ``model``: the cost model's static settings as ``(name, value)`` pairs, if it takes them."""
    search = jax.jit(functools.partial(runner, num_devices=num_devices, budget=budget,
                                       objective=objective, **dict(model)))
    return search.lower(*signature).compile()


@functools.lru_cache(maxsize=16)
def _runner(name: str, options: tuple) -> Callable:
    """Built runners are cached so the compiled search is too (same function object)."""
    return METHODS[name].build(**dict(options))


def release_compiled(only_if_crowded: bool = False) -> bool:
    """Drops the compiled searches (this module's and JAX's caches) so their memory mappings
    are freed (:mod:`gsched.infra.resources`: a process holds ~60 such executables at most);
    with ``only_if_crowded``, only when the process nears the mapping cap. Returns whether it
    dropped them."""
    if only_if_crowded:
        return resources.release_if_crowded(_compiled)
    resources.release_compiled(_compiled)
    return True


def _row(graph: Graph, fields: dict, objective: str, evals_used: int, info=None) -> dict:
    return {"value": fields[objective], "evals_used": evals_used, "num_ops": graph.num_ops,
            "num_tensors": graph.num_tensors, **fields, **(info or {})}


def _placement(mesh: jax.sharding.Mesh | None, batch: int, seeded: bool):
    """Where (key, graphs, cost params[, seeds]) go: the default device, or ``mesh``'s
    devices, so the jitted search runs SPMD: the graphs' (and seeds') leading axis split over
    the mesh's first axis when ``batch`` divides evenly, else replicated (each evaluation then
    splits its chromosomes, ``evaluate_batch``); the rest replicated."""
    if mesh is None:
        return None
    axis = mesh.axis_names[0]
    replicated = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    per_graph = replicated
    if batch % mesh.shape[axis] == 0:
        per_graph = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(axis))
    return (replicated, per_graph, replicated) + ((per_graph,) if seeded else ())


def seed_chromosomes(names: tuple[str, ...], graphs: list[Graph], bucket, num_devices: int,
                      seed: int, fusion: bool) -> np.ndarray:
    """``[B, S, L]`` the solutions of the heuristics ``names`` on ``graphs`` as padded
    chromosomes: those their rows are scored by (with ``fusion``, every fusion key 1). What
    ``seed_from`` passes to a search (and the seed controls use)."""
    def chromosome(name, graph, padded):
        order, placement, *_ = _runner(name, ())(graph, num_devices, seed)
        return np.asarray(order_chromosome(padded, order, placement, num_devices, fusion))

    return np.asarray([[chromosome(name, g, pad_graph(g, bucket)) for name in names]
                       for g in graphs], np.float32)


def _seeding(spec_name: str, value: str, num_devices: int, budget: int,
             objective: str) -> tuple[tuple[str, ...], int]:
    """The heuristics of ``--seed-from value`` and the evaluations they count, checked."""
    names = tuple(part.strip() for part in str(value).split(","))
    if not all(names) or len(set(names)) != len(names):
        raise ValueError(f"method {spec_name}: seed_from must name distinct heuristics, "
                         f"comma-separated, got {value!r}")
    heuristics = [n for n, m in METHODS.items() if m.kind == "heuristic"]
    for name in names:
        if name not in heuristics:
            raise ValueError(f"method {spec_name}: seed_from {name!r} is not a heuristic "
                             f"(heuristics: {', '.join(heuristics)})")
        try:
            _check(name, METHODS[name], num_devices, budget, objective, {})
        except ValueError as err:
            raise ValueError(f"method {spec_name}: seed_from: {err}") from None
    evals = sum(METHODS[name].min_evals for name in names)
    if evals >= budget:
        raise ValueError(f"method {spec_name}: the seeds of {', '.join(names)} count {evals} "
                         f"evaluation(s), the budget is {budget}: nothing is left to search")
    return names, evals


def _run_search(runner, graphs, num_devices, budget, objective, cost_params, seed,
                mesh, model: tuple, seed_from: tuple[str, ...] = (),
                seed_evals: int = 0) -> Outcome:
    """The search ``runner`` on ``graphs``; with ``seed_from``, seeded by those heuristics'
    solutions, which count ``seed_evals`` of the ``budget`` and are timed with the search."""
    bucket = bucket_for(graphs)
    operands = (jax.random.PRNGKey(seed), batch_graphs(graphs, bucket), cost_params)
    start = time.perf_counter()
    if seed_from:
        operands += (seed_chromosomes(seed_from, graphs, bucket, num_devices, seed,
                                       dict(model).get("fusion", False)),)
    seed_seconds = time.perf_counter() - start
    operands = jax.device_put(operands, _placement(mesh, len(graphs), bool(seed_from)))
    signature = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype,
                                                            sharding=x.sharding), operands)
    start = time.perf_counter()
    with contextlib.nullcontext() if mesh is None else jax.set_mesh(mesh):
        try:
            compiled = _compiled(runner, num_devices, budget - seed_evals, objective,
                                 signature, model)
        except ValueError as err:
            if not seed_from:
                raise
            raise ValueError(f"{err} (the search's budget: {budget} less the {seed_evals} "
                             f"evaluation(s) of the seeds of {', '.join(seed_from)})") from err
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(*operands))
    wall_seconds = time.perf_counter() - start + seed_seconds
    if not isinstance(result, SearchResult):
        raise TypeError(f"a search runner must return a SearchResult, got "
                        f"{type(result).__name__}")
    evaluations, evals_used = jax.device_get((result.best_evaluation, result.evals_used))
    info = runner.info(objective) | ({"seed_from": ",".join(seed_from)} if seed_from else {})
    rows = [_row(g, evaluation_to_dict(jax.tree.map(lambda x: x[b], evaluations), g, bucket,
                                       num_devices), objective, int(evals_used[b]) + seed_evals,
                 info)
            for b, g in enumerate(graphs)]
    return Outcome(rows, wall_seconds, compile_seconds)


def _run_heuristic(runner, spec, graphs, num_devices, objective, cost_params, seed,
                   model: tuple) -> Outcome:
    costs = _cost_kwargs(cost_params)
    model = dict(model)
    bucket = bucket_for(graphs)
    start = time.perf_counter()  # compile the scoring (every bucket the heuristics use) first
    warm = {(bucket, num_devices): graphs[0]}
    if spec.min_evals > 1:  # xla_default also scores its candidates with D = 1, own buckets
        warm |= {(bucket_for(g), 1): g for g in graphs}
    for (b, devices), g in warm.items():
        evaluate_order(g, topological_order(g), np.zeros(g.num_ops, np.int64), devices,
                       bucket=b, **(costs | model if devices == num_devices else {}))
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    rows = []
    for g in graphs:
        order, placement, *info = runner(g, num_devices, seed)
        fields = evaluate_order(g, order, placement, num_devices, bucket=bucket, **costs,
                                **model)
        rows.append(_row(g, fields, objective, spec.min_evals, *info))
    return Outcome(rows, time.perf_counter() - start, compile_seconds)


def _cost_kwargs(cost_params: CostParams) -> dict:
    """``CostParams`` as the keyword arguments of the host entry points (inf capacity = None);
    every field, so none is dropped on the way (tested)."""
    capacity = float(cost_params.capacity)
    return dict(latency=float(cost_params.latency), bandwidth=float(cost_params.bandwidth),
                capacity=None if np.isinf(capacity) else capacity,
                hbm_bandwidth=float(cost_params.hbm_bandwidth),
                launch_overhead=float(cost_params.launch_overhead),
                fusion_capacity=float(cost_params.fusion_capacity))


def optimize(name: str, graphs: Sequence[Graph], *, num_devices: int, budget: int,
             objective: str = "peak_memory", cost_params: CostParams = CostParams(),
             seed: int = 0, options: Mapping[str, Any] | None = None,
             mesh: jax.sharding.Mesh | None = None, scheduler: str = "list",
             fusion: bool = False) -> Outcome:
    """Runs method ``name`` on ``graphs`` (one batch, padded to one bucket) with ``budget``
    cost-model evaluations per graph. Bad settings raise ``ValueError`` naming the problem.

    ``scheduler`` and ``fusion``: the cost model's static settings (SPEC §8). Searches that
    declare ``exec_model`` search under them (with fusion, over fusion keys too); heuristics
    are scored under them, with every fusion key 1 (XLA-style greedy fusion) when ``fusion``.

    ``options["seed_from"]`` (methods that declare ``SEED_FROM``): comma-separated heuristics
    run on the host first; their solutions, as chromosomes (with ``fusion``, every fusion key
    1), are passed to the runner as ``seeds [B, S, L]``, and their evaluations
    (``min_evals``) are counted in ``budget`` and ``evals_used``.

    ``mesh``: a search method's work is split over its first axis: the search is compiled
    under the mesh, and each cost-model evaluation runs one schedule loop per device on the
    graphs when their number divides by the axis size, else on each graph's chromosomes when
    the call's do and the bucket is large enough (``evaluate_batch``; one graph, say); the
    results are those of the unsharded run. Heuristics run on the host and ignore it."""
    spec = method(name)
    options = dict(options or {})
    fusion = check_fusion(fusion)
    _check(name, spec, num_devices, budget, objective, options, scheduler, fusion)
    if not graphs:
        raise ValueError("no graphs to optimize")
    cost_params = check_cost_params(**_cost_kwargs(cost_params))
    for graph in graphs:
        check_duration_range(graph, cost_params, num_devices)
    seeding = ()
    if "seed_from" in options:  # optimize's, not build's: the runner gets the seeds
        seeding = _seeding(name, options.pop("seed_from"), num_devices, budget, objective)
    runner = _runner(name, tuple(sorted(options.items())))
    model = (("scheduler", scheduler), ("fusion", fusion))
    if spec.kind == "search":
        return _run_search(runner, list(graphs), num_devices, budget, objective, cost_params,
                           seed, mesh, model if spec.exec_model else (), *seeding)
    return _run_heuristic(runner, spec, list(graphs), num_devices, objective, cost_params, seed,
                          model)
