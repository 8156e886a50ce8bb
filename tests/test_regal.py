"""REGAL building blocks: action (de)quantization, BRKGA parameter layout, node/edge features
on a hand-checked graph, and padding invariance of the encoders, policy and baseline."""

import itertools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.graph import make_graph
from gsched.core.padding import Bucket, bucket_for, pad_graph
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from gsched.policies.regal.actions import (
    ActionSpace,
    dequantize_beta,
    dequantize_elite_bias,
    quantize_beta,
    quantize_elite_bias,
    to_brkga_params,
)
from gsched.policies.regal.features import (
    Features,
    compute_features,
    num_node_features,
    pinned_ops,
)
from gsched.policies.regal.gnn import topological_rank
from gsched.policies.regal.policy import Baseline, Policy, PolicyConfig, log_prob
from gsched.search.brkga import BRKGAParams

D = 2


# --- Actions (A.2) ---------------------------------------------------------------------------


def test_dequantize_beta_by_hand():
    # k = 2, m = 0, v = 0: μ = 1/3, σ² = μ(1 − μ)/3 = 2/27 → α + β = 2, α = 2/3, β = 4/3.
    alpha, beta = dequantize_beta(0, 0, 2)
    np.testing.assert_allclose([alpha, beta], [2 / 3, 4 / 3], rtol=1e-6)
    np.testing.assert_allclose(dequantize_elite_bias(jnp.arange(4), 4), [.5, .625, .75, .875])


@pytest.mark.parametrize("levels", [2, 3, 7])
def test_beta_levels_round_trip_and_moments(levels):
    m, v = (jnp.asarray(x) for x in zip(*itertools.product(range(levels), repeat=2)))
    alpha, beta = dequantize_beta(m, v, levels)
    assert bool(jnp.all((alpha > 0) & (beta > 0)))
    mu = (m + 1) / (levels + 1)
    np.testing.assert_allclose(alpha / (alpha + beta), mu, rtol=1e-5)
    variance = alpha * beta / ((alpha + beta) ** 2 * (alpha + beta + 1))
    np.testing.assert_allclose(variance, mu * (1 - mu) * (v + 1) / (levels + 1), rtol=1e-5)
    m2, v2 = quantize_beta(alpha, beta, levels)
    np.testing.assert_array_equal(m2, m)
    np.testing.assert_array_equal(v2, v)
    c = jnp.arange(levels)
    np.testing.assert_array_equal(quantize_elite_bias(dequantize_elite_bias(c, levels), levels), c)


def test_action_space_validation():
    with pytest.raises(ValueError, match="levels"):
        ActionSpace(2, levels=1)
    with pytest.raises(ValueError, match="learned"):
        ActionSpace(2, learned=("placement", "fusion"))
    with pytest.raises(ValueError, match="learned"):
        ActionSpace(2, learned=())
    space = ActionSpace(3, learned=("elite_bias", "placement"))
    assert space.learned == ("placement", "elite_bias") and space.num_vars == 7


def test_brkga_params_layout():
    """Actions land on their genes; padded ops, transfers and unlearned groups stay uniform."""
    n, t, k = 5, 4, 3
    op_mask = jnp.array([True, True, True, False, False])
    space = ActionSpace(D, k, ("placement",))
    actions = jnp.asarray(np.random.default_rng(0).integers(0, k, (n, space.num_vars)))
    params = to_brkga_params(actions, op_mask, t, space)
    assert all(x.shape == (n * D + n + t * D,) for x in params)
    alpha, beta = dequantize_beta(actions[:, 0::2], actions[:, 1::2], k)  # [N, D]
    aff = slice(0, n * D)
    np.testing.assert_allclose(params.alpha[aff].reshape(n, D)[:3], alpha[:3])
    np.testing.assert_allclose(params.beta[aff].reshape(n, D)[:3], beta[:3])
    uniform = np.ones(n * D + n + t * D, bool)
    uniform[:3 * D] = False
    np.testing.assert_array_equal(np.asarray(params.alpha)[uniform], 1.0)
    np.testing.assert_array_equal(np.asarray(params.beta)[uniform], 1.0)
    np.testing.assert_array_equal(params.elite_bias, np.float32(0.7))

    full = ActionSpace(D, k, ("placement", "scheduling", "elite_bias"))
    actions = jnp.full((n, full.num_vars), k - 1)
    params = to_brkga_params(actions, op_mask, t, full)
    rho = dequantize_elite_bias(k - 1, k)
    np.testing.assert_allclose(params.elite_bias[: 3 * D], rho)  # the node's affinities
    np.testing.assert_allclose(params.elite_bias[n * D: n * D + 3], rho)  # its priority
    np.testing.assert_allclose(params.elite_bias[n * D + 3:], 0.7)  # padding, transfers
    a, b = dequantize_beta(k - 1, k - 1, k)
    np.testing.assert_allclose(params.alpha[n * D: n * D + 3], a)
    np.testing.assert_allclose(params.beta[n * D: n * D + 3], b)


