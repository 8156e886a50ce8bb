"""Controls for REGAL's gains (issue #15 §1): where does REGAL's improvement over BRKGA come
from — the policy, or the pipeline around it?

REGAL (:func:`gsched.policies.regal.rollout.guided_search`) is a pipeline: a 400-evaluation
uniform BRKGA *feature run* with the largest-memory op pinned to device 0
(:func:`gsched.policies.regal.features.pinned_ops`), the policy's per-gene BRKGA parameters,
a BRKGA with the remaining budget and the same pin, and the better of the two searches' bests.
Each variant below spends exactly ``budget`` cost-model evaluations per graph:

* ``regal`` — the shipped policy of the objective (``DEFAULT_CHECKPOINTS["regal"]``), greedy
  decoding: exactly the registry's ``regal`` method;
* ``uniform_genes`` — the same pipeline with the policy's action replaced by the identity:
  BRKGA parameters equal to plain BRKGA's (``Beta(1, 1)`` genes, elite bias 0.7,
  :func:`gsched.search.brkga.uniform_params`). REGAL A.2's quantization has no action that
  dequantizes to ``Beta(1, 1)`` (with ``k = 2`` levels ``μ ∈ {1/3, 2/3}``; with any ``k`` the
  variance levels miss ``1/12``), so the parameters are built directly. Same keys as
  ``regal``: the feature run is the same run, only the second search's genes differ;
* ``untrained`` — the pipeline with an untrained policy: the shipped checkpoint's
  ``PolicyConfig`` at its initial parameters (``init_models(config, jax.random.key(0))``, the
  template the checkpoint loader restores into);
* ``brkga_pinned`` — plain BRKGA with the whole budget and the op REGAL pins pinned (same key
  as ``brkga``, so pinning is the only difference);
* ``brkga`` — plain BRKGA (the reference, BRKGA 5K): exactly the registry's ``brkga``.

Graphs, batches and cost settings are the sweeps' (``eval/configs/<dataset>.toml``, loaded by
:func:`gsched.harness.config.parse_config`): graphs sorted by size, batches of the config's
``batch_size`` filled up with copies of their first graph, the capacity resolved on each
batch's real graphs, ``jax.random.PRNGKey(seed)`` per batch — so with all graphs the
``regal`` and ``brkga`` rows of seed 0 reproduce the committed sweep rows. D = 2 (the
shipped policies' device count).

:func:`run_controls` appends one row per (dataset, graph, objective, variant, seed) to a JSON-
lines file and skips batches already there with the same cell hash (resumable);
:func:`markdown` turns the rows into the tables (:func:`summarize`): per variant the mean %
improvement over BRKGA (per seed, mean over graphs; then mean ± sample std over seeds) and
the fraction of (graph, seed) pairs at least as good as BRKGA, and the improvement over a
steadier reference (each graph's BRKGA value averaged over the seeds); per comparison the
paired difference in percentage points with a 95 % bootstrap interval over graphs (seeds averaged
within a graph) and a two-sided sign test on the per-graph mean differences.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.graph import Graph
from gsched.core.padding import batch_graphs, bucket_for
from gsched.costmodel.params import CostParams, check_cost_params
from gsched.harness.benchmarks import machine_description
from gsched.harness.config import Objective, parse_config
from gsched.harness.units import graph_digest
from gsched.infra import config as typed
from gsched.infra import resources
from gsched.infra.progress import log as default_log
from gsched.infra.progress import read_jsonl
from gsched.policies.regal.checkpoint import DEFAULT_CHECKPOINTS, load_policy
from gsched.policies.regal.features import compute_features, pinned_ops
from gsched.policies.regal.policy import Policy, PolicyConfig
from gsched.policies.regal.reinforce import init_models
from gsched.policies.regal.rollout import (
    FEATURE_EVALS,
    REGAL_BRKGA,
    better_of,
    guided_search,
    policy_search,
)
from gsched.search import brkga
from gsched.search.common import SearchResult

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {  # dataset → the sweep config whose graphs, batches and objectives are reused
    "synthetic": ROOT / "eval" / "configs" / "synthetic.toml",
    "synthetic_large": ROOT / "eval" / "configs" / "synthetic_large.toml",
    "moccasin": ROOT / "eval" / "configs" / "moccasin.toml",
}
VARIANTS = ("regal", "uniform_genes", "untrained", "brkga_pinned", "brkga")
LABELS = {
    "regal": "REGAL (shipped policy)",
    "uniform_genes": "feature run + pinning, uniform genes",
    "untrained": "REGAL pipeline, untrained policy",
    "brkga_pinned": "BRKGA, largest op pinned",
    "brkga": "BRKGA (reference)",
}
REFERENCE = "brkga"
# Paired comparisons (a − b): REGAL against each control, and the pipeline decomposed
# (pinning, then the feature run's restart and better-of, then the policy).
COMPARISONS = (
    ("regal", "brkga"), ("regal", "uniform_genes"), ("regal", "untrained"),
    ("regal", "brkga_pinned"),
    ("brkga_pinned", "brkga"), ("uniform_genes", "brkga_pinned"), ("untrained", "uniform_genes"),
)
NUM_DEVICES = 2
BUDGET = 5000
BOOTSTRAP = 10_000


# --- Tasks: the sweeps' graphs and cost settings ------------------------------------------


@dataclasses.dataclass(frozen=True)
class Task:
    """One (dataset, objective): its graphs (sorted by size) and batch size."""

    dataset: str
    objective: Objective
    graphs: tuple[Graph, ...]
    batch_size: int

    def batches(self) -> list[tuple[Graph, ...]]:
        return [self.graphs[i: i + self.batch_size]
                for i in range(0, len(self.graphs), self.batch_size)]


def spaced(items: Sequence, count: int | None) -> list:
    """``count`` items evenly spaced over ``items`` (first and last kept); all when ``None``."""
    if count is None or count >= len(items):
        return list(items)
    if count < 1:
        raise ValueError(f"max graphs must be >= 1, got {count}")
    if count == 1:
        return [items[0]]
    picks = np.round(np.linspace(0, len(items) - 1, count)).astype(int)
    return [items[i] for i in picks]


def load_tasks(datasets: Sequence[str] = tuple(CONFIGS), max_graphs: dict[str, int] | None = None,
               log: Callable[[str], None] = default_log) -> list[Task]:
    """The (dataset, objective) tasks of the sweep configs: their graphs (``max_graphs[name]``
    evenly spaced by size when given; the batch size then shrinks to at most that many, so no
    batch is filled with copies), batch sizes and objectives. A dataset of files that is not
    on this machine (the moccasin graphs live outside the repository) is skipped with a
    note."""
    tasks = []
    for name in datasets:
        if name not in CONFIGS:
            raise ValueError(f"unknown dataset {name!r} (known: {', '.join(CONFIGS)})")
        raw = typed.read_toml(CONFIGS[name])
        for spec in raw["datasets"]:
            path = spec.get("path")
            if spec["source"] == "files" and path and not Path(path).is_absolute():
                spec["path"] = str(ROOT / path)  # relative to the repository root, as `make`
        missing = [s["path"] for s in raw["datasets"]
                   if s["source"] == "files" and not Path(s["path"]).exists()]
        if missing:
            log(f"dataset {name}: {', '.join(missing)} is not on this machine: skipped")
            continue
        raw = {**raw, "methods": [{"name": "brkga"}], "seeds": [0]}
        config = parse_config(raw, name, source=str(CONFIGS[name]))
        dataset, = config.datasets
        graphs = tuple(spaced(dataset.graphs, (max_graphs or {}).get(name)))
        batch = min(config.batch_size, len(graphs))
        tasks += [Task(name, objective, graphs, batch) for objective in config.objectives]
    return tasks


# --- The variants (traceable runners on graphs [B]) ---------------------------------------


def uniform_genes_search(key: jax.Array, graphs, cost_params: CostParams, *, num_devices: int,
                         budget: int, objective: str, feature_evals: int = FEATURE_EVALS
                         ) -> SearchResult:
    """REGAL's pipeline (:func:`~gsched.policies.regal.rollout.guided_search`: the same key
    split, the feature run with the pin, the second search with the same pin, the better of
    the two) with plain BRKGA's parameters instead of the policy's."""
    if budget <= feature_evals:
        raise ValueError(f"budget {budget} must exceed the {feature_evals} feature evaluations")
    key_features, _, key_search = jax.random.split(key, 3)
    features, first = compute_features(key_features, graphs, cost_params,
                                       num_devices=num_devices, objective=objective,
                                       search_evals=feature_evals)
    params = brkga.uniform_params(graphs.bucket.chromosome_length(num_devices))
    second = policy_search(key_search, graphs, params, features.pinned, cost_params,
                           num_devices=num_devices, budget=budget - feature_evals,
                           objective=objective)
    used = jnp.full(graphs.op_mask.shape[:1], budget, jnp.int32)
    return better_of(SearchResult(first.best_value, first.best_keys, first.best_evaluation,
                                  used), second, used)


def pinned_brkga_search(key: jax.Array, graphs, cost_params: CostParams, *, num_devices: int,
                        budget: int, objective: str) -> SearchResult:
    """Plain BRKGA with the whole budget and REGAL's pinned op on device 0."""
    return brkga.run_batch(key, graphs, REGAL_BRKGA, num_devices=num_devices, budget=budget,
                           objective=objective, cost_params=cost_params,
                           pinned=pinned_ops(graphs)).search_result()


