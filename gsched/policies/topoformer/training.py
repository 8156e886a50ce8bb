"""Train Topoformer (Neural Topological Ordering, §4.3) with REINFORCE on layered graphs.

    python -m train.topoformer --config train/configs/topoformer_small.toml [--run-dir D]
        [--resume] [--overwrite] [key=value ...]      # e.g. reinforce.learning_rate=3e-4

Every step draws ``batch_size`` fresh layered graphs (NTO appendix A,
:func:`gsched.layered_graph`) with node counts uniform in ``[data.min_nodes,
data.max_nodes]``, a pure function of ``(data.seed, step)`` so resuming is exact. All graphs
are padded to one bucket: ``N = T`` = the next power of two ≥ ``max_nodes`` and ``E`` = the
next power of two ≥ ``data.edges_per_node · max_nodes`` (a graph that does not fit raises).

An epoch is ``reinforce.steps_per_epoch`` steps; at its end the baseline policy may be
replaced (``gsched.policies.topoformer.reinforce``). Validation (every ``validate_every`` steps, default
one epoch): the policy's greedy peak memory on ``data.val_graphs`` fixed graphs, as the mean
per-graph ratio to XLA's list scheduler (``val/ratio_to_xla_list``), to XLA's default scheduler
(``val/ratio_to_xla_default``; the list scheduler is 5–10 % weaker on 500-node layered graphs)
and to the initial policy (``val/ratio_to_initial``); ``select_on`` names the one that ranks
checkpoints (lower is better; default ``ratio_to_xla_list``, what the shipped small model was
selected on). At the end, the best policy
is exported to ``<run_dir>/model`` (what ``--method topoformer --checkpoint`` loads).

``init_from`` (a model export or a run directory holding one) starts the policy and the
baseline from that model's weights instead of ``seed``'s initialization, e.g. to fine-tune an
earlier run at a lower learning rate; its model config must equal ``model``. The optimizer
state, the step count and the data stream start afresh.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsched.baselines import HEURISTICS
from gsched.core.padding import Bucket, batch_graphs, next_pow2
from gsched.costmodel.host import evaluate_order
from gsched.generators import layered_graph
from gsched.infra.checkpoint import load_checkpoint
from gsched.infra.config import parse_run_arguments
from gsched.infra.train_loop import run_training
from gsched.policies.topoformer.checkpoint import MODEL_DIR, load_model, save_model
from gsched.policies.topoformer.model import Topoformer, TopoformerConfig
from gsched.policies.topoformer.reinforce import (
    Batch,
    ReinforceConfig,
    epoch_end,
    greedy_peaks,
    init_state,
    make_batch,
    make_train_step,
)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Layered graphs: node counts uniform in ``[min_nodes, max_nodes]``."""

    min_nodes: int = 500
    max_nodes: int = 500
    edges_per_node: int = 8  # edge slots of the padding bucket per node
    val_graphs: int = 100
    seed: int = 0

    def __post_init__(self):
        if not 3 <= self.min_nodes <= self.max_nodes:
            raise ValueError(f"need 3 <= min_nodes <= max_nodes, got {self.min_nodes}, "
                             f"{self.max_nodes}")
        if self.edges_per_node < 1 or self.val_graphs < 2:
            raise ValueError("edges_per_node must be >= 1 and val_graphs >= 2")


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    steps: int = 40750  # 326 epochs of 125 steps (C.1)
    batch_size: int = 8
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3  # the latest checkpoints kept in run_dir/checkpoints
    validate_every: int | None = None  # default: one epoch
    log_every: int = 25
    seed: int = 0
    select_on: str = "ratio_to_xla_list"  # the validation value that ranks checkpoints
    init_from: str | None = None  # a model export to start from (default: a fresh model)
    model: TopoformerConfig = TopoformerConfig()
    reinforce: ReinforceConfig = ReinforceConfig()
    data: DataConfig = DataConfig()


