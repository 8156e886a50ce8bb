"""A trained GDP / GO policy as a budgeted search: zero-shot decoding, optional fine-tuning.

:func:`policy_search` runs, for every graph of a batch on its own (a ``vmap`` over graphs, so
fine-tuning gives each graph its own copy of the parameters):

1. **greedy** — the policy's most likely actions, ``rounds`` refinement steps (GO eq. 2), each
   evaluated: ``rounds`` evaluations (the zero-shot result);
2. **fine-tuning** (``finetune_steps = K > 0``, GDP §4.3 / GO §5.2: ≤ 50 updates on a graph
   the policy never saw) — ``K`` PPO iterations on that graph alone
   (:func:`gsched.policies.go.ppo.ppo_iteration`), rewards normalized by the greedy value of
   step 1 (the classical baselines are not part of the search): ``K · samples · rounds``
   evaluations;
3. the rest of the budget: ``decode="greedy"`` decodes greedily once more with the fine-tuned
   parameters (``rounds`` evaluations; nothing when ``K = 0``); ``decode="sample"`` spends
   what is left in batches of ``samples`` sampled rollouts; ``decode="brkga"`` decodes as
   ``"greedy"`` does, then spends every evaluation left on BRKGA (REGAL's defaults,
   :func:`gsched.search.brkga.run_batch`) over the policy's genes
   (:meth:`~gsched.policies.go.actions.ActionSpace.search_genes`), with the policy's best
   solution as the first chromosome of its initial population (evaluated again and counted):
   the policy-seeded BRKGA, whose result is never worse than the policy's (beyond the
   papers). ``decode="local_search"`` / ``"annealing"`` do the same with local search (its
   first step evaluates the seeds and starts from the best) or simulated annealing (every
   chain starts from a seed).
   ``seeds [B, S, L]`` (the method's ``--seed-from``, host heuristics' solutions) join the
   policy's as the next ``S`` seeds of that search.

``config.temperature`` (``T``; 1 unless set) is the sampling temperature of steps 2 and 3:
rollouts draw from ``softmax(logits / T)`` and fine-tuning's PPO loss uses the same
distribution. ``T > 1`` keeps a nearly deterministic policy's samples diverse; the greedy
decodes do not depend on it.

Every evaluated solution (fine-tuning rollouts included) competes for the result, and
``evals_used`` counts every evaluation. :func:`evaluations_needed` gives the minimum budget;
a smaller one raises ``ValueError``.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp

from gsched.costmodel.params import CostParams
from gsched.policies.go import actions as act
from gsched.policies.go.network import PolicyNetwork
from gsched.policies.go.ppo import (
    Batch,
    ExecModel,
    PPOConfig,
    optimizer,
    ppo_iteration,
    rollouts,
)
from gsched.search import annealing, brkga, local
from gsched.search.common import SearchResult

# The searches a decode can hand the rest of the budget to, seeded with the policy's solution.
SEEDED_SEARCHES = {"brkga": brkga.run_batch, "local_search": local.run_batch,
                   "annealing": annealing.run_batch}
DECODINGS = ("greedy", "sample", *SEEDED_SEARCHES)


def evaluations_needed(config: PPOConfig, decode: str, finetune_steps: int) -> int:
    """The fewest evaluations a search with these settings spends per graph."""
    if decode not in DECODINGS:
        raise ValueError(f"decode must be one of {DECODINGS}, got {decode!r}")
    if isinstance(finetune_steps, bool) or not isinstance(finetune_steps, int) \
            or finetune_steps < 0:
        raise ValueError(f"finetune_steps must be an int >= 0, got {finetune_steps!r}")
    needed = config.rounds + finetune_steps * config.samples * config.rounds
    if finetune_steps and decode != "sample":
        needed += config.rounds
    return needed


def policy_search(key: jax.Array, net: PolicyNetwork, graphs, cost_params: CostParams, *,
                  space: act.ActionSpace, exec_model: ExecModel, config: PPOConfig,
                  budget: int, objective: str, decode: str = "greedy",
                  finetune_steps: int = 0, seeds: jax.Array | None = None) -> SearchResult:
    """The search of the module docstring on ``graphs [B]``; a :class:`SearchResult`."""
    needed = evaluations_needed(config, decode, finetune_steps)
    search = SEEDED_SEARCHES.get(decode)
    if seeds is not None and search is None:
        raise ValueError(f"seeds (--seed-from) need a seeded search as decode "
                         f"({', '.join(SEEDED_SEARCHES)}), got {decode!r}")
    if seeds is not None and budget == needed:
        raise ValueError(f"the policy uses the whole budget ({budget} evaluations), none is left "
                         f"for {decode}'s seeds")
    if budget < needed:
        raise ValueError(f"the policy needs {needed} evaluations per graph ({config.rounds} "
                         f"greedy rounds + {finetune_steps} fine-tuning iterations × "
                         f"{config.samples} samples × {config.rounds} rounds), the budget is "
                         f"{budget}")
    space.check_exec_model(exec_model.num_devices, exec_model.fusion)
    genes = None if search is None else space.search_genes(exec_model.fusion)
    config = dataclasses.replace(config, objective=objective)
    cost_params = jax.tree.map(lambda x: jnp.asarray(x, jnp.float32), cost_params)
    params, static = eqx.partition(net, eqx.is_array)
    per_rollout = config.samples * config.rounds
    chunks = 0
    if decode == "sample":
        chunks = (budget - needed) // per_rollout
    settings = dict(space=space, exec_model=exec_model, objective=objective,
                    rounds=config.rounds, infeasible_reward=config.infeasible_reward)

    def one(graph, key):
        graph = jax.tree.map(lambda x: x[None], graph)  # a batch of one graph
        keys = jax.random.split(key, 3)
        unit = jnp.ones(1, jnp.float32)
        _, best = rollouts(net, graph, unit, keys[0], None, cost_params, samples=1,
                           greedy=True, **settings)
        tuned = params
        if finetune_steps:
            reference = jnp.where(jnp.isfinite(best.value) & (best.value > 0), best.value, 1.0)
            batch = Batch(graph, reference)

            def iterate(carry, k):
                p, opt_state, best = carry
                p, opt_state, _, best = ppo_iteration(p, opt_state, k, static, batch, best,
                                                      cost_params, space=space,
                                                      exec_model=exec_model, config=config)
                return (p, opt_state, best), None

            (tuned, _, best), _ = jax.lax.scan(
                iterate, (params, optimizer(config).init(params), best),
                jax.random.split(keys[1], finetune_steps))
            if decode != "sample":
                _, best = rollouts(eqx.combine(tuned, static), graph, unit, keys[0], best,
                                   cost_params, samples=1, greedy=True, **settings)
        if chunks:
            policy = eqx.combine(tuned, static)

            def draw(best, k):
                _, best = rollouts(policy, graph, unit, k, best, cost_params,
                                   samples=config.samples, temperature=config.temperature,
                                   **settings)
                return best, None

            best, _ = jax.lax.scan(draw, best, jax.random.split(keys[2], chunks))
        return jax.tree.map(lambda x: x[0], best)

    count = graphs.op_mask.shape[0]
    best = jax.vmap(one)(graphs, jax.random.split(key, count))
    used = jnp.full(count, needed + chunks * per_rollout, jnp.int32)
    if genes is None or budget == needed:
        return SearchResult(best.value, best.keys, best.evaluation, used)
    starts = best.keys[:, None]
    if seeds is not None:
        starts = jnp.concatenate([starts, jnp.asarray(seeds, starts.dtype)], axis=1)
    seeded = search(jax.random.fold_in(key, 1), graphs, num_devices=exec_model.num_devices,
                    budget=budget - needed, objective=objective, cost_params=cost_params,
                    seeds=starts, scheduler=exec_model.scheduler, fusion=exec_model.fusion,
                    genes=genes)
    return SearchResult(seeded.best_value, seeded.best_keys, seeded.best_evaluation,
                        used + seeded.evals_used)