def brkga_search(key: jax.Array, graphs, cost_params: CostParams, *, num_devices: int,
                 budget: int, objective: str) -> SearchResult:
    """Plain BRKGA (the registry's ``brkga``: REGAL §4.2 defaults, uniform genes)."""
    return brkga.run_batch(key, graphs, REGAL_BRKGA, num_devices=num_devices, budget=budget,
                           objective=objective, cost_params=cost_params).search_result()


def _policy_search(policy: Policy, key, graphs, cost_params, *, num_devices, budget, objective,
                   feature_evals):
    return guided_search(key, policy, graphs, cost_params, num_devices=num_devices,
                         budget=budget, objective=objective, feature_evals=feature_evals)


def _plain(fn):
    return lambda policy, key, graphs, cost_params, *, feature_evals, **kw: fn(
        key, graphs, cost_params, **kw)


def _uniform(policy, key, graphs, cost_params, *, feature_evals, **kw):
    return uniform_genes_search(key, graphs, cost_params, feature_evals=feature_evals, **kw)


# variant → fn(policy, key, graphs, cost_params, *, num_devices, budget, objective,
# feature_evals); the policy is a traced argument, so REGAL and the untrained policy share
# one compiled program.
RUNNERS = {
    "regal": _policy_search,
    "uniform_genes": _uniform,
    "untrained": _policy_search,
    "brkga_pinned": _plain(pinned_brkga_search),
    "brkga": _plain(brkga_search),
}


