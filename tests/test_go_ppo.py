"""GDP / GO actions, PPO and the policy search (gsched.policies.go.actions, .ppo, .rollout)."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import batch_graphs, bucket_for, pad_graph
from gsched.costmodel.evaluate import evaluate
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from gsched.policies.go import actions as act
from gsched.policies.go.ppo import (
    Batch,
    ExecModel,
    PPOConfig,
    Steps,
    baseline,
    loss,
    reward,
    rollouts,
)
from gsched.search.common import freeze_genes


def _graph(n=12, seed=0):
    g = random_computation_graph(n, np.random.default_rng(seed))
    return pad_graph(g, bucket_for(g))


class TableNet(eqx.Module):
    """A toy policy: fixed per-op logits per task and a scalar value (no graph input)."""

    logits: tuple
    value: jnp.ndarray

    def __call__(self, graph, previous):
        return self.logits, self.value


# --- actions -------------------------------------------------------------------------------


def test_action_space_checks():
    with pytest.raises(ValueError, match="order"):
        act.ActionSpace(tasks=("fusion", "placement"))
    with pytest.raises(ValueError, match="distinct"):
        act.ActionSpace(tasks=("placement", "placement"))
    with pytest.raises(ValueError, match="priority_levels"):
        act.ActionSpace(tasks=("schedule",), priority_levels=1)
    space = act.ActionSpace(tasks=("placement", "fusion"), num_devices=4, fusion_levels=3)
    assert space.num_actions == (4, 3)
    with pytest.raises(ValueError, match="4 devices"):
        space.check_exec_model(2, True)
    with pytest.raises(ValueError, match="fusion on"):
        space.check_exec_model(4, False)


def test_to_keys_decodes_to_the_chosen_placement_and_priorities():
    graph = _graph()
    n, t = graph.op_mask.shape[0], graph.tensor_mask.shape[0]
    rng = np.random.default_rng(1)
    placement = jnp.asarray(rng.integers(0, 3, n), jnp.int32)
    levels = jnp.asarray(rng.integers(0, 4, n), jnp.int32)
    fusion = jnp.asarray(rng.integers(0, 2, n), jnp.int32)
    space = act.ActionSpace(tasks=("placement", "schedule", "fusion"), num_devices=3,
                            priority_levels=4)
    keys = act.to_keys((placement, levels, fusion), graph, space, num_devices=3, fusion=True)
    assert keys.shape == (graph.bucket.chromosome_length(3, True),)
    result = evaluate(graph, keys, CostParams(), num_devices=3, fusion=True)
    real = np.asarray(graph.op_mask)
    np.testing.assert_array_equal(np.asarray(result.placement)[real], np.asarray(placement)[real])
    np.testing.assert_allclose(keys[3 * n:4 * n], np.asarray(levels) / 3)
    # a transfer takes its producer's priority; fusion levels map to {0, 1}
    np.testing.assert_allclose(keys[4 * n:4 * n + 3 * t].reshape(t, 3),
                               np.repeat((np.asarray(levels) / 3)[np.asarray(
                                   graph.tensor_producer)][:, None], 3, axis=1))
    np.testing.assert_array_equal(keys[4 * n + 3 * t:], np.asarray(fusion, np.float32))


def test_to_keys_defaults_of_undecided_tasks():
    graph = _graph()
    n = graph.op_mask.shape[0]
    space = act.ActionSpace(tasks=("placement",), num_devices=2)
    device = jnp.ones(n, jnp.int32)
    keys = act.to_keys((device,), graph, space, num_devices=2, fusion=True)
    assert np.all(np.asarray(keys[2 * n:3 * n]) == 0.5)  # SPEC tie rules alone
    assert np.all(np.asarray(keys[-n:]) == 1.0)  # XLA-style greedy fusion
    keys = act.to_keys((device,), graph, space, num_devices=2, fusion=False)
    assert keys.shape == (graph.bucket.chromosome_length(2, False),)


@pytest.mark.parametrize("tasks,fusion,genes", [
    (("placement",), False, "placement"),
    (("placement", "schedule"), False, "placement+schedule"),
    (("placement", "schedule", "fusion"), True, "all")])
def test_search_genes_freeze_nothing_the_policy_decides(tasks, fusion, genes):
    graph = _graph()
    n = graph.op_mask.shape[0]
    space = act.ActionSpace(tasks=tasks, num_devices=3, priority_levels=4)
    assert space.search_genes(fusion) == genes
    rng = np.random.default_rng(2)
    actions = tuple(jnp.asarray(rng.integers(0, k, n), jnp.int32) for k in space.num_actions)
    keys = act.to_keys(actions, graph, space, num_devices=3, fusion=fusion)
    np.testing.assert_array_equal(freeze_genes(keys, graph.bucket, 3, fusion, genes), keys)


def test_search_genes_refuse_what_no_gene_set_matches():
    for tasks, fusion in [(("placement",), True), (("placement", "schedule"), True),
                          (("placement", "fusion"), True), (("schedule",), False),
                          (("placement", "schedule", "fusion"), False)]:
        with pytest.raises(ValueError, match="cannot be limited to these genes"):
            act.ActionSpace(tasks=tasks).search_genes(fusion)


def test_log_probs_entropy_and_sampling_respect_the_mask():
    mask = jnp.array([True, True, False])
    logits = (jnp.log(jnp.array([[0.5, 0.5], [0.9, 0.1], [0.2, 0.8]])),)
    actions = (jnp.array([0, 1, 1], jnp.int32),)
    np.testing.assert_allclose(act.op_log_probs(logits, actions, mask),
                               [np.log(0.5), np.log(0.1), 0.0], rtol=1e-6)
    expected = (np.log(2) + -(0.9 * np.log(0.9) + 0.1 * np.log(0.1))) / 2
    np.testing.assert_allclose(act.entropy(logits, mask), expected, rtol=1e-6)
    assert act.greedy(logits, mask)[0].tolist() == [0, 0, 0]
    draws = jax.vmap(lambda k: act.sample(k, logits, mask)[0])(
        jax.random.split(jax.random.key(0), 2000))
    assert np.all(np.asarray(draws[:, 2]) == 0)
    assert abs(float(jnp.mean(draws[:, 1])) - 0.1) < 0.03


# --- PPO -----------------------------------------------------------------------------------


def test_reward_is_minus_sqrt_ratio_and_ten_below_for_infeasible():
    r = reward(jnp.array([4.0, 1.0, 9.0]), jnp.array([True, True, False]),
               jnp.array([1.0, 4.0, 1.0]), -10.0)
    np.testing.assert_allclose(r, [-2.0, -0.5, -10.0])


@pytest.mark.parametrize("ratio,temperature", [("per_op", 1.0), ("joint", 1.0),
                                               ("per_op", 2.5)])
def test_ppo_loss_matches_a_hand_computed_case(ratio, temperature):
    graph = _graph(6)
    graphs = jax.tree.map(lambda x: x[None], graph)
    n = graph.op_mask.shape[0]
    real = np.asarray(graph.op_mask)
    rng = np.random.default_rng(3)
    table = rng.normal(size=(n, 2)).astype(np.float32)
    net = TableNet((jnp.asarray(table),), jnp.float32(-0.7))
    params, static = eqx.partition(net, eqx.is_array)
    m = 2
    actions = rng.integers(0, 2, (m, n)).astype(np.int32)
    old = rng.normal(-0.7, 0.3, (m, n)).astype(np.float32) * real
    steps = Steps(jnp.zeros(m, jnp.int32), jnp.zeros((m, n, 2)), (jnp.asarray(actions),),
                  jnp.asarray(old), jnp.zeros(m), jnp.array([-1.2, -0.4]))
    advantage = jnp.array([1.5, -0.5])
    config = PPOConfig(ratio=ratio, clip_epsilon=0.2, entropy=0.05, value_coef=0.5,
                       temperature=temperature)
    total, metrics = loss(params, static, graphs, steps, advantage, config)

    tempered = table / temperature  # the distribution the rollouts sampled from
    logp = tempered - np.log(np.exp(tempered).sum(1, keepdims=True))
    new = np.where(real, logp[np.arange(n), actions], 0.0)  # [m, N]
    adv = np.array([1.5, -0.5])[:, None]
    if ratio == "joint":
        rho = np.exp((new - old).sum(1))[:, None]
        weight = np.ones_like(rho)
    else:
        rho = np.exp(new - old)
        weight = np.broadcast_to(real.astype(float), rho.shape)
    surrogate = np.minimum(rho * adv, np.clip(rho, 0.8, 1.2) * adv)
    policy_loss = -np.mean((surrogate * weight).sum(1))
    value_loss = np.mean((-0.7 - np.array([-1.2, -0.4])) ** 2)
    probs = np.exp(logp)
    ent = (-(probs * logp).sum(1) * real).sum() / real.sum()
    np.testing.assert_allclose(float(metrics["policy_loss"]), policy_loss, rtol=1e-5)
    np.testing.assert_allclose(float(metrics["value_loss"]), value_loss, rtol=1e-5)
    np.testing.assert_allclose(float(total), policy_loss + 0.5 * value_loss - 0.05 * ent,
                               rtol=1e-5)


def test_samples_baseline_is_the_mean_of_the_other_samples_of_a_graph_and_round():
    graphs = [random_computation_graph(10, np.random.default_rng(seed)) for seed in (1, 2)]
    padded = batch_graphs(graphs, bucket_for(graphs))
    n = padded.op_mask.shape[1]
    table = np.random.default_rng(4).normal(size=(n, 2)).astype(np.float32)
    net = TableNet((jnp.asarray(table),), jnp.float32(-0.5))
    samples, rounds = 3, 2
    steps, _ = rollouts(net, padded, jnp.array([1.0, 2.0]), jax.random.key(0), None,
                        CostParams(), space=act.ActionSpace(tasks=("placement",)),
                        exec_model=ExecModel(2, "fifo"), samples=samples, rounds=rounds,
                        objective="runtime")
    config = PPOConfig(samples=samples, rounds=rounds, baseline="samples")
    got = np.asarray(baseline(steps, config))
    reward_, graph = np.asarray(steps.reward), np.asarray(steps.graph)
    round_ = np.arange(len(reward_)) // (2 * samples)
    assert len(set(reward_.tolist())) > 2  # the samples differ
    for i in range(len(reward_)):
        same = (graph == graph[i]) & (round_ == round_[i])
        same[i] = False
        assert same.sum() == samples - 1
        np.testing.assert_allclose(got[i], reward_[same].mean(), rtol=1e-6)
    value = np.asarray(baseline(steps, dataclasses.replace(config, baseline="value")))
    np.testing.assert_array_equal(value, np.asarray(steps.value))


def test_rollouts_sample_and_record_the_tempered_distribution():
    graph = _graph(6)
    graphs = jax.tree.map(lambda x: x[None], graph)
    n = graph.op_mask.shape[0]
    table = np.random.default_rng(5).normal(size=(n, 2)).astype(np.float32) * 3
    net = TableNet((jnp.asarray(table),), jnp.float32(0.0))
    settings = dict(space=act.ActionSpace(tasks=("placement",)), exec_model=ExecModel(2),
                    samples=400, rounds=1, objective="runtime")
    real = np.asarray(graph.op_mask)
    for temperature in (1.0, 4.0):
        steps, _ = rollouts(net, graphs, jnp.ones(1), jax.random.key(1), None, CostParams(),
                            temperature=temperature, **settings)
        tempered = table / temperature
        logp = tempered - np.log(np.exp(tempered).sum(1, keepdims=True))
        chosen = np.asarray(steps.actions[0])
        np.testing.assert_allclose(np.asarray(steps.log_prob),
                                   np.where(real, logp[np.arange(n), chosen], 0.0), rtol=1e-5)
        frequency = chosen[:, real].mean(0)  # how often each real op took action 1
        np.testing.assert_allclose(frequency, np.exp(logp[real, 1]), atol=0.08)
    greedy = [rollouts(net, graphs, jnp.ones(1), jax.random.key(1), None, CostParams(),
                       greedy=True, temperature=t, **dict(settings, samples=1))[0].actions[0]
              for t in (1.0, 4.0)]
    np.testing.assert_array_equal(greedy[0], greedy[1])  # argmax does not depend on it


def test_ppo_config_checks():
    with pytest.raises(ValueError, match="ratio"):
        PPOConfig(ratio="both")
    with pytest.raises(ValueError, match="samples"):
        PPOConfig(samples=0)
    with pytest.raises(ValueError, match="objective"):
        PPOConfig(objective="latency")
    with pytest.raises(ValueError, match="baseline"):
        PPOConfig(baseline="critic")
    with pytest.raises(ValueError, match="samples >= 2"):
        PPOConfig(baseline="samples", samples=1)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="temperature"):
            PPOConfig(temperature=bad)
    assert dataclasses.replace(PPOConfig(), rounds=3).rounds == 3


def test_exec_model_and_batch_are_plain_containers():
    batch = Batch(jax.tree.map(lambda x: x[None], _graph()), jnp.ones(1))
    assert batch.reference.shape == (1,)
    assert ExecModel(2).scheduler == "priority"