# --- Features (A.1) --------------------------------------------------------------------------


def diamond():
    """SPEC §5's diamond plus a control dependency a → d: reads a 0, b 4, c 4, d 5; outputs
    a 4, b 2, c 3, d 1; c has 5 B of temporary memory. Largest memory number: 5."""
    return make_graph(compute_cost=[2, 3, 4, 1], temporary_memory=[0, 0, 5, 0],
                      tensor_producer=[0, 1, 2, 3, 0], tensor_size=[4, 2, 3, 1, 0],
                      tensor_is_control=[False, False, False, False, True],
                      edge_tensor=[0, 0, 1, 2, 4], edge_consumer=[1, 2, 3, 3, 3])


@pytest.fixture(scope="module")
def diamond_features():
    graph = diamond()
    padded = jax.tree.map(lambda x: x[None], pad_graph(graph, Bucket(8, 8, 8)))
    features, search = jax.jit(lambda k, g: compute_features(
        k, g, CostParams(), num_devices=D, objective="peak_memory", search_evals=100))(
        jax.random.key(0), padded)
    return padded, features, search


def test_memory_features_by_hand(diamond_features):
    _, features, _ = diamond_features
    nodes = np.asarray(features.nodes[0])
    assert nodes.shape == (8, num_node_features(D))
    np.testing.assert_allclose(nodes[:4, :3], np.array(
        [[0, 4, 0], [4, 2, 0], [4, 3, 5], [5, 1, 0]]) / 5, rtol=1e-6)
    np.testing.assert_array_equal(nodes[:4, -1], [0, 0, 1, 0])  # c: 4 + 3 + 5 is the largest
    np.testing.assert_array_equal(features.pinned[0], [-1, -1, 0, -1, -1, -1, -1, -1])
    np.testing.assert_array_equal(nodes[4:], 0.0)  # padding
    edges = np.asarray(features.edges[0])
    np.testing.assert_allclose(edges[:5], [[.8, 0], [.8, 0], [.4, 0], [.6, 0], [0, 1]])
    np.testing.assert_array_equal(edges[5:], 0.0)