@dataclasses.dataclass(frozen=True)
class Policies:
    """Per objective: the shipped policy, the untrained one, the feature budget, the path."""

    shipped: Policy
    untrained: Policy
    feature_evals: int
    checkpoint: str


def untrained_policy(meta: dict) -> Policy:
    """The policy of a checkpoint's ``PolicyConfig`` at its initial parameters."""
    config = typed.config_from_dict(PolicyConfig, meta["config"]["policy"], source="checkpoint")
    return init_models(config, jax.random.key(0))[0]


@functools.lru_cache(maxsize=4)
def policies(objective: str) -> Policies:
    """The shipped policy of ``objective`` (``DEFAULT_CHECKPOINTS["regal"]``) and its
    untrained twin."""
    path = DEFAULT_CHECKPOINTS["regal"][objective]
    policy, meta = load_policy(path)
    evals = int(meta["config"].get("feature_evals", FEATURE_EVALS))
    return Policies(policy, untrained_policy(meta), evals,
                    str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path))


@functools.lru_cache(maxsize=16)
def _compiled(variant_fn, num_devices: int, budget: int, objective: str, feature_evals: int,
              treedef, specs: tuple):
    fn = jax.jit(functools.partial(variant_fn, num_devices=num_devices, budget=budget,
                                   objective=objective, feature_evals=feature_evals))
    return fn.lower(*jax.tree.unflatten(treedef, specs)).compile()


