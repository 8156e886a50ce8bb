"""Train a GDP or GO policy with PPO (GDP §3–4, GO §4–5).

    python -m train.gdp --config train/configs/gdp_small.toml [--run-dir D] [--resume]
        [--overwrite] [key=value ...]                    # e.g. ppo.learning_rate=3e-4
    python -m train.go  --config train/configs/go_small.toml ...

**Data** (``data.source``):

* ``"layered"`` — NTO's layered graphs (:func:`gsched.layered_graph`) with op counts uniform in
  ``[min_ops, max_ops]``, compute costs rescaled so the largest op is ``max_flops`` flops on
  the device preset (roofline scale, as in ``docs/results/go_baselines``); ``num_graphs``
  training and ``valid_graphs`` validation graphs from separate streams (``valid_graphs = 0``:
  the training graphs validate — GDP's "one" and "batch" modes). :func:`fresh_graphs` draws
  graphs from a third stream, which neither training nor the choice of the kept policy saw.
* ``"workloads"`` — the papers' model families (:mod:`gsched.workloads`) imported at
  ``data.level`` with the preset's costs (``"hlo"``: XLA's CPU module on every machine, so
  a GPU run trains on the same graphs): the ``families`` train, the ``held_out`` ones
  validate (GO Fig. 5: pre-train on some families, test on another). With no ``held_out``
  the training graphs validate too (GDP's "one" mode with one family; "batch" with several).

**Reference** of each graph: the best classical baseline under the run's execution model —
TF default (one device), human expert, METIS (FM without pymetis), scored by the cost model
with XLA-style greedy fusion when ``cost.fusion`` is on. Rewards are ``−√(value / reference)``.

**Modes** (GDP Table 2 / §4.3): *one* = one graph; *batch* = several (superposition does the
rest); *fine-tune* = ``init_checkpoint`` names a pre-trained policy export and training
continues on the configured graphs (≤ 50 iterations in the papers; the ``gdp``/``go`` methods'
``--finetune-steps`` does the same inside a search); *zero-shot* = the methods without
fine-tuning.

Each step is one PPO iteration on ``batch_size`` graphs drawn by ``(seed, step)``; validation
is the greedy policy's mean ``value / reference`` on the validation graphs (``val/ratio``,
lower is better) and its mean reward (``val/reward``, ranks checkpoints). At the end the best
policy is exported to ``<run_dir>/policy`` (what ``--method gdp|go --checkpoint`` loads).
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from gsched.baselines.heuristics import single_device
from gsched.baselines.placement import PLACEMENT_BASELINES
from gsched.core.graph import Graph, topological_order
from gsched.core.padding import batch_graphs, bucket_for
from gsched.costmodel.host import evaluate_order
from gsched.costmodel.params import CostParams, check_cost_params, check_scheduler
from gsched.generators import layered_graph
from gsched.importers import preset
from gsched.infra.checkpoint import load_checkpoint
from gsched.infra.config import config_to_dict, parse_run_arguments
from gsched.infra.progress import log
from gsched.infra.train_loop import run_training
from gsched.policies.go.actions import ActionSpace
from gsched.policies.go.checkpoint import (
    POLICY_DIR,
    PolicySpec,
    load_policy,
    network_template,
    save_policy,
)
from gsched.policies.go.network import NetworkConfig
from gsched.policies.go.ppo import (
    Batch,
    ExecModel,
    PPOConfig,
    init_state,
    make_train_step,
    rollouts,
)

SOURCES = ("layered", "workloads")
BASELINES = {"tf_default": single_device(topological_order),
             **{name: fn for name, (_, fn) in PLACEMENT_BASELINES.items()}}


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Where the graphs come from (module docstring)."""

    source: str = "layered"
    num_graphs: int = 32
    valid_graphs: int = 8
    min_ops: int = 40
    max_ops: int = 80
    max_flops: float = 1e8
    families: tuple[str, ...] = ()
    held_out: tuple[str, ...] = ()
    size: str = "small"
    mode: str = "inference"
    level: str = "hlo"
    seed: int = 0

    def __post_init__(self):
        if self.source not in SOURCES:
            raise ValueError(f"data.source must be one of {SOURCES}, got {self.source!r}")
        if self.source == "layered" and not (3 <= self.min_ops <= self.max_ops
                                             and self.num_graphs >= 1 and self.valid_graphs >= 0):
            raise ValueError("layered data needs 3 <= min_ops <= max_ops, num_graphs >= 1 and "
                             "valid_graphs >= 0")
        if self.source == "workloads" and not self.families:
            raise ValueError("workloads data needs data.families (e.g. [\"rnnlm\", \"gnmt\"])")


