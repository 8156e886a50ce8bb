"""Controls for a GDP / GO policy: is it better than chance, and than search at equal budget?

``python -m eval.go_controls --config train/configs/gdp_small.toml --checkpoint gdp`` scores,
under the config's cost settings (devices, scheduler, fusion, link, preset), each row's value
as a ratio to the graph's best classical baseline (the reference of the training reward,
:func:`gsched.policies.go.training.references`; lower is better) on

* ``--graphs fresh`` (the default; layered data only): ``--count`` graphs of the config's
  distribution that neither training nor the choice of the kept policy saw
  (:func:`gsched.policies.go.training.fresh_graphs`), or
* ``--graphs valid``: the config's validation graphs, on which training chose the policy it
  kept (an optimistic reading; the only one for workload data).

Rows:

* ``untrained network, greedy`` — the network training starts from (the config's seed);
* ``uniform random chromosome`` — one uniform chromosome over the policy's genes (``placement``
  for GDP, the tasks' genes for GO), the mean over ``draws`` seeds: what a policy that has
  learned nothing but the action space gets on average;
* ``random search, best of K`` — for ``K`` = the greedy policy's evaluations, the sampling
  budget, and ``search_budget``;
* ``BRKGA, K`` — REGAL's BRKGA over the same genes with each of those budgets but the
  greedy one (at ``search_budget``: a near-optimum to measure the headroom against);
* ``policy, greedy`` and ``policy, sampling`` — the checkpoint zero-shot, with the
  greedy decode (``rounds`` evaluations) and with ``samples`` sampled rollouts after it;
* with ``finetune = K > 0`` (GDP §4.3 / GO §5.2): ``policy, fine-tuned`` — ``K`` PPO
  iterations of the checkpoint on each graph alone, then a greedy decode
  (:func:`gsched.policies.go.rollout.policy_search`; ``rounds + K · samples · rounds +
  rounds`` evaluations with the checkpoint's own PPO settings, every one competing), and
  ``untrained network, fine-tuned`` (after the untrained greedy row) — the same from the
  untrained network (GDP-one / GO-one: what fine-tuning gives without pre-training); random
  search and BRKGA also get that budget.

With ``searches`` (beyond the papers; :data:`gsched.policies.go.rollout.SEEDED_SEARCHES`),
for each search S, at the budget K of the last policy row (fine-tuned, else sampled), with
the method's own seeds (:func:`gsched.methods.optimize`): ``S, K`` (random starts; for BRKGA
the row above), ``METIS → S, K`` (``seed_from="metis"``: one evaluation for METIS's solution,
the rest for S started from it), ``untrained network → S, K`` and ``policy → S, K``
(``decode=S``: the greedy decode, then S from its best solution), and ``policy + METIS → S,
K`` (both seeds): does the learned start beat a random one, the untrained network's, and the
best classical heuristic's? At ``search_budget`` too (when it differs from K), ``S``, ``METIS →
S`` and ``policy → S``: is the learned start still worth anything at the budget of the
near-optimum row ``BRKGA, search_budget``? With ``finetune = K`` too, the budget ``K2`` of
``2K`` fine-tuning iterations is split the other way: ``policy, fine-tuned 2K it.`` against
``policy, fine-tuned K it. → S, K2`` (the method with ``finetune_steps=K, decode=S``): after
``K`` iterations, is the next share of the budget better spent on PPO or on S?

With ``hdp`` (a tuple of learning rates, ``None`` for HDP's own 0.1; ``--hdp``,
``--hdp-learning-rate``): ``HDP[, learning rate …], K`` at the searches' budget K — GDP's
learned baseline (:mod:`gsched.policies.hdp`), trained from scratch on each graph, placement
only.

``temperature`` (default: the checkpoint's, 1) is the sampling temperature of every sampled
or fine-tuned row of the policy and of the untrained network (their labels say ``T = …``;
:func:`gsched.policies.go.rollout.policy_search`).

Each row gives the mean ratio over the graphs, its evaluations per graph, the wall time of
its run on all the graphs (one batch, compilation excluded: ``Outcome.wall_seconds``; for the
uniform chromosome the mean over the draws) and the per-graph ratios; the markdown goes to
stdout and, with ``--out``, to a file.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

import jax
import numpy as np

from gsched import methods
from gsched.core.padding import bucket_for
from gsched.harness.go_seed_control import LABELS
from gsched.infra.config import load_config
from gsched.policies.go import training
from gsched.policies.go.checkpoint import load_policy, network_template, save_policy
from gsched.policies.go.rollout import SEEDED_SEARCHES, evaluations_needed

GRAPHS = ("fresh", "valid")


def _method(tasks: tuple[str, ...]) -> str:
    """``gdp`` for a placement-only policy, else ``go`` (the registry method loading it)."""
    return "gdp" if tasks == ("placement",) else "go"


def controls(config_path: Path, checkpoint: str, *, graphs: str = "fresh", count: int = 16,
             draws: int = 16, samples: int = 64, search_budget: int = 5000, finetune: int = 0,
             temperature: float | None = None, seed: int = 0,
             searches: tuple[str, ...] = (),
             hdp: tuple[float | None, ...] = ()) -> tuple[list[tuple], list[int]]:
    """``([(label, evaluations, ratios [G], seconds), ...], graph sizes)`` (module
    docstring)."""
    if graphs not in GRAPHS:
        raise ValueError(f"graphs must be one of {GRAPHS}, got {graphs!r}")
    for search in searches:
        if search not in SEEDED_SEARCHES or searches.count(search) > 1:
            raise ValueError(f"searches must be distinct names of {tuple(SEEDED_SEARCHES)}, "
                             f"got {searches!r}")
    hot = {} if temperature is None else {"temperature": temperature}
    at = "" if temperature is None else f", T = {temperature:g}"
    config = load_config(config_path, training.TrainConfig)
    name = _method(tuple(config.space.tasks))
    genes = config.space.search_genes(config.cost.fusion)
    _, spec, _ = load_policy(checkpoint, name)
    if (spec.space, spec.scheduler, spec.fusion) != (config.space, config.cost.scheduler,
                                                     config.cost.fusion):
        raise ValueError(f"checkpoint {checkpoint} was trained for another action space or "
                         f"execution model than {config_path}")
    if temperature is not None:  # PPOConfig checks it before any graph is drawn
        dataclasses.replace(spec.ppo, temperature=temperature)
    rounds = spec.ppo.rounds
    sampled = rounds + samples * rounds
    tuned = evaluations_needed(spec.ppo, "greedy", finetune)  # checks finetune
    scored = (training.fresh_graphs(config, count) if graphs == "fresh"
              else training.load_graphs(config)[1])
    reference = training.references(scored, config, bucket_for(scored))
    settings = dict(num_devices=config.space.num_devices, objective=config.ppo.objective,
                    cost_params=training.cost_params(config.cost),
                    scheduler=config.cost.scheduler, fusion=config.cost.fusion)

    def ratios(method: str, budget: int, run_seed: int = seed,
               **options) -> tuple[np.ndarray, float]:
        """The run's ratios [G] and its wall seconds."""
        outcome = methods.optimize(method, scored, budget=budget, seed=run_seed,
                                   options=options, **settings)
        values = np.array([r[config.ppo.objective] for r in outcome.results]) / reference
        methods.release_compiled(only_if_crowded=True)  # ~40 compiled runs: free the mappings
        return values, outcome.wall_seconds

    budgets = sorted({rounds, sampled, search_budget} | ({tuned} if finetune else set()))
    last = tuned if finetune else sampled  # the searches' budget
    with tempfile.TemporaryDirectory() as tmp:
        untrained = str(Path(tmp) / "untrained")
        save_policy(untrained, network_template(spec, jax.random.key(config.seed)), spec,
                    {"step": 0, "untrained": True})
        rows = [("untrained network, greedy", rounds,
                 *ratios(name, rounds, checkpoint=untrained))]
        if finetune:
            rows.append((f"untrained network, fine-tuned {finetune} it.{at} "
                         f"({name.upper()}-one)", tuned,
                         *ratios(name, tuned, checkpoint=untrained, finetune_steps=finetune,
                                 **hot)))
        started = {search: ratios(name, last, checkpoint=untrained, decode=search)
                   for search in searches}
    drawn = [ratios("random", 1, s, genes=genes) for s in range(draws)]
    rows.append((f"uniform random chromosome (mean of {draws})", 1,
                 np.mean([values for values, _ in drawn], axis=0),
                 float(np.mean([seconds for _, seconds in drawn]))))
    for budget in budgets:
        rows.append((f"random search, best of {budget}", budget,
                     *ratios("random", budget, genes=genes)))
    for budget in (b for b in budgets if b > rounds):
        rows.append((f"BRKGA, {budget}", budget, *ratios("brkga", budget, genes=genes)))
    for learning_rate in hdp:
        rate = {} if learning_rate is None else {"learning_rate": learning_rate}
        label = "HDP" if learning_rate is None else f"HDP, learning rate {learning_rate:g}"
        rows.append((f"{label}, {last}", last, *ratios("hdp", last, **rate)))
    rows.append(("policy, greedy", rounds, *ratios(name, rounds, checkpoint=checkpoint)))
    rows.append((f"policy, greedy + {samples} sampled rollouts{at}", sampled,
                 *ratios(name, sampled, checkpoint=checkpoint, decode="sample", **hot)))
    if finetune:
        rows.append((f"policy, fine-tuned {finetune} it.{at}", tuned,
                     *ratios(name, tuned, checkpoint=checkpoint, finetune_steps=finetune,
                             **hot)))
    for search, budget in ((s, b) for s in searches for b in sorted({last, search_budget})):
        label, short = LABELS[search], budget == last
        if search != "brkga":  # else the "BRKGA, K" row above
            rows.append((f"{label}, {budget}", budget, *ratios(search, budget, genes=genes)))
        rows.append((f"METIS → {label}, {budget}", budget,
                     *ratios(search, budget, genes=genes, seed_from="metis")))
        if short:
            rows.append((f"untrained network → {label}, {budget}", budget, *started[search]))
        rows.append((f"policy → {label}, {budget}", budget,
                     *ratios(name, budget, checkpoint=checkpoint, decode=search)))
        if short:
            rows.append((f"policy + METIS → {label}, {budget}", budget,
                         *ratios(name, budget, checkpoint=checkpoint, decode=search,
                                 seed_from="metis")))
    if finetune and searches:
        longer = evaluations_needed(spec.ppo, "greedy", 2 * finetune)
        rows.append((f"policy, fine-tuned {2 * finetune} it.{at}", longer,
                     *ratios(name, longer, checkpoint=checkpoint, finetune_steps=2 * finetune,
                             **hot)))
        rows += [(f"policy, fine-tuned {finetune} it.{at} → {LABELS[search]}, {longer}", longer,
                  *ratios(name, longer, checkpoint=checkpoint, finetune_steps=finetune,
                          decode=search, **hot))
                 for search in searches]
    return rows, [g.num_ops for g in scored]