def run_variant(variant: str, graphs: Sequence[Graph], cost_params: CostParams, *, seed: int,
                objective: str, budget: int = BUDGET, num_devices: int = NUM_DEVICES,
                feature_evals: int | None = None) -> tuple[list[dict], float, float]:
    """One batch: per graph ``{value, feasible, peak_memory, runtime, evals_used}``, the
    search's wall seconds and the compilation seconds. ``feature_evals``: the policies'
    (``None``: the checkpoint's, 400)."""
    pol = policies(objective)
    evals = pol.feature_evals if feature_evals is None else feature_evals
    policy = pol.untrained if variant == "untrained" else pol.shipped
    bucket = bucket_for(graphs)
    cost_params = check_cost_params(
        latency=float(cost_params.latency), bandwidth=float(cost_params.bandwidth),
        capacity=None if math.isinf(float(cost_params.capacity)) else float(cost_params.capacity))
    operands = (policy, jax.random.PRNGKey(seed), batch_graphs(list(graphs), bucket),
                cost_params)
    leaves, treedef = jax.tree.flatten(operands)
    specs = tuple(jax.ShapeDtypeStruct(np.shape(x), x.dtype) for x in leaves)
    start = time.perf_counter()
    compiled = _compiled(RUNNERS[variant], num_devices, budget, objective, evals, treedef,
                         specs)
    compile_seconds = time.perf_counter() - start
    start = time.perf_counter()
    result = jax.block_until_ready(compiled(*operands))
    wall = time.perf_counter() - start
    ev, used = jax.device_get((result.best_evaluation, result.evals_used))
    rows = []
    for b, graph in enumerate(graphs):
        fields = {"peak_memory": float(ev.peak_memory[b]), "runtime": float(ev.runtime[b])}
        rows.append({"value": fields[objective], "feasible": bool(ev.feasible[b]), **fields,
                     "evals_used": int(used[b])})
    return rows, wall, compile_seconds


# --- The experiment -------------------------------------------------------------------------


