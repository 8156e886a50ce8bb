"""REGAL's generations-to-match (REGAL §4): "for the 88.92 % of test set graphs on which REGAL
ties or improves BRKGA, it matches BRKGA on average in 47.8 % fewer generations than BRKGA".

On every ``brkga`` cell of a sweep config with a given budget and seed (its first device
count), BRKGA (REGAL's defaults) and REGAL (the shipped policy of the objective, or a
checkpoint) run on the sweep's batches, cost parameters and key (``jax.random.PRNGKey(seed)``),
each keeping its best value after every counted evaluation (:func:`curves`). For each graph on
which REGAL's final value ties or beats BRKGA's final value ``o_B``: the number of generations
each needed to first reach ``o_B`` (:func:`compare`). A run's generations after ``e``
counted evaluations are those it has started: ``1 + ⌈max(0, e − π) / (π − π_e)⌉`` (π = 100
initial chromosomes, then π − π_e = 90 new ones a generation); REGAL's are its
400-evaluation feature search's plus its policy search's. Evaluations to reach ``o_B`` are
reported too (:func:`report`).
"""

from __future__ import annotations

import math

import jax
import numpy as np

from gsched.core.padding import batch_graphs, bucket_for
from gsched.harness.config import load_config
from gsched.harness.units import search_batch, units
from gsched.infra.progress import log
from gsched.policies.regal.method import build_regal
from gsched.policies.regal.rollout import guided_search_trace
from gsched.search import brkga

CONFIG = brkga.BRKGAConfig()  # REGAL's BRKGA: the `brkga` method and REGAL's searches


def generations(evaluations: int, config: brkga.BRKGAConfig = CONFIG) -> int:
    """Generations a BRKGA run has started after ``evaluations`` counted evaluations."""
    new_per_generation = config.population_size - config.num_elites
    return 1 + math.ceil(max(0, evaluations - config.population_size) / new_per_generation)


def regal_generations(evaluations: int, feature_evals: int) -> int:
    """REGAL's generations after ``evaluations``: the feature search's, then the policy's."""
    if evaluations <= feature_evals:
        return generations(evaluations)
    return generations(feature_evals) + generations(evaluations - feature_evals)


def evaluations_to_reach(curve: np.ndarray, target: float) -> int | None:
    """Counted evaluations until the best-so-far ``curve [budget]`` first is ``≤ target``."""
    hits = np.flatnonzero(curve <= target)
    return int(hits[0]) + 1 if hits.size else None


def compare(brkga_curve: np.ndarray, regal_curve: np.ndarray, feature_evals: int) -> dict:
    """One graph's row: final values, improvement and, when REGAL ties or beats BRKGA, the
    evaluations and generations each needed to reach BRKGA's final value."""
    target, final = float(brkga_curve[-1]), float(regal_curve[-1])
    row = {"brkga": target, "regal": final, "improvement_pct": 100 * (target - final) / target,
           "matches": final <= target}
    if row["matches"]:
        e_b, e_r = evaluations_to_reach(brkga_curve, target), evaluations_to_reach(
            regal_curve, target)
        g_b, g_r = generations(e_b), regal_generations(e_r, feature_evals)
        row.update(evals_brkga=e_b, evals_regal=e_r, generations_brkga=g_b,
                   generations_regal=g_r, fewer_generations_pct=100 * (1 - g_r / g_b))
    return row


def _compiled(policy, feature_evals: int, devices: int, budget: int, objective: str):
    """Jitted ``(key, graphs, cost_params) → best-so-far [B, budget]`` of BRKGA and of REGAL."""
    search = jax.jit(lambda k, g, c: brkga.run_batch(
        k, g, CONFIG, num_devices=devices, budget=budget, objective=objective,
        cost_params=c).best_so_far)
    learned = jax.jit(lambda k, g, c: guided_search_trace(
        k, policy, g, c, num_devices=devices, budget=budget, objective=objective,
        feature_evals=feature_evals)[1])
    return search, learned


def curves(config_path: str, budget: int, seed: int, checkpoint: str | None):
    """``{(dataset, objective): [(graph, brkga curve, regal curve, feature evals)]}`` over the
    config's ``brkga`` cells of ``budget`` and ``seed`` on its first device count: the same
    batches (filled up as the sweep does), cost parameters and key as the sweep."""
    config = load_config(config_path)
    devices = config.devices[0]
    cells = [u for u in units(config)
             if (u.run.name, u.budget, u.seed, u.devices) == ("brkga", budget, seed, devices)]
    if not cells:
        raise ValueError(f"{config_path} has no brkga cells with budget {budget}, seed {seed} "
                         f"and D = {devices}: the comparison runs on the sweep's brkga cells")
    runner = build_regal(checkpoint=checkpoint)
    compiled, out = {}, {}
    for unit in cells:
        objective = unit.objective.name
        policy, feature_evals, _ = runner.policies[objective]
        if objective not in compiled:
            compiled[objective] = _compiled(policy, feature_evals, devices, budget, objective)
        search, learned = compiled[objective]
        graphs = search_batch(unit, config.batch_size)
        padded = batch_graphs(graphs, bucket_for(graphs))
        params = unit.objective.cost_params(unit.graphs)
        key = jax.random.PRNGKey(seed)
        b, r = jax.device_get((search(key, padded, params), learned(key, padded, params)))
        rows = out.setdefault((unit.dataset.name, objective), [])
        rows += [(g, b[i], r[i], feature_evals) for i, g in enumerate(unit.graphs)]
        log(f"{unit.dataset.name} / {objective}: {len(rows)} graphs")
    return out


def _fewer(pct: float) -> str:
    return f"{pct:.1f} % fewer generations" if pct >= 0 else f"{-pct:.1f} % more generations"


def report(results: dict, budget: int, header: str) -> str:
    """Markdown: per dataset and objective a summary line and a per-graph table."""
    lines = [header]
    for (dataset, objective), graphs in results.items():
        rows = [(g, compare(b, r, f)) for g, b, r, f in graphs]
        matched = [row for _, row in rows if row["matches"]]
        fewer = [row["fewer_generations_pct"] for row in matched]
        mean_improvement = np.mean([row["improvement_pct"] for _, row in rows])
        lines += [f"\n## {dataset} — {objective}, {budget} evaluations\n",
                  f"REGAL ties or beats BRKGA on **{len(matched)} of {len(rows)}** graphs; on "
                  f"those it reaches BRKGA's final value in **"
                  + (_fewer(np.mean(fewer)) + f"** on average (median "
                     f"{_fewer(np.median(fewer))})" if fewer else "—**")
                  + f"; mean improvement over BRKGA {mean_improvement:+.2f} %.\n",
                  "| graph | ops | BRKGA | REGAL | improvement % | evals BRKGA / REGAL | "
                  "generations BRKGA / REGAL | fewer generations % |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for g, row in rows:
            reach = ("—", "—", "—")
            if row["matches"]:
                reach = (f"{row['evals_brkga']} / {row['evals_regal']}",
                         f"{row['generations_brkga']} / {row['generations_regal']}",
                         f"{row['fewer_generations_pct']:.1f}")
            lines.append(f"| {g.name} | {g.num_ops} | {row['brkga']:.6g} | {row['regal']:.6g} | "
                         f"{row['improvement_pct']:+.2f} | " + " | ".join(reach) + " |")
    return "\n".join(lines) + "\n"
