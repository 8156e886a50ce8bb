"""How `topoformer_brkga`'s default concentration κ = 2 was chosen: on FRESH training-
distribution graphs (16 layered graphs of 50-100 nodes, generator seeds 5000-5015; the shipped
Topoformer was trained on 50-100-node layered graphs drawn with data seed 0, the evaluation
graphs of eval/configs/hybrid.toml are other graphs), never on the evaluation graphs.

    python -m eval.hybrid_concentration [BUDGET ...]

For each budget (default 1000 and 5000): BRKGA (REGAL defaults, key 1) and, with the same key,
BRKGA whose scheduling genes' initial / mutant Betas are centred on the Topoformer's best beam
order with concentration κ (α + β), with and without the 16 beam orders as seeds; "uniform" is
seeds with uniform mutants, "order statistic" is Beta(n − p, p + 1) (κ = n + 1). Prints the
mean and geometric mean of value / BRKGA and the share of graphs where the variant is ≤ BRKGA.
Results: docs/results/hybrid/README.md.
"""

from __future__ import annotations

import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.padding import batch_graphs, bucket_for
from gsched.generators import layered_graph
from gsched.policies.topoformer import checkpoint as topo_checkpoint
from gsched.policies.topoformer import hybrid
from gsched.policies.topoformer import method as topo_method
from gsched.search import brkga


def fresh_graphs() -> list:
    """16 fresh 50-100-node layered graphs (generator seeds 5000-5015), smallest first."""
    rng = np.random.default_rng(5000)
    return sorted((layered_graph(int(n), 5000 + i)
                   for i, n in enumerate(rng.integers(50, 101, 16))), key=lambda g: g.num_ops)


def main(argv: list[str] | None = None) -> int:
    """Runs the study for the budgets in ``argv`` (default 1000 and 5000)."""
    budgets = [int(b) for b in (sys.argv[1:] if argv is None else argv)] or [1000, 5000]
    graphs = fresh_graphs()
    model, config = topo_checkpoint.load(None, "beam")
    bucket = bucket_for(graphs)
    padded = batch_graphs(graphs, bucket)
    orders, best = jax.jit(lambda k, g: topo_method.decoded_orders(model, config, "beam", k, g,
                                                                   16))(jax.random.key(0), padded)
    seeds = jax.vmap(jax.vmap(hybrid.seed_chromosome, in_axes=(None, 0)))(padded, orders)
    best_orders = orders[jnp.arange(len(graphs)), best]

    def params_for(kappa):
        if kappa == "uniform":
            return jax.vmap(lambda g: brkga.uniform_params(bucket.chromosome_length(1)))(padded)
        if kappa == "order statistic":  # κ = n + 1: Beta(n − p, p + 1)
            return jax.vmap(lambda g, o: hybrid.mutant_params(g, o, jnp.sum(g.op_mask) + 1.0))(
                padded, best_orders)
        return jax.vmap(lambda g, o: hybrid.mutant_params(g, o, kappa))(padded, best_orders)

    for budget in budgets:
        ref = np.asarray(brkga.run_batch(jax.random.key(1), padded, num_devices=1,
                                         budget=budget).best_value)
        for kappa in ("uniform", 2.0, 8.0, 32.0, "order statistic"):
            for seeded in (True, False):
                if kappa == "uniform" and not seeded:
                    continue  # plain BRKGA
                start = time.time()
                r = brkga.run_batch(jax.random.key(1), padded, brkga.BRKGAConfig(),
                                    params_for(kappa), num_devices=1, budget=budget,
                                    seeds=seeds if seeded else None)
                ratio = np.asarray(r.best_value) / ref
                print(f"budget {budget} kappa {kappa} seeded {seeded}: mean v/brkga "
                      f"{ratio.mean():.4f} gmean {np.exp(np.log(ratio).mean()):.4f} "
                      f"win {np.mean(ratio <= 1):.2f} ({time.time() - start:.1f}s)", flush=True)
        seed_only = np.asarray(brkga.run_batch(jax.random.key(1), padded, brkga.BRKGAConfig(),
                                               params_for("uniform"), num_devices=1, budget=16,
                                               seeds=seeds).best_value)
        print(f"budget {budget}: topoformer beam seed / brkga {np.mean(seed_only / ref):.4f}")
    return 0
