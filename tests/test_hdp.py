"""HDP (gsched.policies.hdp): embeddings, the grouper and placer, and the budgeted REINFORCE
search of the ``hdp`` method."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched import make_graph
from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph
from gsched.costmodel.evaluate import evaluate_batch, score
from gsched.costmodel.params import CostParams
from gsched.generators.layered import layered_graph
from gsched.methods import optimize
from gsched.policies.hdp import features, network
from gsched.policies.hdp.method import default_groups, hdp_search, hdp_search_trace
from tests.graphs import diamond

SMALL = dict(hidden=16, groups=6)


def _fan() -> object:
    """o0 → {o1, o2, o3} (one tensor read three times), o1 → o3, o2 → o3 (types A B B C)."""
    return make_graph(compute_cost=[1, 2, 3, 4], temporary_memory=[0, 0, 0, 0],
                      tensor_producer=[0, 1, 2, 3], tensor_size=[8, 2, 2, 1],
                      edge_tensor=[0, 0, 0, 1, 2], edge_consumer=[1, 2, 3, 3, 3],
                      op_types=["A", "B", "B", "C"])


def test_op_embeddings_list_consumers_then_producers_and_ignore_padding():
    graph = _fan()
    own = features.op_embeddings(pad_graph(graph, bucket_for([graph])))
    big = features.op_embeddings(pad_graph(graph, Bucket(32, 16, 16)))
    assert own.shape[1] == features.OP_FEATURES
    np.testing.assert_array_equal(np.asarray(big[:4]), np.asarray(own[:4]))
    assert not np.any(np.asarray(big[4:]))
    start = 1 + features.MAX_OUTPUTS
    adjacency = np.asarray(own[:4, start:]).reshape(4, features.MAX_NEIGHBOURS, 2)
    # topological ranks 0 1 2 3 of 4 real ops: positions 0, 0.25, 0.5, 0.75
    np.testing.assert_allclose(adjacency[0, :4], [[0.25, 1], [0.5, 1], [0.75, 1], [0, 0]])
    np.testing.assert_allclose(adjacency[3, :4], [[0, -1], [0.25, -1], [0.5, -1], [0, 0]])
    np.testing.assert_allclose(adjacency[1, :3], [[0.75, 1], [0, -1], [0, 0]])
    # one output tensor each: size relative to the mean (13 / 4)
    sizes = np.asarray(own[:4, 1:start])
    np.testing.assert_allclose(sizes[:, 0], np.log1p(np.array([8, 2, 2, 1]) / 3.25), rtol=1e-6)
    assert not np.any(sizes[:, 1:])


def test_group_embeddings_count_edges_types_and_sizes():
    graph = _fan()
    padded = pad_graph(graph, Bucket(8, 8, 8))
    ops = features.op_embeddings(padded)
    grouping = jnp.array([0, 1, 1, 2, 0, 0, 0, 0])  # padded ops in group 0 count nowhere
    embedding = np.asarray(features.group_embeddings(padded, grouping, 3, ops))
    assert embedding.shape == (3, features.group_features(3))
    dag = np.array([[0, 2, 1], [0, 0, 2], [0, 0, 0]], np.float32)  # distinct op pairs
    types = np.zeros((3, features.TYPE_BUCKETS), np.float32)
    ids = np.asarray(jax.jit(lambda g: features.op_type_ids(g) % features.TYPE_BUCKETS)(padded))
    for op, g in enumerate([0, 1, 1, 2]):
        types[g, ids[op]] += 1
    sizes = np.zeros((3, features.MAX_OUTPUTS), np.float32)
    for op, g in enumerate([0, 1, 1, 2]):
        sizes[g] += np.asarray(ops[op, 1:1 + features.MAX_OUTPUTS])
    raw = np.concatenate([dag, dag.T, types, sizes], axis=1)
    np.testing.assert_allclose(embedding, raw / (raw.max(axis=1, keepdims=True) + 1), rtol=1e-6)


def test_sampled_log_probabilities_are_the_frequencies_and_their_scores_average_to_zero():
    """Two ops, two groups, two devices (16 outcomes), no exploration noise: exp(log p) of
    each sampled (grouping, placement) is its frequency, and the gradients pulled back
    through the sampling pass satisfy the score identity sum_o p(o) grad log p(o) = 0."""
    two = make_graph(compute_cost=[1, 2], temporary_memory=[0, 0], tensor_producer=[0, 1],
                     tensor_size=[4, 1], edge_tensor=[0], edge_consumer=[1],
                     op_types=["A", "B"])
    graph = pad_graph(two, Bucket(8, 8, 8))
    ops = features.op_embeddings(graph)
    params = network.init_params(jax.random.PRNGKey(3), features.OP_FEATURES,
                                 features.group_features(2), num_groups=2, num_devices=2,
                                 hidden=8)
    # sharper than at initialization, so that sampling from other logits shows
    params = params._replace(w_group=3 * params.w_group, device_softmax=3 * params.device_softmax)
    step = network.NOISE_STEPS + 1

    def draw(p, key):
        k_group, k_place = jax.random.split(key)
        grouping, logp_group = network.group(p, ops, graph.op_mask, k_group, step)
        embedding = features.group_embeddings(graph, grouping, 2, ops)
        devices, logp_place = network.place(p, embedding, k_place, step)
        return logp_group + logp_place, (grouping, devices)

    count = 20000
    logp, (grouping, devices) = jax.jit(jax.vmap(lambda k: draw(params, k)))(
        jax.random.split(jax.random.PRNGKey(0), count))
    assert not np.any(np.asarray(grouping[:, 2:]))  # padded ops: group 0
    outcome = np.asarray(grouping[:, 0] * 8 + grouping[:, 1] * 4 + devices[:, 0] * 2
                         + devices[:, 1])
    seen = np.unique(outcome)
    assert len(seen) == 16
    first = np.array([np.flatnonzero(outcome == o)[0] for o in seen])
    probability = np.exp(np.asarray(logp)[first])
    for o, p in zip(seen, probability):  # one log-probability per outcome
        np.testing.assert_allclose(np.asarray(logp)[outcome == o], np.log(p), rtol=1e-5)
    np.testing.assert_allclose(probability.sum(), 1.0, rtol=1e-5)
    frequency = np.array([np.mean(outcome == o) for o in seen])
    assert np.all(np.abs(frequency - probability)
                  <= 4.5 * np.sqrt(probability * (1 - probability) / count))
    keys = jax.random.split(jax.random.PRNGKey(0), count)
    score = jax.jit(lambda key: jax.vjp(lambda p: draw(p, key), params, has_aux=True)[1](
        jnp.float32(1.0))[0])
    scores = [score(keys[index]) for index in first]
    mean = jax.tree.map(lambda *g: sum(p * x for p, x in zip(probability, g)), *scores)
    for name in ("w_ff", "w_group", "decoder", "go", "device_softmax", "encoder_forward"):
        size = max(float(jnp.abs(getattr(s, name)).max()) for s in scores)
        assert size > 1e-4, name  # each outcome's score moves every part of both networks
        assert float(jnp.abs(getattr(mean, name)).max()) < 1e-5 * size, name
    with pytest.raises(ValueError, match="hidden must be an even int"):
        network.init_params(jax.random.PRNGKey(0), 3, 3, num_groups=2, num_devices=2, hidden=7)


def _layered(count: int, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [layered_graph(int(rng.integers(18, 28)), rng) for _ in range(count)]


@pytest.mark.parametrize("objective", ["runtime", "peak_memory"])
def test_search_counts_the_budget_and_reports_a_placement_it_scored(objective):
    graphs = _layered(2)
    padded = batch_graphs(graphs, bucket_for(graphs))
    params = CostParams()
    result = hdp_search(jax.random.PRNGKey(1), padded, params, num_devices=2, budget=13,
                        objective=objective, samples=4, **SMALL)
    np.testing.assert_array_equal(result.evals_used, [13, 13])
    again = evaluate_batch(padded, result.best_keys[:, None], params, num_devices=2)
    np.testing.assert_allclose(np.asarray(score(again, objective, params))[:, 0],
                               result.best_value, rtol=1e-6)
    n, d = padded.bucket.num_ops, 2
    keys = np.asarray(result.best_keys)
    affinity = keys[:, :n * d].reshape(2, n, d)
    assert np.all(affinity.sum(axis=-1) == 1)  # one device per op
    np.testing.assert_array_equal(keys[:, n * d:], 0.5)  # placement only: priorities 0.5
    # deterministic in its key
    same = hdp_search(jax.random.PRNGKey(1), padded, params, num_devices=2, budget=13,
                      objective=objective, samples=4, **SMALL)
    np.testing.assert_array_equal(same.best_value, result.best_value)


def test_reinforce_lowers_the_mean_sampled_cost_and_frozen_networks_do_not():
    """The learning curve: over 200 iterations of 8 placements, the mean cost of the sampled
    placements falls on every graph (REINFORCE with the sign flipped raises it); with a
    learning rate of 1e-9 it stays where it started (the control)."""
    graphs = _layered(4, seed=3)
    padded = batch_graphs(graphs, bucket_for(graphs))
    common = dict(num_devices=2, objective="runtime", scheduler="fifo", budget=1600, samples=8,
                  hidden=16, groups=8)

    def fifths(learning_rate):
        _, curve = hdp_search_trace(jax.random.PRNGKey(0), padded, CostParams(),
                                    learning_rate=learning_rate, **common)
        curve = np.asarray(curve)
        assert curve.shape == (4, 200) and np.all(np.isfinite(curve))
        return curve[:, :40].mean(axis=1), curve[:, -40:].mean(axis=1)

    first, last = fifths(0.01)
    assert np.all(last < 0.95 * first)
    first, last = fifths(1e-9)
    assert np.all(np.abs(last / first - 1) < 0.03)


def test_method_rows_options_and_errors():
    graphs = [diamond()]
    rows = optimize("hdp", graphs, num_devices=2, budget=6, objective="runtime",
                    options=dict(samples=2, **SMALL)).results
    assert rows[0]["evals_used"] == 6 and rows[0]["hdp_samples"] == 2
    assert rows[0]["hdp_hidden"] == 16 and rows[0]["hdp_learning_rate"] == 0.1
    assert default_groups(2) == 40 and default_groups(16) == 256
    with pytest.raises(ValueError, match="samples must be an int >= 1"):
        optimize("hdp", graphs, num_devices=2, budget=6, options={"samples": 0})
    with pytest.raises(ValueError, match="hidden must be even"):
        optimize("hdp", graphs, num_devices=2, budget=6, options={"hidden": 9})
    with pytest.raises(ValueError, match="learning_rate must be a number > 0"):
        optimize("hdp", graphs, num_devices=2, budget=6, options={"learning_rate": -1.0})
    with pytest.raises(ValueError, match="needs num_devices >= 2"):
        optimize("hdp", graphs, num_devices=1, budget=6, options=SMALL)