def cell_hash(task: Task, batch: Sequence[Graph], variant: str, budget: int, num_devices: int,
              feature_evals: int | None) -> str:
    """Everything that decides a batch's rows besides their identity columns."""
    learned = variant in ("regal", "untrained", "uniform_genes")
    payload = json.dumps({
        "objective": task.objective.spec, "variant": variant, "budget": budget,
        "devices": num_devices, "batch_size": task.batch_size,
        "checkpoint": str(DEFAULT_CHECKPOINTS["regal"][task.objective.name].name)
        if learned else None,
        "feature_evals": feature_evals if learned else None,
        "graphs": [graph_digest(g) for g in batch]}, sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _identity(row: dict) -> tuple:
    return (row["dataset"], row["graph"], row["objective"], row["variant"], row["seed"])


def run_controls(tasks: Sequence[Task], path: str | os.PathLike, *, seeds: Sequence[int],
                 variants: Sequence[str] = VARIANTS, budget: int = BUDGET,
                 num_devices: int = NUM_DEVICES, feature_evals: int | None = None,
                 log: Callable[[str], None] = default_log) -> list[dict]:
    """Runs every (task, seed, batch, variant) not yet in ``path`` (a JSON-lines file, rows
    appended and synced per batch); returns the rows of this experiment."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    old = read_jsonl(path, warn=log) if path.exists() else []
    done = {(_identity(r), r["cell_hash"]) for r in old}
    jobs = [(task, seed, batch, variant) for task in tasks for seed in seeds
            for batch in task.batches() for variant in variants]
    work = sum(len(b) for _, _, b, _ in jobs)
    finished, start, rows = 0, time.perf_counter(), {}
    for r in old:
        rows[(_identity(r), r["cell_hash"])] = r
    ran = 0
    for i, (task, seed, batch, variant) in enumerate(jobs):
        digest = cell_hash(task, batch, variant, budget, num_devices, feature_evals)
        ids = [(task.dataset, g.name, task.objective.name, variant, seed) for g in batch]
        if all((x, digest) in done for x in ids):
            finished += len(batch)
            continue
        filled = list(batch) + [batch[0]] * (task.batch_size - len(batch))
        params = task.objective.cost_params(batch)
        results, wall, compile_s = run_variant(variant, filled, params, seed=seed,
                                               objective=task.objective.name, budget=budget,
                                               num_devices=num_devices,
                                               feature_evals=feature_evals)
        new = []
        for graph, result in zip(batch, results):
            new.append({"dataset": task.dataset, "graph": graph.name, "num_ops": graph.num_ops,
                        "objective": task.objective.name, "variant": variant, "seed": seed,
                        "budget": budget, **result, "wall_seconds": wall / len(filled),
                        "compile_seconds": compile_s, "cell_hash": digest})
        with path.open("a") as f:
            f.write("".join(json.dumps(r) + "\n" for r in new))
            f.flush()
            os.fsync(f.fileno())
        for r in new:
            rows[(_identity(r), digest)] = r
            done.add((_identity(r), digest))
        finished += len(batch)
        ran += len(batch)
        elapsed = time.perf_counter() - start
        eta = elapsed / ran * (work - finished) if ran else math.nan
        log(f"[{finished}/{work}] {task.dataset} {task.objective.name} seed={seed} "
            f"{variant} ({len(batch)} graphs, {batch[0].num_ops}-{batch[-1].num_ops} ops): "
            f"{wall:.1f} s + {compile_s:.1f} s compile | elapsed {elapsed / 60:.1f} min, "
            f"ETA {eta / 60:.1f} min")
        resources.release_if_crowded(_compiled)
    wanted = {(task.dataset, g.name, task.objective.name, variant, seed): cell_hash(
        task, b, variant, budget, num_devices, feature_evals)
        for task in tasks for seed in seeds for b in task.batches() for g in b
        for variant in variants}
    return [rows[(k, h)] for k, h in wanted.items() if (k, h) in rows]


# --- Statistics and tables -----------------------------------------------------------------


def sign_test(wins: int, losses: int) -> float:
    """Two-sided exact sign test p-value (ties already dropped)."""
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def _improvement(value: float, feasible: bool, ref: float, ref_feasible: bool) -> float:
    """% improvement over the reference; NaN unless both are feasible."""
    if not (feasible and ref_feasible) or not ref > 0:
        return math.nan
    return 100.0 * (ref - value) / ref


def _at_least(value, feasible, ref, ref_feasible) -> bool:
    """``value`` matches or beats the reference (a feasible one beats an infeasible one)."""
    if feasible != ref_feasible:
        return feasible
    return value <= ref


def summarize(rows: Sequence[dict], reference: str = REFERENCE,
              comparisons: Sequence[tuple[str, str]] = COMPARISONS,
              bootstrap: int = BOOTSTRAP) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (dataset, objective): the graphs and seeds compared (every variant present for
    each), per variant the improvement over ``reference`` and the ≥ fraction, per comparison
    the paired differences, and per graph the mean improvement of each variant."""
    by: dict = defaultdict(dict)
    for r in rows:
        by[(r["dataset"], r["objective"])][(r["graph"], r["variant"], r["seed"])] = r
    out = {}
    known = list(CONFIGS)
    for section, cells in sorted(by.items(), key=lambda item: (
            known.index(item[0][0]) if item[0][0] in known else len(known), item[0])):
        variants = [v for v in VARIANTS if any(k[1] == v for k in cells)]
        if reference not in variants:
            continue
        seeds = sorted({k[2] for k in cells})
        graphs = []  # graphs with every variant and seed, in size order
        for g in sorted({k[0] for k in cells}, key=lambda g: next(
                (cells[k]["num_ops"], g) for k in cells if k[0] == g)):
            if all((g, v, s) in cells for v in variants for s in seeds):
                graphs.append(g)
        if not graphs:
            continue
        imp = {}  # variant → [G, S] % improvement over the reference of the same seed
        ge = {}
        for v in variants:
            imp[v] = np.full((len(graphs), len(seeds)), math.nan)
            ge[v] = np.zeros((len(graphs), len(seeds)), bool)
            for i, g in enumerate(graphs):
                for j, s in enumerate(seeds):
                    x, ref = cells[(g, v, s)], cells[(g, reference, s)]
                    imp[v][i, j] = _improvement(x["value"], x["feasible"], ref["value"],
                                                ref["feasible"])
                    ge[v][i, j] = _at_least(x["value"], x["feasible"], ref["value"],
                                            ref["feasible"])
        # Against a steadier reference: BRKGA's value averaged over the seeds (per graph).
        ref_mean = {g: (np.mean([cells[(g, reference, s)]["value"] for s in seeds]),
                        all(cells[(g, reference, s)]["feasible"] for s in seeds))
                    for g in graphs}
        stats = {}
        for v in variants:
            per_seed = np.nanmean(imp[v], axis=0)
            steady = np.nanmean([[_improvement(cells[(g, v, s)]["value"],
                                               cells[(g, v, s)]["feasible"], *ref_mean[g])
                                  for s in seeds] for g in graphs], axis=0)
            stats[v] = {
                "mean": float(np.mean(per_seed)),
                "std": float(np.std(per_seed, ddof=1)) if len(seeds) > 1 else math.nan,
                "per_seed": [float(x) for x in per_seed],
                "vs_mean_reference": float(np.mean(steady)),
                "vs_mean_reference_std": (float(np.std(steady, ddof=1)) if len(seeds) > 1
                                          else math.nan),
                "at_least": float(ge[v].mean()),
                "infeasible": int(sum(not cells[(g, v, s)]["feasible"]
                                      for g in graphs for s in seeds)),
                "wall": float(np.mean([cells[(g, v, s)]["wall_seconds"]
                                       for g in graphs for s in seeds])),
            }
        diffs = {}
        rng = np.random.default_rng(0)
        draws = rng.integers(0, len(graphs), size=(bootstrap, len(graphs)))
        for a, b in comparisons:
            if a not in imp or b not in imp:
                continue
            d = imp[a] - imp[b]  # [G, S] percentage points
            per_graph = np.nanmean(d, axis=1)
            pairs = d[~np.isnan(d)]
            boot = np.nanmean(per_graph[draws], axis=1)
            wins, losses = int((per_graph > 0).sum()), int((per_graph < 0).sum())
            diffs[(a, b)] = {
                "mean": float(np.nanmean(per_graph)),
                "ci": (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))),
                "graph_wins": wins, "graph_losses": losses,
                "graph_ties": len(graphs) - wins - losses,
                "pair_wins": int((pairs > 0).sum()), "pair_losses": int((pairs < 0).sum()),
                "pairs": int(pairs.size),
                "p_sign": sign_test(wins, losses),
            }
        out[section] = {
            "graphs": graphs, "seeds": seeds, "variants": variants, "stats": stats,
            "diffs": diffs,
            "num_ops": [next(cells[k]["num_ops"] for k in cells if k[0] == g) for g in graphs],
            "per_graph": {v: [float(x) for x in np.nanmean(imp[v], axis=1)] for v in variants},
        }
    return out


