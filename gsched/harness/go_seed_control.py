"""Is it the learned policy, or any good placement, that makes a policy-seeded search strong?
The control for the ``gdp`` / ``go`` methods' ``--decode brkga`` (and ``local_search``,
``annealing``; beyond the papers).

    python -m eval.go_seed_control [--search brkga] [--budget 500] [--seeds 0,1,2]
        [--runs runs/go_gdp] [--out docs/results/go_gdp/seed_control.md]

On the workload graphs of :mod:`gsched.harness.go_gdp` at its pre-training D (same costs, the
same pre-trained exports, trained into ``--runs`` if missing), for GDP (placement, FIFO, no
fusion) and GO (placement + scheduling + fusion, priority scheduler, fusion), ``budget``
evaluations per graph and run, with ``search`` (BRKGA with REGAL's defaults, local search or
simulated annealing: :data:`gsched.policies.go.rollout.SEEDED_SEARCHES`) over the policy's
genes:

* the search alone (BRKGA: a uniform initial population; local search and SA: random starts);
* ``policy zero-shot`` — the pre-trained policy's greedy decode (its ``rounds`` evaluations);
* ``policy-seeded`` — the method with ``decode=search``: the greedy decode, then the search
  with the rest of the budget, started from it;
* ``METIS-seeded`` — the control: the same search with the same key, started instead from
  METIS's chromosome (its placement and order; with fusion, XLA-style greedy fusion: the
  solution of the tables' "METIS + greedy fusion" row), one evaluation for METIS and the rest
  for the search (over placement only, the order's priorities are frozen at 0.5 as the
  policy's are);
* ``policy- and METIS-seeded`` — both seeds (the greedy decode's evaluations, one for METIS,
  the rest for the search): does the policy add anything to METIS? The method with
  ``decode=search, seed_from="metis"``.

Every search of a (graph, seed) uses the key the method gives its search
(``fold_in(PRNGKey(seed), 1)``), and METIS runs with the run's seed (it matters only for the
Fiduccia–Mattheyses fallback without ``pymetis``), as ``seed_from`` runs it, so the four
searches differ only in their seeds and budgets. Prints (and writes, with ``--out``) each
row's step time (µs) per graph, the mean over seeds, and the (graph, seed) pairs where the
policy-seeded run beats the METIS-seeded one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import jax
import numpy as np

from gsched import methods
from gsched.core.padding import batch_graphs, bucket_for
from gsched.harness import go_gdp
from gsched.harness.benchmarks import parse_int_list
from gsched.infra.progress import log
from gsched.policies.go.checkpoint import load_policy
from gsched.policies.go.ppo import ExecModel
from gsched.policies.go.rollout import SEEDED_SEARCHES, policy_search

LABELS = {"brkga": "BRKGA", "local_search": "local search", "annealing": "SA"}


def rows(search: str) -> tuple[str, ...]:
    """The table's rows for ``search`` (module docstring)."""
    label = LABELS[search]
    return (label, "policy zero-shot", f"policy-seeded {label}", f"METIS-seeded {label}",
            f"policy- and METIS-seeded {label}")