def test_search_features(diamond_features):
    padded, features, search = diamond_features
    nodes = np.asarray(features.nodes[0])
    device, position = nodes[:4, 3:3 + D], nodes[:4, 3 + D]
    np.testing.assert_allclose(device.sum(1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(device[2], [1.0, 0.0])  # the pinned op is always on device 0
    # a runs first and d last in every schedule (d also waits for a transfer or not).
    assert position[0] == 0.0 and position[3] == 1.0
    assert 0.0 < position[1] < 1.0 and 0.0 < position[2] < 1.0
    assert int(search.evals_used[0]) == 100
    assert np.all(np.asarray(search.best_evaluation.placement[0, 2]) == 0)


def test_pinned_ops_ignores_padding():
    graph = diamond()
    small = pinned_ops(jax.tree.map(lambda x: x[None], pad_graph(graph)))
    big = pinned_ops(jax.tree.map(lambda x: x[None], pad_graph(graph, Bucket(32, 32, 32))))
    np.testing.assert_array_equal(small[0, :4], big[0, :4])
    assert int((big == 0).sum()) == 1


# --- Encoders, policy, baseline --------------------------------------------------------------


def _inputs(graph, bucket, seed=0):
    """The graph padded to ``bucket`` with random features on real nodes and edges."""
    rng = np.random.default_rng(seed)
    padded = pad_graph(graph, bucket)
    nodes = np.zeros((bucket.num_ops, num_node_features(D)), np.float32)
    nodes[: graph.num_ops] = rng.random((graph.num_ops, nodes.shape[1]))
    edges = np.zeros((bucket.num_edges, 2), np.float32)
    edges[: graph.num_edges] = rng.random((graph.num_edges, 2))
    return padded, Features(jnp.asarray(nodes), jnp.asarray(edges),
                            jnp.full(bucket.num_ops, -1, jnp.int32))


@pytest.mark.parametrize("encoder, aggregation", [("gnn", "sum"), ("gnn", "mean"),
                                                  ("lstm", "mean")])
def test_padding_invariance(encoder, aggregation):
    graph = random_computation_graph(12, 3)
    config = PolicyConfig(num_devices=D, encoder=encoder, hidden=8, steps=3,
                          aggregation=aggregation, levels=3,
                          learned=("placement", "scheduling", "elite_bias"))
    policy = Policy(config, jax.random.key(1))
    baseline = Baseline(config, jax.random.key(2))

    @jax.jit
    def outputs(padded, features):
        logits = policy(padded, features)
        actions = jnp.zeros(logits.shape[:2], jnp.int32)
        return logits, baseline(padded, features), log_prob(logits, actions, padded.op_mask)

    small = bucket_for(graph)
    big = Bucket(2 * small.num_ops, 2 * small.num_tensors, 4 * small.num_edges)
    out = {}
    for name, bucket in (("small", small), ("big", big)):
        padded, features = _inputs(graph, bucket)
        logits, value, logp = outputs(padded, features)
        assert logits.shape == (bucket.num_ops, config.space.num_vars, 3)
        out[name] = (logits[: graph.num_ops], value, logp)
    for a, b in zip(out["small"], out["big"]):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def test_structure_matters_to_the_gnn():
    """Same node features, one edge removed: the GNN's outputs change, with 0 steps they
    don't (a check that messages flow, and only along edges)."""
    graph = random_computation_graph(12, 3)
    bucket = bucket_for(graph)
    padded, features = _inputs(graph, bucket)
    edge_mask = padded.edge_mask.copy()
    edge_mask[0] = False
    cut = padded._replace(edge_mask=edge_mask)
    for steps, changes in ((2, True), (0, False)):
        policy = eqx.filter_jit(Policy(PolicyConfig(hidden=8, steps=steps), jax.random.key(0)))
        diff = jnp.abs(policy(padded, features) - policy(cut, features)).max()
        assert bool(diff > 1e-6) == changes


def test_log_prob_ignores_padded_nodes():
    logits = jax.random.normal(jax.random.key(0), (6, 4, 2))
    mask = jnp.array([True] * 4 + [False] * 2)
    a = jnp.zeros((6, 4), jnp.int32)
    b = a.at[4:].set(1)
    assert float(log_prob(logits, a, mask)) == float(log_prob(logits, b, mask))
    assert float(log_prob(logits, a, mask)) != float(log_prob(logits, a.at[0, 0].set(1), mask))


def test_topological_rank():
    graph = random_computation_graph(30, 5)
    padded = pad_graph(graph, Bucket(64, 64, 128))
    rank = np.asarray(jax.jit(topological_rank)(padded))
    assert sorted(rank.tolist()) == list(range(64))
    sender = graph.tensor_producer[graph.edge_tensor]
    assert np.all(rank[sender] < rank[graph.edge_consumer])
    assert np.all(rank[graph.num_ops:] >= graph.num_ops)  # padding after every real op


def test_policy_config_validation():
    with pytest.raises(ValueError, match="encoder"):
        PolicyConfig(encoder="transformer")
    with pytest.raises(ValueError, match="aggregation"):
        Policy(PolicyConfig(aggregation="max"), jax.random.key(0))
    assert isinstance(to_brkga_params(jnp.zeros((2, 6), jnp.int32), jnp.ones(2, bool), 1,
                                      ActionSpace(2)), BRKGAParams)