@dataclasses.dataclass(frozen=True)
class CostConfig:
    """The cost model: a device preset for the roofline (SPEC §8.1), the device-to-device link
    (defaults: NVLink-class, as ``docs/results/go_baselines``), the §8.2 scheduler, fusion."""

    preset: str = "h100"
    latency: float = 2.0
    bandwidth: float = 4.5e5
    scheduler: str = "fifo"
    fusion: bool = False

    def __post_init__(self):
        check_scheduler(self.scheduler)
        preset(self.preset)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    space: ActionSpace = dataclasses.field(default_factory=ActionSpace)
    ppo: PPOConfig = dataclasses.field(default_factory=PPOConfig)
    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    cost: CostConfig = dataclasses.field(default_factory=CostConfig)
    steps: int = 200
    batch_size: int = 4
    checkpoint_every: int = 50
    keep_checkpoints: int = 3  # the latest checkpoints kept in run_dir/checkpoints
    validate_every: int = 25
    log_every: int = 5
    seed: int = 0
    init_checkpoint: str | None = None  # fine-tune mode: start from this policy export

    def __post_init__(self):
        if self.batch_size < 1 or self.steps < 1:
            raise ValueError("batch_size and steps must be >= 1")
        self.space.check_exec_model(self.space.num_devices, self.cost.fusion)

    @property
    def spec(self) -> PolicySpec:
        return PolicySpec(self.network, self.space, self.ppo, self.cost.scheduler,
                          self.cost.fusion)

    @property
    def exec_model(self) -> ExecModel:
        return ExecModel(self.space.num_devices, self.cost.scheduler, self.cost.fusion)


def cost_params(cost: CostConfig) -> CostParams:
    device = preset(cost.preset)
    return check_cost_params(cost.latency, cost.bandwidth, hbm_bandwidth=device.hbm_bandwidth,
                             launch_overhead=device.launch_overhead)


# --- Data ----------------------------------------------------------------------------------


def _layered(data: DataConfig, count: int, stream: int, peak_flops: float) -> list[Graph]:
    rng = np.random.default_rng([data.seed, stream])
    graphs = []
    for i, n in enumerate(rng.integers(data.min_ops, data.max_ops + 1, count)):
        g = layered_graph(int(n), rng)
        scale = data.max_flops / peak_flops / max(float(g.compute_cost.max()), 1e-30)
        graphs.append(g.replace(compute_cost=g.compute_cost * scale, name=f"layered_{stream}_{i}"))
    return graphs


def _workloads(data: DataConfig, names: tuple[str, ...], device: str) -> list[Graph]:
    from gsched import workloads  # builds JAX programs: only when asked for
    from gsched.importers import import_jax

    graphs = []
    for name in names:
        fn, args = workloads.program(name, data.size, data.mode)
        graph = import_jax(fn, *args, level=data.level, device=device)
        graphs.append(graph.replace(name=f"{name}_{data.size}_{data.mode}"))
    return graphs


def load_graphs(config: TrainConfig) -> tuple[list[Graph], list[Graph]]:
    """(train, valid) graphs of the config (module docstring)."""
    data = config.data
    if data.source == "layered":
        flops = preset(config.cost.preset).peak_flops
        train = _layered(data, data.num_graphs, 0, flops)
        return train, (_layered(data, data.valid_graphs, 1, flops) if data.valid_graphs
                       else train)
    train = _workloads(data, data.families, config.cost.preset)
    valid = _workloads(data, data.held_out, config.cost.preset) if data.held_out else train
    return train, valid


def fresh_graphs(config: TrainConfig, count: int) -> list[Graph]:
    """``count`` layered graphs of the config's distribution from a stream of their own (2:
    training draws from 0, validation from 1); ``ValueError`` for workload data, which has
    no unseen graphs of the same distribution."""
    if config.data.source != "layered":
        raise ValueError(f"fresh graphs need data.source = 'layered', got "
                         f"{config.data.source!r}: use the validation graphs")
    return _layered(config.data, count, 2, preset(config.cost.preset).peak_flops)


def references(graphs: list[Graph], config: TrainConfig, bucket) -> np.ndarray:
    """``[G]`` the best classical baseline value of each graph (module docstring)."""
    params = cost_params(config.cost)
    kwargs = dict(latency=float(params.latency), bandwidth=float(params.bandwidth),
                  hbm_bandwidth=float(params.hbm_bandwidth),
                  launch_overhead=float(params.launch_overhead),
                  scheduler=config.cost.scheduler, fusion=config.cost.fusion, bucket=bucket)
    objective = config.ppo.objective
    best = []
    for g in graphs:
        values = []
        for fn in BASELINES.values():
            order, placement, *_ = fn(g, config.space.num_devices, 0)
            values.append(evaluate_order(g, order, placement, config.space.num_devices,
                                         **kwargs)[objective])
        best.append(min(values))
    return np.asarray(best, np.float32)