def run_graph(method: str, graph, checkpoint: Path, *, num_devices: int, budget: int,
              seeds: list[int], search: str = "brkga") -> dict[str, np.ndarray]:
    """``{row: [S] step times}`` of one graph (module docstring; :func:`rows`)."""
    scheduler, fusion = go_gdp.SETTINGS[method]
    net, spec, _ = load_policy(checkpoint, method)
    genes = spec.space.search_genes(fusion)
    cost = go_gdp.cost_params()
    padded = batch_graphs([graph], bucket_for([graph]))
    # the greedy decode does not depend on the key: once for the zero-shot row
    zero_shot = jax.jit(lambda k, g: policy_search(
        k, net, g, cost, space=spec.space, exec_model=ExecModel(num_devices, scheduler, fusion),
        config=spec.ppo, budget=spec.ppo.rounds, objective="runtime"))(jax.random.PRNGKey(0),
                                                                       padded)
    common = dict(num_devices=num_devices, objective="runtime", scheduler=scheduler,
                  fusion=fusion)
    alone, zero, learned, control, both = rows(search)
    out = {row: [] for row in rows(search)}
    for seed in seeds:
        def method_run(**options):
            return methods.optimize(method, [graph], budget=budget, cost_params=cost, seed=seed,
                                    options={"checkpoint": str(checkpoint), "decode": search,
                                             **options}, **common).results[0]["runtime"]

        def search_run(seeded_budget, seed_keys=None):
            return float(SEEDED_SEARCHES[search](
                jax.random.fold_in(jax.random.PRNGKey(seed), 1), padded, budget=seeded_budget,
                cost_params=cost, seeds=seed_keys, genes=genes, **common).best_value[0])

        # METIS's chromosome [1, 1, L], as seed_from builds it
        metis = methods.seed_chromosomes(("metis",), [graph], padded.bucket, num_devices, seed,
                                         fusion)
        out[alone].append(search_run(budget))
        out[zero].append(float(zero_shot.best_value[0]))
        out[learned].append(method_run())
        out[control].append(search_run(budget - 1, metis))
        out[both].append(method_run(seed_from="metis"))
    return {row: np.asarray(values) for row, values in out.items()}


def report(results: dict[str, dict[str, dict[str, np.ndarray]]], ops: dict[str, int],
           num_devices: int, budget: int, seeds: list[int], search: str = "brkga") -> str:
    """The Markdown table: ``results[method][graph][row]`` → ``[S]`` step times."""
    names = list(ops)
    label = LABELS[search]
    command = "python -m eval.go_seed_control" + ("" if search == "brkga"
                                                  else f" --search {search}")
    lines = [f"# Policy-seeded {label} and its control (D = {num_devices}, {budget} "
             "evaluations)",
             "", f"Step time (µs), mean over seeds {', '.join(map(str, seeds))}; the last row "
             "counts the (graph, seed) pairs where the policy-seeded run is faster than the "
             f"METIS-seeded one (ties in brackets). Generated by `{command}`.",
             "", "| method | row | " + " | ".join(f"{n} ({ops[n]} ops)" for n in names) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in names) + " |"]
    for method, by_graph in results.items():
        for row in rows(search):
            lines.append(f"| {method.upper()} | {row} | " + " | ".join(
                f"{by_graph[n][row].mean():.4g}" for n in names) + " |")
        cells = []
        for n in names:
            learned = by_graph[n][f"policy-seeded {label}"]
            control = by_graph[n][f"METIS-seeded {label}"]
            cells.append(f"{int(np.sum(learned < control))} of {len(learned)} "
                         f"({int(np.sum(learned == control))})")
        lines.append(f"| {method.upper()} | policy- beats METIS-seeded | " + " | ".join(cells)
                     + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.go_seed_control",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--search", choices=list(SEEDED_SEARCHES), default="brkga",
                        help="the search the policy and METIS seed (default brkga)")
    parser.add_argument("--budget", type=int, default=500)
    parser.add_argument("--seeds", type=parse_int_list, default=(0, 1, 2))
    parser.add_argument("--runs", type=Path, default=Path("runs/go_gdp"),
                        help="go_gdp's pre-training runs (trained here if missing)")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    named = go_gdp.graphs()
    start = time.perf_counter()
    results = {}
    for method in ("gdp", "go"):
        checkpoint = go_gdp.pretrained(method, args.runs)
        for name, graph in named.items():
            values = run_graph(method, graph, checkpoint, num_devices=go_gdp.PRETRAINED_D,
                               budget=args.budget, seeds=list(args.seeds),
                               search=args.search)
            results.setdefault(method, {})[name] = values
            methods.release_compiled(only_if_crowded=True)
            log(f"{method} {name}: " + ", ".join(f"{row} {v.mean():.4g}"
                                                 for row, v in values.items())
                + f"; elapsed {(time.perf_counter() - start) / 60:.1f} min")
    text = report(results, {n: g.num_ops for n, g in named.items()}, go_gdp.PRETRAINED_D,
                  args.budget, list(args.seeds), args.search)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    return 0
