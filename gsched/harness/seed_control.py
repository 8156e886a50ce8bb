"""Is it the learned model, or any good order, that makes seeded BRKGA strong? The control for
``topoformer_brkga``'s gain over BRKGA (issue #15 §3, ``docs/results/nto_mid/``).

    python -m eval.seed_control [--config eval/configs/nto_large_mid_hybrid.toml]
        [--checkpoint topoformer_mid] [--budget 5000] [--seeds 0,1,2]

On every dataset of a sweep config (D = 1, peak memory), with one key per seed shared by all
three so the comparison is paired: BRKGA (REGAL defaults, uniform genes); BRKGA seeded the
way ``topoformer_brkga`` seeds it (the seed chromosome and rank Betas with κ = 2,
:mod:`gsched.policies.topoformer.hybrid`) but from **XLA's default scheduler's** order, one
seed; and ``topoformer_brkga`` itself (the checkpoint's 16 beam orders). Prints, per dataset,
each method's mean peak over XLA's default scheduler's and its mean ratio to uniform BRKGA
with a 95 % bootstrap interval over graphs (seed-averaged) and the share of (graph, seed)
pairs below it; then the model-seeded over the XLA-seeded ratio, the control's answer.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np

from gsched.baselines import HEURISTICS
from gsched.core.padding import batch_graphs, bucket_for
from gsched.costmodel.host import evaluate_order
from gsched.harness.benchmarks import parse_int_list
from gsched.harness.config import load_config
from gsched.harness.statistics import bootstrap_interval
from gsched.policies.topoformer import checkpoint as topo_checkpoint
from gsched.policies.topoformer import hybrid
from gsched.policies.topoformer import method as topo_method
from gsched.search import brkga

KAPPA = 2.0  # topoformer_brkga's default concentration
WIDTH = 16  # beam orders decoded (topoformer_brkga at a 5K budget)


def padded_order(order: np.ndarray, num_slots: int) -> np.ndarray:
    """``[N]`` op ids: ``order`` (the real ops) followed by the padded op slots in order."""
    return np.concatenate([order, np.arange(len(order), num_slots)]).astype(np.int32)


def run_dataset(graphs: list, model, model_config, budget: int, seeds: list[int]
                ) -> dict[str, np.ndarray]:
    """``{method: [S, G] best peaks}`` for uniform, XLA-seeded and model-seeded BRKGA, and
    ``"xla_default": [G]``."""
    bucket = bucket_for(graphs)
    padded = batch_graphs(graphs, bucket)
    xla = [HEURISTICS["xla_default"](g, 1, 0)[0] for g in graphs]
    xla_value = np.array([evaluate_order(g, o)["peak_memory"] for g, o in zip(graphs, xla)])
    xla_orders = jnp.asarray(np.stack([padded_order(o, bucket.num_ops) for o in xla]))
    orders, best = jax.jit(lambda k, g: topo_method.decoded_orders(
        model, model_config, "beam", k, g, WIDTH))(jax.random.key(0), padded)
    best_orders = orders[jnp.arange(len(graphs)), best]
    runs = {
        "brkga": lambda key: brkga.run_batch(key, padded, num_devices=1, budget=budget),
        "xla_seeded_brkga": lambda key: hybrid.seeded_brkga(
            key, padded, xla_orders[:, None], xla_orders, KAPPA, budget=budget),
        "model_seeded_brkga": lambda key: hybrid.seeded_brkga(
            key, padded, orders, best_orders, KAPPA, budget=budget),
    }
    out = {name: np.stack([np.asarray(run(jax.random.key(seed)).best_value) for seed in seeds])
           for name, run in runs.items()}
    return {**out, "xla_default": xla_value}


def report(name: str, values: dict[str, np.ndarray], rng: np.random.Generator) -> list[str]:
    """Markdown rows for one dataset (see the module docstring)."""
    uniform, xla = values["brkga"], values["xla_default"]
    rows = []
    for method in ("brkga", "xla_seeded_brkga", "model_seeded_brkga"):
        v = values[method]
        vs_xla = float(np.mean(v / xla[None]))
        ratio = np.mean(v / uniform, axis=0)  # seed-averaged, per graph
        low, high = bootstrap_interval(ratio, rng)
        better = float(np.mean(v < uniform))
        rows.append(f"| {name} | {method} | {vs_xla:.4f} | {ratio.mean():.4f} [{low:.4f}, "
                    f"{high:.4f}] | {100 * better:.0f} % |")
    model, control = values["model_seeded_brkga"], values["xla_seeded_brkga"]
    ratio = np.mean(model / control, axis=0)
    low, high = bootstrap_interval(ratio, rng)
    rows.append(f"| {name} | model- / XLA-seeded (pairs: model-seeded lower) | — | "
                f"{ratio.mean():.4f} [{low:.4f}, {high:.4f}] | "
                f"{100 * np.mean(model < control):.0f} % |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval.seed_control",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="eval/configs/nto_large_mid_hybrid.toml")
    parser.add_argument("--checkpoint", default="topoformer_mid")
    parser.add_argument("--budget", type=int, default=5000)
    parser.add_argument("--seeds", type=parse_int_list, default=(0, 1, 2))
    args = parser.parse_args(argv)
    model, model_config = topo_checkpoint.load(args.checkpoint, "beam")
    rng = np.random.default_rng(0)
    print("| dataset | method | peak / XLA default | / uniform BRKGA (95 % bootstrap) | "
          "pairs below uniform BRKGA |")
    print("| --- | --- | --- | --- | --- |")
    for dataset in load_config(args.config).datasets:
        values = run_dataset(list(dataset.graphs), model, model_config, args.budget,
                             list(args.seeds))
        print("\n".join(report(dataset.name, values, rng)), flush=True)
    return 0