def markdown(rows: list[tuple], sizes: list[int], title: str) -> str:
    """The controls table (one line per row)."""
    lines = [f"## {title}", "",
             f"| row | evaluations / graph | mean ratio | seconds ({len(sizes)} graphs) | "
             "per graph (" + ", ".join(f"{n} ops" for n in sizes) + ") |",
             "| --- | ---: | ---: | ---: | --- |"]
    for label, evaluations, values, seconds in rows:
        lines.append(f"| {label} | {evaluations:,} | {np.mean(values):.3f} | {seconds:.2f} | "
                     + " ".join(f"{v:.3f}" for v in values) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.go_controls",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", type=Path, required=True,
                        help="the training config (graphs, costs, action space)")
    parser.add_argument("--checkpoint", required=True,
                        help="a policy export, run directory or shipped name (gdp, go)")
    parser.add_argument("--graphs", choices=GRAPHS, default="fresh",
                        help="unseen graphs of the config's distribution, or its validation "
                             "graphs")
    parser.add_argument("--count", type=int, default=16, help="how many fresh graphs")
    parser.add_argument("--draws", type=int, default=16)
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--search-budget", type=int, default=5000)
    parser.add_argument("--finetune", type=int, default=0,
                        help="also fine-tune the policy and the untrained network this many "
                             "PPO iterations on each graph (default 0: no fine-tuning rows)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature of the sampled and fine-tuned rows "
                             "(default: the checkpoint's)")
    parser.add_argument("--search", action="append", default=[],
                        choices=list(SEEDED_SEARCHES),
                        help="also the rows of this search started at random, from METIS, "
                             "from the untrained network and from the policy (repeatable)")
    parser.add_argument("--hdp", action="store_true",
                        help="also HDP (GDP's learned baseline, trained on each graph) with its "
                             "own settings at the budget of the searches' rows")
    parser.add_argument("--hdp-learning-rate", type=float, action="append", default=[],
                        help="also HDP with this learning rate (repeatable)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    rows, sizes = controls(args.config, args.checkpoint, graphs=args.graphs, count=args.count,
                           draws=args.draws, samples=args.samples,
                           search_budget=args.search_budget, finetune=args.finetune,
                           temperature=args.temperature, seed=args.seed,
                           searches=tuple(args.search),
                           hdp=(None,) * args.hdp + tuple(args.hdp_learning_rate))
    where = (f"{len(sizes)} fresh graphs" if args.graphs == "fresh"
             else "its validation graphs")
    text = markdown(rows, sizes, f"{args.checkpoint} on {args.config}: {where}, ratio to the "
                                 "best classical baseline (lower is better)")
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
