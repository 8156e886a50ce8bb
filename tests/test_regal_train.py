"""REGAL training and methods: the REINFORCE loss moves the policy the right way, the jitted
train step compiles once and updates the parameters, ``regal`` runs through
``gsched.methods.optimize`` from a policy export, bad options give clear errors and a run split
over two host devices is the one-device run (a subprocess); slow: a
short ``train.regal`` run and ``regal`` / ``idrs`` on its checkpoints (tiny graphs, budgets)."""

import json
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from gsched.core.padding import Bucket, batch_graphs
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from gsched.infra.checkpoint import save_checkpoint
from gsched.infra.config import config_to_dict
from gsched.infra.progress import read_metrics
from gsched.methods import optimize
from gsched.policies.regal import training as train_regal
from gsched.policies.regal.checkpoint import POLICY_KIND
from gsched.policies.regal.features import Features, num_node_features
from gsched.policies.regal.policy import PolicyConfig, log_prob
from gsched.policies.regal.reinforce import (
    Batch,
    ReinforceConfig,
    group_advantage,
    init_models,
    init_state,
    loss,
    make_train_step,
)
from tests.graphs import subprocess_env

D = 2
BUCKET = Bucket(16, 32, 32)
CONFIG = PolicyConfig(num_devices=D, hidden=8, steps=1, levels=2)


def _batch(seeds) -> Batch:
    graphs = [random_computation_graph(10, s) for s in seeds]
    rng = np.random.default_rng(seeds[0])
    nodes = rng.random((len(seeds), BUCKET.num_ops, num_node_features(D)), np.float32)
    edges = rng.random((len(seeds), BUCKET.num_edges, 2), np.float32)
    pinned = np.full((len(seeds), BUCKET.num_ops), -1, np.int32)
    pinned[:, 0] = 0
    return Batch(batch_graphs(graphs, BUCKET), Features(nodes, edges, pinned),
                 np.full(len(seeds), 1e5, np.float32))


@pytest.mark.parametrize("advantage, reward", [
    ("baseline", [[-0.9, -1.1], [-0.9, -1.1]]),  # the learned baseline starts at −1
    ("group", [[-1.49, -1.5], [-0.5, -0.51]]),  # tiny gaps between samples, far-apart levels
])
def test_reinforce_loss_favours_rewarded_actions(advantage, reward):
    """Two rollouts per graph, the first rewarded more: a gradient step on the loss lowers it
    and makes the rewarded action vector more likely than the other."""
    models = init_models(CONFIG, jax.random.key(0))
    params, static = eqx.partition(models, eqx.is_array)
    batch = _batch([1, 2])
    num_vars = CONFIG.space.num_vars
    actions = jnp.stack([jnp.zeros((2, BUCKET.num_ops, num_vars), jnp.int32),
                         jnp.ones((2, BUCKET.num_ops, num_vars), jnp.int32)], axis=1)
    reward = jnp.array(reward)

    @jax.jit
    def margin(p):  # log p(rewarded) − log p(other), summed over the batch
        policy = eqx.combine(p, static)[0]
        logits = jax.vmap(policy)(batch.graphs, batch.features)
        logp = jax.vmap(jax.vmap(log_prob, in_axes=(None, 0, None)))(
            logits, actions, batch.graphs.op_mask)
        return jnp.sum(logp[:, 0] - logp[:, 1])

    value_and_grad = jax.jit(jax.value_and_grad(
        lambda p: loss(p, static, batch, actions, reward, 1e-4, advantage)[0]))
    before, grads = value_and_grad(params)
    tx = optax.sgd(1e-2)
    updates, _ = tx.update(grads, tx.init(params), params)
    after_params = optax.apply_updates(params, updates)
    after, _ = value_and_grad(after_params)
    assert float(after) < float(before)
    assert float(margin(after_params)) > float(margin(params))