def load_data(config: TrainConfig) -> tuple[Batch, Batch, list[Graph], list[Graph]]:
    """Padded (train, valid) batches with references, and the graphs themselves."""
    train, valid = load_graphs(config)
    bucket = bucket_for(train + valid)
    log(f"data: {len(train)} train / {len(valid)} valid graphs "
        f"({min(g.num_ops for g in train)}–{max(g.num_ops for g in train)} ops), bucket "
        f"{tuple(bucket)}; computing the baselines' references …")
    return (Batch(batch_graphs(train, bucket), jnp.asarray(references(train, config, bucket))),
            Batch(batch_graphs(valid, bucket), jnp.asarray(references(valid, config, bucket))),
            train, valid)


# --- Training ------------------------------------------------------------------------------


def make_validate(net, config: TrainConfig, costs: CostParams, valid: Batch):
    """``validate(state)`` → the greedy policy's mean ratio to the reference and reward."""
    _, static = eqx.partition(net, eqx.is_array)

    @jax.jit
    def run(params, valid: Batch):
        policy = eqx.combine(params, static)
        _, best = rollouts(policy, valid.graphs, valid.reference, jax.random.key(0), None,
                           costs, space=config.space, exec_model=config.exec_model,
                           samples=1, rounds=config.ppo.rounds, objective=config.ppo.objective,
                           greedy=True)
        ratio = best.value / valid.reference
        return {"ratio": jnp.mean(ratio), "reward": jnp.mean(-jnp.sqrt(ratio)),
                "win_rate": jnp.mean(ratio <= 1.0)}

    return lambda state: run(state.params, valid)


def initial_network(config: TrainConfig):
    """The network training starts from: fresh, or ``init_checkpoint``'s (fine-tune mode,
    which must have the same network and action space)."""
    if config.init_checkpoint is None:
        return network_template(config.spec, jax.random.key(config.seed))
    net, spec, _ = load_policy(config.init_checkpoint)
    if (spec.network, spec.space) != (config.network, config.space):
        raise ValueError(f"init_checkpoint {config.init_checkpoint} has another network or "
                         f"action space than the config (checkpoint: {spec.network}, "
                         f"{spec.space})")
    return net


def export_policy(run_dir: Path, net, config: TrainConfig, template) -> Path:
    """Writes the best (else the latest) policy of the run to ``run_dir/policy``."""
    import shutil

    state, meta = load_checkpoint(run_dir, template)
    target = run_dir / POLICY_DIR
    if target.exists():
        shutil.rmtree(target)
    _, static = eqx.partition(net, eqx.is_array)
    save_policy(target, eqx.combine(state.params, static), config.spec,
                {"step": meta["step"], "best_value": meta["best_value"],
                 "data": config_to_dict(config.data), "cost": config_to_dict(config.cost)})
    return target


def main(argv=None, prog: str = "python -m train.go") -> int:
    args, config, run_dir = parse_run_arguments(prog, __doc__.split("\n\n")[0], TrainConfig,
                                                argv)
    train_batch, valid_batch, _, _ = load_data(config)
    costs = cost_params(config.cost)
    net = initial_network(config)
    state = init_state(net, config.ppo, jax.random.key(config.seed + 1))
    train_step = make_train_step(net, config.space, config.exec_model, config.ppo, costs)
    count = train_batch.reference.shape[0]

    def make_batch(step: int) -> Batch:
        rng = np.random.default_rng((config.seed, step))
        index = rng.choice(count, config.batch_size, replace=count < config.batch_size)
        return jax.tree.map(lambda x: x[index], train_batch)

    log(f"training {config.steps} PPO iterations, batch {config.batch_size} graphs × "
        f"{config.ppo.samples} samples × {config.ppo.rounds} rounds, tasks "
        f"{'+'.join(config.space.tasks)}, D = {config.space.num_devices}, scheduler "
        f"{config.cost.scheduler}, fusion {config.cost.fusion}, run dir {run_dir}")
    run_training(
        state, train_step, make_batch, steps=config.steps, run_dir=run_dir,
        checkpoint_every=config.checkpoint_every, keep=config.keep_checkpoints,
        validate=make_validate(net, config, costs, valid_batch),
        validate_every=config.validate_every, best_key="reward", resume=args.resume,
        overwrite=args.overwrite, log_every=config.log_every, config=config)
    target = export_policy(run_dir, net, config, state)
    log(f"best policy exported to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