REFERENCES = ("xla_list", "xla_default")  # the heuristics validation compares against
VALIDATION_VALUES = tuple(f"ratio_to_{name}" for name in REFERENCES) + ("ratio_to_initial",)


def bucket_of(data: DataConfig) -> Bucket:
    nodes = next_pow2(data.max_nodes)
    return Bucket(nodes, nodes, next_pow2(data.edges_per_node * data.max_nodes))


def graphs_for(data: DataConfig, count: int, stream: tuple[int, ...]) -> list:
    rng = np.random.default_rng([data.seed, *stream])
    sizes = rng.integers(data.min_nodes, data.max_nodes + 1, count)
    return [layered_graph(int(n), rng) for n in sizes]


def batch_maker(config: TrainConfig):
    bucket = bucket_of(config.data)

    def make(step: int) -> Batch:
        graphs = graphs_for(config.data, config.batch_size, (0, step))
        return make_batch(batch_graphs(graphs, bucket), config.model)

    return make


def initial_model(config: TrainConfig) -> Topoformer:
    """A fresh model from ``config.seed``, or ``config.init_from``'s weights (whose model config
    must equal ``config.model``; a mismatch raises ``ValueError`` naming both)."""
    if config.init_from is None:
        return Topoformer(config.model, jax.random.key(config.seed))
    model, model_config = load_model(config.init_from)
    if model_config != config.model:
        raise ValueError(f"init_from={config.init_from!r} holds a model with {model_config}, "
                         f"but this run's [model] is {config.model}")
    return model


def main(argv: list[str] | None = None) -> int:
    args, config, run_dir = parse_run_arguments(
        "python -m train.topoformer", __doc__, TrainConfig, argv)
    rl = config.reinforce
    if config.select_on not in VALIDATION_VALUES:
        raise ValueError(f"select_on={config.select_on!r}: expected one of {VALIDATION_VALUES}")

    bucket = bucket_of(config.data)
    val_graphs = graphs_for(config.data, config.data.val_graphs, (1,))
    validation = make_batch(batch_graphs(val_graphs, bucket), config.model)
    reference = {name: jnp.asarray([evaluate_order(g, *HEURISTICS[name](g, 1, 0)[:2],
                                                   bucket=bucket)["peak_memory"]
                                    for g in val_graphs])
                 for name in REFERENCES}
    model = initial_model(config)
    state = init_state(model, rl, jax.random.key(config.seed + 1), validation)
    initial = state.baseline_val  # the initial policy's greedy peaks
    step_fn = make_train_step(rl)

    def train_step(state, batch):
        state, metrics = step_fn(state, batch)
        if int(state.step) % rl.steps_per_epoch == 0:
            state, extra = epoch_end(state, validation, rl.baseline_t)
            metrics = {**metrics, **extra}
        return state, metrics

    validate_peaks = eqx.filter_jit(greedy_peaks)

    def validate(state):
        peaks = validate_peaks(state.policy, validation)
        return {**{f"ratio_to_{name}": jnp.mean(peaks / ref) for name, ref in reference.items()},
                "ratio_to_initial": jnp.mean(peaks / initial)}

    state = run_training(
        state, train_step, batch_maker(config), steps=config.steps, run_dir=run_dir,
        checkpoint_every=config.checkpoint_every, keep=config.keep_checkpoints, validate=validate,
        validate_every=config.validate_every or rl.steps_per_epoch, higher_is_better=False,
        best_key=config.select_on, resume=args.resume, overwrite=args.overwrite,
        log_every=config.log_every, config=config)
    best, meta = load_checkpoint(run_dir, state)  # the best validation checkpoint
    export = run_dir / MODEL_DIR
    if export.exists():
        shutil.rmtree(export)
    save_model(export, best.policy, config.model,
               {"step": meta["step"], f"val_{config.select_on}": meta["best_value"]})
    print(f"exported the best policy (step {meta['step']}, val {config.select_on} "
          f"{meta['best_value']:.4f}) to {export}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