def test_group_advantage_by_hand():
    reward = jnp.array([[-0.9, -1.1, -1.0, -1.0], [-1.0, -1.0, -1.0, -1.0]])
    adv = group_advantage(reward)
    spread = float(jnp.std(reward[0])) + 1e-3 * 1.0
    np.testing.assert_allclose(adv[0], np.array([0.1 + 0.1 / 3, -0.1 - 0.1 / 3, 0, 0]) / spread,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(adv[1], 0.0)  # identical rewards: no signal, no NaN
    # A per-graph offset (what the learned baseline had to absorb) changes only the small
    # 1e-3·|mean| term of the scale.
    np.testing.assert_allclose(group_advantage(reward + 0.3), adv, rtol=1e-2, atol=1e-5)
    with pytest.raises(ValueError, match="advantage"):
        ReinforceConfig(advantage="mean")
    with pytest.raises(ValueError, match="samples >= 2"):
        ReinforceConfig(advantage="group", samples=1)


def test_train_step_compiles_once_and_updates():
    models = init_models(CONFIG, jax.random.key(0))
    rl = ReinforceConfig(samples=2, evals=30, learning_rate=1e-2)
    state = init_state(models, rl, jax.random.key(1))
    step = make_train_step(models, rl, CostParams())
    new, metrics = step(state, _batch([3, 4]))
    new, metrics = step(new, _batch([5, 6]))  # other graphs, same bucket and batch size
    assert step._cache_size() == 1
    assert int(new.step) == 2
    assert all(np.isfinite(float(v)) for v in metrics.values())
    assert float(metrics["evaluations"]) == 2 * 2 * 30
    assert float(metrics["reward"]) < 0.0  # −peak / reference
    moved = jax.tree.map(lambda a, b: bool(jnp.any(a != b)), state.params, new.params)
    assert all(jax.tree.leaves(moved))


@pytest.fixture(scope="module")
def policy_export(tmp_path_factory):
    """An untrained tiny policy exported as ``train.regal`` does (features: 100 evaluations)."""
    path = tmp_path_factory.mktemp("regal_policy") / "policy"
    config = {"policy": config_to_dict(CONFIG), "feature_evals": 100}
    save_checkpoint(path, init_models(CONFIG, jax.random.key(0))[0],
                    {"kind": POLICY_KIND, "config": config})
    return path


def _check_rows(graphs, outcome, budget):
    for graph, row in zip(graphs, outcome.results):
        assert row["evals_used"] == budget
        ops = sorted(item[1] for item in row["order"] if item[0] == "op")
        assert ops == list(range(graph.num_ops))
        assert row["value"] == row["peak_memory"] > 0


def test_regal_through_optimize(policy_export):
    graphs = [random_computation_graph(8, 11), random_computation_graph(10, 12)]
    outcome = optimize("regal", graphs, num_devices=D, budget=110, seed=0,
                       options={"checkpoint": str(policy_export)})
    _check_rows(graphs, outcome, 110)


def test_method_errors(policy_export, tmp_path):
    graphs = [random_computation_graph(8, 11)]
    with pytest.raises(ValueError, match="make train"):
        optimize("regal", graphs, num_devices=D, budget=160,
                 options={"checkpoint": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="encoder"):
        optimize("gas", graphs, num_devices=D, budget=160,
                 options={"checkpoint": str(policy_export)})
    with pytest.raises(ValueError, match="--decode must be one of"):
        optimize("regal", graphs, num_devices=D, budget=160,
                 options={"checkpoint": str(policy_export), "decode": "beam"})
    with pytest.raises(ValueError, match="must exceed"):
        optimize("regal", graphs, num_devices=D, budget=100,
                 options={"checkpoint": str(policy_export)})
    with pytest.raises(ValueError, match="devices"):
        optimize("regal", graphs, num_devices=3, budget=160,
                 options={"checkpoint": str(policy_export)})


# --- End to end (slow: several compilations of BRKGA and the train step) ---------------------

TINY = ["steps=2", "batch_size=2", "feature_evals=100", "valid_evals=150",
        "checkpoint_every=1", "validate_every=2", "log_every=1", "policy.steps=1",
        "policy.hidden=8", "reinforce.samples=2", "reinforce.evals=30", "data.num_graphs=10",
        "data.min_ops=6", "data.max_ops=10", "data.max_valid=2"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("regal_run")
    assert train_regal.main(["--config", "train/configs/regal_small.toml", "--run-dir",
                             str(run_dir), *TINY]) == 0
    return run_dir


@pytest.mark.slow
def test_training_run_writes_metrics_and_policy(trained):
    lines = [json.loads(x) for x in (trained / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in lines] == [1, 2]
    assert np.isfinite(lines[-1]["val/reward"]) and np.isfinite(lines[-1]["reward"])
    assert (trained / "policy").is_dir() and (trained / "dataset.npz").is_file()
    # A second run over the same directory must be asked for explicitly.
    with pytest.raises(Exception, match="previous run"):
        train_regal.main(["--config", "train/configs/regal_small.toml", "--run-dir",
                          str(trained), *TINY])


@pytest.mark.slow
@pytest.mark.parametrize("method, source", [("regal", "policy"), ("idrs", "policy"),
                                            ("regal", "")])
def test_trained_methods_through_optimize(trained, method, source):
    """The exported policy and the run directory itself (its best training checkpoint)."""
    graphs = [random_computation_graph(8, 11), random_computation_graph(10, 12)]
    outcome = optimize(method, graphs, num_devices=D, budget=160, seed=0,
                       options={"checkpoint": str(trained / source)})
    _check_rows(graphs, outcome, 160)


@pytest.mark.subprocess
def test_training_split_over_two_host_devices_gives_the_same_run(tmp_path):
    # `python -m train.regal` asks for one CPU device per core (here 2, forced): each step's
    # batch is split over them (run_training under the mesh: one BRKGA loop per device), with
    # the same metrics, step for step, as on one device (up to the order of the gradient's
    # sums over the batch).
    root = Path(__file__).resolve().parents[1]
    runs = {}
    for devices in (1, 2):
        run_dir = tmp_path / f"devices_{devices}"
        out = subprocess.run(
            [sys.executable, "-m", "train.regal", "--config", "train/configs/regal_small.toml",
             "--run-dir", str(run_dir), *TINY], cwd=root, env=subprocess_env(devices),
            capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr[-3000:]
        assert ("split over 2 devices" in out.stdout + out.stderr) == (devices == 2)
        runs[devices] = [{k: v for k, v in record.items() if k not in ("time", "elapsed")}
                         for record in read_metrics(run_dir / "metrics.jsonl")]
    assert len(runs[1]) == 2 and [x.keys() for x in runs[1]] == [x.keys() for x in runs[2]]
    for one, two in zip(runs[1], runs[2]):
        for key in one:
            np.testing.assert_allclose(two[key], one[key], rtol=1e-5, err_msg=key)
