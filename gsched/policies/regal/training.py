"""Train a REGAL policy (REGAL §3.4, A.5) or its GAS / IDRS variants with REINFORCE.

    python -m train.regal --config train/configs/regal_small.toml [--run-dir D] [--resume]
        [--overwrite] [key=value ...]          # e.g. reinforce.learning_rate=3e-4

The dataset is a built-in synthetic one (``data.source = "synthetic"``: REGAL-style random
graphs, topology-disjoint 3:1:1 split, optional augmentation) or a native ``.npz`` dataset
(split the same way). Every graph's input features (a uniform BRKGA run of ``feature_evals``
evaluations, REGAL A.1) and its reference ``o_BRKGA`` (uniform BRKGA on the same budget as the
rollouts: ``reinforce.evals`` for training graphs, ``valid_evals`` for validation graphs) are
computed once and cached in ``<run_dir>/dataset.npz``.

Validation: the greedy policy on the validation graphs with ``valid_evals`` evaluations in all
(``feature_evals`` for features, the rest for the policy's BRKGA; the better of the two bests
counts, as in the ``regal`` method) against uniform BRKGA with ``valid_evals``; the mean reward
``−o/o_BRKGA`` ranks checkpoints. At the end the best policy is exported to
``<run_dir>/policy`` (what ``--method regal --checkpoint`` loads).

Runtime objective (zero-shot REGAL): the paper uses 16 GiB per device on real graphs. Our
synthetic graphs are much smaller, so with ``cost.capacity_fraction`` set each graph's memory
(tensor sizes and temporary memory) is rescaled so that its tensor sizes sum to
``MEMORY_SCALE`` bytes and the capacity is ``capacity_fraction · MEMORY_SCALE`` — a capacity
relative to the graph's total size (:func:`gsched.costmodel.tasks.fraction_capacity`), shared by the whole batch (the
cost model takes one capacity per call). Peak-memory ratios are unchanged by the rescaling.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsched.core.graph import Graph
from gsched.core.padding import PaddedGraph, batch_graphs, bucket_for
from gsched.costmodel.params import CostParams, check_cost_params
from gsched.costmodel.tasks import fraction_capacity
from gsched.formats import load_dataset
from gsched.generators import (
    RandomGraphParams,
    augment,
    dedup,
    random_computation_graph,
    split_by_topology,
)
from gsched.infra.config import config_to_dict, parse_run_arguments
from gsched.infra.distributed import data_mesh
from gsched.infra.progress import log
from gsched.infra.train_loop import run_training
from gsched.policies.regal.checkpoint import export_policy
from gsched.policies.regal.features import Features, compute_features
from gsched.policies.regal.policy import PolicyConfig, mode_actions
from gsched.policies.regal.reinforce import (
    Batch,
    ReinforceConfig,
    init_models,
    init_state,
    make_train_step,
    models_of,
)
from gsched.policies.regal.rollout import actions_to_params, policy_search
from gsched.search import brkga

MEMORY_SCALE = float(2 ** 30)  # Σ tensor sizes of a rescaled graph (runtime task)
PREP_CHUNK = 32  # graphs per feature / reference computation (one compilation)


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Where the graphs come from.

    ``source``: ``"synthetic"`` or the path of a native ``.npz`` dataset. Synthetic graphs:
    ``num_graphs`` :func:`gsched.random_computation_graph` s with op counts uniform in
    ``[min_ops, max_ops]`` and log-normal size spread ``size_log_std``, ``augment_copies``
    augmented copies each (REGAL A.1). ``max_valid`` caps the validation graphs used.
    """

    source: str = "synthetic"
    num_graphs: int = 60
    min_ops: int = 20
    max_ops: int = 40
    size_log_std: float = 0.5
    augment_copies: int = 0
    max_valid: int = 16
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class CostConfig:
    """Cost model: transfer latency / bandwidth; ``capacity_fraction`` (runtime task, see the
    module docstring) or none."""

    latency: float = 0.0
    bandwidth: float = float("inf")
    capacity_fraction: float | None = None


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    policy: PolicyConfig = dataclasses.field(default_factory=PolicyConfig)
    reinforce: ReinforceConfig = dataclasses.field(default_factory=ReinforceConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    cost: CostConfig = dataclasses.field(default_factory=CostConfig)
    steps: int = 100_000
    batch_size: int = 4
    feature_evals: int = 400
    valid_evals: int = 5000
    checkpoint_every: int = 1000
    keep_checkpoints: int = 3  # the latest checkpoints kept in run_dir/checkpoints
    validate_every: int = 1000
    log_every: int = 100
    seed: int = 0

    def __post_init__(self):
        if self.valid_evals <= self.feature_evals:
            raise ValueError(f"valid_evals ({self.valid_evals}) must exceed feature_evals "
                             f"({self.feature_evals})")
        if self.batch_size < 1 or self.steps < 1:
            raise ValueError("batch_size and steps must be >= 1")


# --- Data ----------------------------------------------------------------------------------


def training_graphs(config: TrainConfig) -> tuple[list[Graph], list[Graph]]:
    """(train, valid) graphs, topology-disjoint, memory rescaled for the runtime task."""
    data = config.data
    seeds = np.random.SeedSequence(data.seed).spawn(3)
    if data.source == "synthetic":
        rng = np.random.default_rng(seeds[0])
        params = RandomGraphParams(size_log_std=data.size_log_std)
        sizes = rng.integers(data.min_ops, data.max_ops + 1, data.num_graphs)
        graphs = dedup([random_computation_graph(int(n), rng, params=params,
                                                 name=f"regal_{i}")
                        for i, n in enumerate(sizes)])
    else:
        graphs = load_dataset(data.source)
    train, valid, _ = split_by_topology(graphs, np.random.default_rng(seeds[1]))
    if data.augment_copies:
        rng = np.random.default_rng(seeds[2])
        train = [c for g in train for c in [g, *augment(g, data.augment_copies, rng)]]
    valid = valid[: data.max_valid]
    if not train or not valid:
        raise ValueError(f"the dataset gives {len(train)} training and {len(valid)} validation "
                         "graphs; need at least one of each (more graphs: data.num_graphs)")
    if config.cost.capacity_fraction is not None:
        train, valid = ([_rescaled(g) for g in split] for split in (train, valid))
    return train, valid


def _rescaled(graph: Graph) -> Graph:
    total = float(graph.tensor_size.sum())
    factor = MEMORY_SCALE / total if total > 0 else 1.0
    return graph.replace(tensor_size=graph.tensor_size * factor,
                         temporary_memory=graph.temporary_memory * factor)


def cost_params(config: TrainConfig) -> CostParams:
    fraction = config.cost.capacity_fraction
    return check_cost_params(config.cost.latency, config.cost.bandwidth,
                             fraction_capacity(fraction, [MEMORY_SCALE]))


def _chunked(fn, padded: PaddedGraph, key: jax.Array):
    """``fn(key, graphs [PREP_CHUNK])`` over all graphs in fixed-size chunks (the last one
    padded with repeats), outputs concatenated as NumPy."""
    count = padded.op_mask.shape[0]
    outs = []
    for start in range(0, count, PREP_CHUNK):
        index = np.minimum(np.arange(start, start + PREP_CHUNK), count - 1)
        chunk = jax.tree.map(lambda x: x[index], padded)
        outs.append(jax.device_get(fn(jax.random.fold_in(key, start), chunk)))
    return jax.tree.map(lambda *xs: np.concatenate(xs)[:count], *outs)


def _prepare(graphs: list[Graph], bucket, config: TrainConfig, costs: CostParams,
             reference_evals: int, key: jax.Array) -> dict[str, np.ndarray]:
    """Features, the feature search's best value and the reference ``o_BRKGA``."""
    objective, devices = config.reinforce.objective, config.policy.num_devices
    padded = batch_graphs(graphs, bucket)
    key_features, key_reference = jax.random.split(key)

    @jax.jit
    def features(key, chunk):
        feats, search = compute_features(key, chunk, costs, num_devices=devices,
                                         objective=objective, search_evals=config.feature_evals)
        return feats, search.best_value

    feats, first = _chunked(features, padded, key_features)
    reference = _chunked(lambda k, chunk: brkga.run_batch(
        k, chunk, num_devices=devices, budget=reference_evals, objective=objective,
        cost_params=costs).best_value, padded, key_reference)
    return {"nodes": feats.nodes, "edges": feats.edges, "pinned": feats.pinned,
            "first": first, "reference": reference}


def load_data(config: TrainConfig, run_dir: Path):
    """Padded train / valid graphs and their cached arrays (computed once per config)."""
    train, valid = training_graphs(config)
    bucket = bucket_for(train + valid)
    costs = cost_params(config)
    cache = run_dir / "dataset.npz"
    relevant = {k: config_to_dict(config)[k] for k in ("data", "cost")}
    relevant |= {"num_devices": config.policy.num_devices, "evals": config.reinforce.evals,
                 "objective": config.reinforce.objective,
                 "feature_evals": config.feature_evals, "valid_evals": config.valid_evals,
                 "seed": config.seed}
    tag = hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()
    if cache.exists():
        with np.load(cache) as npz:
            if str(npz["tag"]) == tag:
                arrays = {k: npz[k] for k in npz.files}
                log(f"dataset: {len(train)} train / {len(valid)} valid graphs, bucket "
                    f"{tuple(bucket)}, features and references from {cache}")
                return _split_arrays(train, valid, bucket, arrays)
    log(f"dataset: {len(train)} train / {len(valid)} valid graphs ({min(g.num_ops for g in train)}"
        f"–{max(g.num_ops for g in train)} ops), bucket {tuple(bucket)}; computing features "
        f"({config.feature_evals} evals) and uniform-BRKGA references …")
    start = time.perf_counter()
    key = jax.random.key(config.seed + 1)
    parts = {"train": _prepare(train, bucket, config, costs, config.reinforce.evals,
                               jax.random.fold_in(key, 0)),
             "valid": _prepare(valid, bucket, config, costs, config.valid_evals,
                               jax.random.fold_in(key, 1))}
    arrays = {f"{split}_{k}": v for split, part in parts.items() for k, v in part.items()}
    run_dir.mkdir(parents=True, exist_ok=True)
    np.savez(cache, tag=np.str_(tag), **arrays)
    log(f"dataset ready in {time.perf_counter() - start:.1f} s")
    return _split_arrays(train, valid, bucket, arrays)


def _split_arrays(train, valid, bucket, arrays):
    def batch(graphs, split):
        features = Features(arrays[f"{split}_nodes"], arrays[f"{split}_edges"],
                            arrays[f"{split}_pinned"])
        return Batch(batch_graphs(graphs, bucket), features, arrays[f"{split}_reference"])
    return batch(train, "train"), batch(valid, "valid"), arrays["valid_first"]


# --- Training ------------------------------------------------------------------------------


def make_validate(models, config: TrainConfig, costs: CostParams, valid: Batch,
                  first: np.ndarray):
    """``validate(state)`` → mean reward and % improvement over uniform BRKGA (greedy)."""
    key = jax.random.key(config.seed + 2)
    budget = config.valid_evals - config.feature_evals

    @jax.jit
    def run(params, valid: Batch, first):
        policy = models_of(params, models)[0]
        logits = jax.vmap(policy)(valid.graphs, valid.features)
        params_brkga = actions_to_params(mode_actions(logits), valid.graphs, policy.space)
        result = policy_search(key, valid.graphs, params_brkga, valid.features.pinned, costs,
                               num_devices=config.policy.num_devices, budget=budget,
                               objective=config.reinforce.objective,
                               search=config.reinforce.search)
        reward = -jnp.minimum(first, result.best_value) / valid.reference
        return {"reward": jnp.mean(reward), "improvement_pct": 100.0 * jnp.mean(1.0 + reward),
                "win_rate": jnp.mean(reward >= -1.0)}

    return lambda state: run(state.params, valid, first)


def main(argv=None) -> int:
    args, config, run_dir = parse_run_arguments(
        "python -m train.regal", __doc__.split("\n\n")[0], TrainConfig, argv)
    train_batch, valid_batch, first = load_data(config, run_dir)
    costs = cost_params(config)
    models = init_models(config.policy, jax.random.key(config.seed))
    state = init_state(models, config.reinforce, jax.random.key(config.seed + 3))
    train_step = make_train_step(models, config.reinforce, costs)
    count = train_batch.reference.shape[0]

    def make_batch(step: int) -> Batch:
        rng = np.random.default_rng((config.seed, step))
        index = rng.choice(count, config.batch_size, replace=count < config.batch_size)
        return jax.tree.map(lambda x: x[index], train_batch)

    devices = jax.local_device_count()
    mesh = data_mesh() if devices > 1 and config.batch_size % devices == 0 else None
    log(f"training {config.steps} steps, batch {config.batch_size} graphs × "
        f"{config.reinforce.samples} samples × {config.reinforce.evals} evaluations"
        f"{'' if mesh is None else f', split over {devices} devices'}, run dir {run_dir}")
    run_training(
        state, train_step, make_batch, steps=config.steps, run_dir=run_dir,
        checkpoint_every=config.checkpoint_every, keep=config.keep_checkpoints,
        validate=make_validate(models, config, costs, valid_batch, first),
        validate_every=config.validate_every, best_key="reward", resume=args.resume,
        overwrite=args.overwrite, log_every=config.log_every, config=config, mesh=mesh)
    target = export_policy(run_dir, models, config, state)
    log(f"best policy exported to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