def _signed(x: float, digits: int = 2) -> str:
    if math.isnan(x):
        return "—"
    return f"{0.0 if abs(x) < 0.5 * 10 ** -digits else x:+.{digits}f}"  # no "-0.00"


def _p(p: float) -> str:
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def markdown(summary: dict, budget: int = BUDGET, per_graph: bool = True) -> str:
    """The tables of :func:`summarize`'s result, one section per (dataset, objective)."""
    lines = []
    for (dataset, objective), s in summary.items():
        g, seeds = len(s["graphs"]), s["seeds"]
        lines += [f"## {dataset}, {objective} ({g} graphs, {s['num_ops'][0]}–"
                  f"{s['num_ops'][-1]} ops; seeds {', '.join(map(str, seeds))}; "
                  f"{budget:,} evaluations; D = {NUM_DEVICES})", "",
                  f"| variant | mean % over BRKGA {budget // 1000}K (± std over seeds) | "
                  "per seed | ≥ BRKGA (graph × seed) | % over BRKGA's mean over seeds | "
                  "s / graph |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for v in s["variants"]:
            st = s["stats"][v]
            mean = ("0 (reference)" if v == REFERENCE else
                    f"{_signed(st['mean'])} ± {st['std']:.2f}")
            infeasible = f" ({st['infeasible']} infeasible)" if st["infeasible"] else ""
            lines.append(f"| {LABELS[v]} | {mean} | "
                         + ", ".join(_signed(x) for x in st["per_seed"])
                         + f" | {100 * st['at_least']:.0f} %{infeasible} | "
                         f"{_signed(st['vs_mean_reference'])} ± "
                         f"{st['vs_mean_reference_std']:.2f} | {st['wall']:.2f} |")
        lines += ["", "| difference (percentage points of improvement over BRKGA) | mean | "
                  "95 % CI (bootstrap over graphs) | graphs + / − / = | pairs + / − "
                  "(graph × seed) | sign-test p (graphs) |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for (a, b), d in s["diffs"].items():
            lines.append(f"| {LABELS[a]} − {LABELS[b]} | {_signed(d['mean'])} | "
                         f"[{_signed(d['ci'][0])}, {_signed(d['ci'][1])}] | "
                         f"{d['graph_wins']} / {d['graph_losses']} / {d['graph_ties']} | "
                         f"{d['pair_wins']} / {d['pair_losses']} of {d['pairs']} | "
                         f"{_p(d['p_sign'])} |")
        if per_graph:
            others = [v for v in s["variants"] if v != REFERENCE]
            lines += ["", "Per graph, % over BRKGA (mean over seeds):", "",
                      "| graph | ops | " + " | ".join(LABELS[v] for v in others) + " |",
                      "| --- | ---: | " + " | ".join("---:" for _ in others) + " |"]
            for i, (name, ops) in enumerate(zip(s["graphs"], s["num_ops"])):
                lines.append(f"| {name} | {ops} | " + " | ".join(
                    _signed(s["per_graph"][v][i]) for v in others) + " |")
        lines.append("")
    return "\n".join(lines)


def tables_text(rows: Sequence[dict], budget: int = BUDGET) -> str:
    """``tables.md``: a title and :func:`markdown` of the rows."""
    return ("# REGAL against its controls (generated by `python -m eval.regal_controls`)\n\n"
            + markdown(summarize(rows), budget))


# --- Command line ----------------------------------------------------------------------------


def parse_max_graphs(text: str | None, datasets: Sequence[str]) -> dict[str, int]:
    """``"4"`` (every dataset) or ``"synthetic_large=4,moccasin=8"``."""
    if not text:
        return {}
    if "=" not in text:
        return dict.fromkeys(datasets, int(text))
    out = {}
    for item in text.split(","):
        name, _, count = item.partition("=")
        if name not in CONFIGS:
            raise ValueError(f"--max-graphs: unknown dataset {name!r}")
        out[name] = int(count)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="REGAL against its controls (issue #15 §1): docs/results/regal_controls/")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (default 0,1,2)")
    parser.add_argument("--datasets", default=",".join(CONFIGS),
                        help=f"comma-separated, of {', '.join(CONFIGS)} (default: all)")
    parser.add_argument("--max-graphs", default=None,
                        help="graphs per dataset, evenly spaced by size: N, or "
                             "name=N,name=N (default: all the sweep's graphs)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--budget", type=int, default=BUDGET)
    parser.add_argument("--runs", type=Path, default=Path("runs/regal_controls/results.jsonl"),
                        help="the resumable cache of rows")
    parser.add_argument("--out", type=Path, default=Path("docs/results/regal_controls"))
    parser.add_argument("--report-only", action="store_true",
                        help="only rebuild the tables from the rows in --runs")
    args = parser.parse_args(argv)
    seeds = [int(x) for x in args.seeds.split(",") if x]
    datasets = [x for x in args.datasets.split(",") if x]
    variants = [x for x in args.variants.split(",") if x]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or REFERENCE not in variants:
        parser.error(f"--variants: {', '.join(VARIANTS)} (brkga required); got {args.variants}")
    tasks = load_tasks(datasets, parse_max_graphs(args.max_graphs, datasets))
    start = time.perf_counter()
    if args.report_only:
        wanted = {(t.dataset, g.name, t.objective.name, v, s): cell_hash(
            t, b, v, args.budget, NUM_DEVICES, None)
            for t in tasks for s in seeds for b in t.batches() for g in b for v in variants}
        order = {k: i for i, k in enumerate(wanted)}
        rows = sorted((r for r in read_jsonl(args.runs)
                       if wanted.get(_identity(r)) == r["cell_hash"]),
                      key=lambda r: order[_identity(r)])
    else:
        for line in machine_description():
            default_log(line)
        rows = run_controls(tasks, args.runs, seeds=seeds, variants=variants,
                            budget=args.budget)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "results.jsonl").open("w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    (args.out / "tables.md").write_text(tables_text(rows, args.budget))
    default_log(f"wrote {args.out / 'tables.md'} and results.jsonl ({len(rows)} rows) in "
                f"{(time.perf_counter() - start) / 60:.1f} min")
    return 0

