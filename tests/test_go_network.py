"""GDP / GO policy network: features, GraphSAGE sampling, segment recurrence, superposition,
multi-task heads, padding invariance and one compile per bucket."""

import dataclasses
import functools
import math
import zlib

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.graph import make_graph
from gsched.core.padding import Bucket, bucket_for, pad_graph
from gsched.generators import random_computation_graph
from gsched.policies.go import (
    NUM_NODE_FEATURES,
    OP_TYPE_VOCAB,
    TASKS,
    GraphSAGE,
    NetworkConfig,
    PolicyNetwork,
    TransformerXLLayer,
    encode_actions,
    node_features,
    op_type_ids,
    sample_neighbours,
    segment_recurrent,
)
from tests.graphs import diamond

TINY = NetworkConfig(gs_layers=2, gs_knn=3, gs_dim=16, trf_layers=2, d_model=16, n_head=2,
                     d_head=8, d_inner=16, segment=8, type_embed=4)
GO = dataclasses.replace(TINY, gs_layers=1, multitask=True, superposition=True)
GDP = dataclasses.replace(TINY, gs_layers=1, trf_layers=1, multitask=False, superposition=True)
ACTIONS = {"placement": 2, "schedule": 3, "fusion": 4}
TYPES = ("MatMul", "Add", "", "Conv2D", "Relu")

TRACED = []  # (config, tasks, bucket) of each trace of _run


@eqx.filter_jit
def _run(net, graph, previous):
    TRACED.append((net.config, net.tasks, graph.bucket))
    return net(graph, previous)


def _graph(n, seed):
    graph = random_computation_graph(n, np.random.default_rng(seed))
    return dataclasses.replace(graph, op_types=tuple(TYPES[i % 5] for i in range(n)))


def _bigger(bucket):
    return Bucket(*(2 * x for x in bucket))


def _previous(tasks, num_ops, bucket_ops, seed):
    """Random one-hot previous actions on the real ops, zero rows on padding."""
    rng = np.random.default_rng(seed)
    k = tuple(ACTIONS[t] for t in tasks)
    actions = tuple(np.pad(rng.integers(0, a, num_ops), (0, bucket_ops - num_ops)) for a in k)
    return encode_actions(actions, k, np.arange(bucket_ops) < num_ops)


def _init(make, seed=0):
    """``make(key)``'s module with every parameter drawn by NumPy, N(0, 1/last dim): the
    tests then compile no PRNG kernel per parameter shape (seconds each on a shared CPU)."""
    rng = np.random.default_rng(seed)
    return jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=s.shape) / np.sqrt(s.shape[-1]), s.dtype),
        eqx.filter_eval_shape(make, jax.random.key(0)))


@functools.cache
def _network(config, tasks):
    return _init(lambda key: PolicyNetwork(
        config, tasks=tasks, num_actions=tuple(ACTIONS[t] for t in tasks), key=key))


def _layer(seed=0):
    return _init(lambda key: TransformerXLLayer(8, 2, 4, 12, key=key), seed)


# --- Features ------------------------------------------------------------------------------


def test_node_features_by_hand_and_type_ids():
    g = dataclasses.replace(diamond(), op_types=("MatMul", "", "Add", "MatMul"))
    padded = pad_graph(g, Bucket(8, 8, 8))
    f = np.asarray(jax.jit(node_features)(padded))
    assert f.shape == (8, NUM_NODE_FEATURES) and not f[4:].any()
    np.testing.assert_allclose(f[:4, 0], np.log1p(np.array([2, 3, 4, 1]) / 2.5), rtol=1e-6)
    np.testing.assert_allclose(f[:4, 1], np.log1p(np.array([4, 2, 3, 1]) / 2.5), rtol=1e-6)
    np.testing.assert_allclose(f[:4, 2], np.log1p(np.array([0, 0, 5, 0]) / 1.25), rtol=1e-6)
    np.testing.assert_allclose(f[:4, 3], np.log1p([0, 1, 1, 2]), rtol=1e-6)  # in-degree
    np.testing.assert_allclose(f[:4, 4], np.log1p([2, 1, 1, 0]), rtol=1e-6)  # out-degree
    np.testing.assert_array_equal(f[:4, 5], 0)  # no program inputs
    np.testing.assert_array_equal(f[:4, 6], [0, 0, 0, 1])  # d's output is read by nobody
    np.testing.assert_allclose(f[:4, 7], [0, 0.5, 0.5, 1])
    matmul, add = (zlib.crc32(t) & 0x7FFFFFFF for t in (b"MatMul", b"Add"))
    np.testing.assert_array_equal(padded.op_type_hash, [matmul, 0, add, matmul, 0, 0, 0, 0])
    ids = np.asarray(jax.jit(op_type_ids)(padded))
    assert ids[0] == ids[3] == 1 + matmul % (OP_TYPE_VOCAB - 1) and ids[2] not in (0, ids[0])
    np.testing.assert_array_equal(ids[[1, 4, 5, 6, 7]], 0)


def test_node_features_are_scale_free():
    g = _graph(20, 3)
    scaled = dataclasses.replace(g, compute_cost=g.compute_cost * 1e6,
                                 tensor_size=g.tensor_size * 1e-3,
                                 temporary_memory=g.temporary_memory * 1e4)
    features = jax.jit(node_features)
    np.testing.assert_allclose(features(pad_graph(g)), features(pad_graph(scaled)), rtol=1e-5,
                               atol=1e-6)


# --- GraphSAGE -----------------------------------------------------------------------------


def _star():
    """Producers 0–6 → centre 7 → consumers 8–14 (one tensor each way)."""
    producer_cost = [7, 1, 9, 3, 5, 2, 5]  # top 3: 2, 0, then 4 (ties 6 on cost)
    consumer_cost = [1, 4, 4, 4, 0, 6, 2]  # top 3: 13, then 9, 10 (ties 11)
    return make_graph(compute_cost=producer_cost + [1] + consumer_cost,
                      temporary_memory=[0] * 15, tensor_producer=list(range(8)),
                      tensor_size=[1] * 8, edge_tensor=list(range(7)) + [7] * 7,
                      edge_consumer=[7] * 7 + list(range(8, 15)))


def test_neighbour_sample_keeps_the_most_expensive_per_direction():
    padded = pad_graph(_star(), Bucket(16, 16, 32))
    nb = sample_neighbours(padded, 3)
    sender, receiver, mask = (np.asarray(a) for a in nb)
    e = padded.pair_mask.shape[0]
    into_centre = set(sender[:e][mask[:e] & (receiver[:e] == 7)])
    from_consumers = set(sender[e:][mask[e:] & (receiver[e:] == 7)])
    assert into_centre == {2, 0, 4} and from_consumers == {13, 9, 10}
    for leaf in [*range(7), *range(8, 15)]:  # each leaf keeps its only neighbour
        assert set(sender[mask & (receiver == leaf)]) == {7}
    assert mask.sum() == 6 + 14 and not mask[:e][~padded.pair_mask].any()


def test_graphsage_ignores_unsampled_neighbours_and_padding():
    star = _star()
    # The small bucket has no padded pairs, the big one 50 (all pointing at op 0).
    small, big = pad_graph(star, Bucket(16, 16, 14)), pad_graph(star, Bucket(32, 32, 64))
    sage = _init(lambda key: GraphSAGE(3, gs_layers=1, gs_dim=8, gs_knn=3, key=key))
    run = eqx.filter_jit(lambda s, g, h: s(g, h))
    rng = np.random.default_rng(0)
    h0 = np.zeros((16, 3), np.float32)
    h0[:15] = rng.normal(size=(15, 3))
    out = np.asarray(run(sage, small, h0))
    moved = h0.copy()
    moved[6] += 5.0  # op 6 lost the tie: the centre does not hear it
    np.testing.assert_array_equal(np.asarray(run(sage, small, moved))[7], out[7])
    moved[4] += 5.0  # op 4 won it
    assert np.abs(np.asarray(run(sage, small, moved))[7] - out[7]).max() > 1e-4
    garbage = np.concatenate([h0, 100 * rng.normal(size=(16, 3)).astype(np.float32)])
    garbage[15] = 100.0  # padded op 15 of the small bucket too
    big_out = np.asarray(run(sage, big, garbage))
    np.testing.assert_allclose(big_out[:15], out[:15], atol=1e-6)
    assert not big_out[15:].any() and not out[15:].any()


def test_graphsage_without_neighbours_aggregates_zeros():
    lone = make_graph(compute_cost=[1, 2], temporary_memory=[0, 0], tensor_producer=[0, 1],
                      tensor_size=[1, 1], edge_tensor=[], edge_consumer=[])
    sage = _init(lambda key: GraphSAGE(2, gs_layers=1, gs_dim=4, gs_knn=2, key=key))
    h0 = np.pad(np.eye(2, dtype=np.float32), ((0, 6), (0, 0)))
    w, b = np.asarray(sage.updates[0].weight), np.asarray(sage.updates[0].bias)
    expected = np.maximum(np.concatenate([h0[:2], np.zeros((2, 4))], -1) @ w.T + b, 0)
    out = eqx.filter_jit(lambda s, g, h: s(g, h))(sage, pad_graph(lone, Bucket(8, 8, 8)), h0)
    np.testing.assert_allclose(np.asarray(out)[:2], expected, rtol=1e-5, atol=1e-6)


# --- Segment-level recurrent attention -----------------------------------------------------


def _plain_layer(layer, x, mask, gains):
    """A post-LN layer written out in NumPy: full bidirectional masked attention, no memory."""
    g = gains if gains is not None else (1.0,) * 4
    att = layer.attention
    h, d = att.n_head, att.d_head

    def lin(linear, v):
        return v @ np.asarray(linear.weight).T + np.asarray(linear.bias)

    def norm(ln, v):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + ln.eps) * np.asarray(ln.weight) + np.asarray(ln.bias)

    q = lin(att.query, x * g[0]).reshape(-1, h, d)
    k, v = np.split(lin(att.key_value, x * g[0]), 2, axis=-1)
    logits = np.einsum("ihd,jhd->hij", q, k.reshape(-1, h, d)) / math.sqrt(d)
    logits = np.where(mask, logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    heads = np.einsum("hij,jhd->ihd", weights, v.reshape(-1, h, d)).reshape(x.shape[0], -1)
    a = norm(att.norm, x + lin(att.project, heads * g[1]))
    return norm(layer.norm, a + lin(layer.ffn_out, np.maximum(lin(layer.ffn_in, a * g[2]), 0)
                                   * g[3]))


def test_one_segment_is_plain_attention():
    layer = _layer()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 8)).astype(np.float32)
    mask = np.arange(16) < 11
    run = eqx.filter_jit(segment_recurrent)
    for gains in (None, tuple(1 + 0.3 * rng.normal(size=(16, s)).astype(np.float32)
                              for s in layer.gain_sizes)):
        out = run((layer,), x, mask, 32, None if gains is None else (gains,))
        np.testing.assert_allclose(np.asarray(out)[:11], _plain_layer(layer, x, mask, gains)[:11],
                                   atol=1e-5)


def test_memory_is_stopped_gradient_but_used_forward():
    layer = _layer(2)
    x, weights = np.random.default_rng(3).normal(size=(2, 16, 8)).astype(np.float32)
    mask = np.ones(16, bool)

    @jax.jit
    @jax.value_and_grad
    def second(first_half):  # a fixed random projection (post-LN rows all sum to 0)
        out = segment_recurrent((layer,), jnp.concatenate([first_half, x[8:]]), mask, 8)
        return jnp.sum(out[8:] * weights[8:])

    value, grad = second(x[:8])
    assert not np.asarray(grad).any()
    assert abs(float(value) - float(second(x[:8] + 1.0)[0])) > 1e-3


def test_segment_recurrent_is_padding_invariant_below_one_segment():
    layers = (_layer(4), _layer(5))
    x = np.random.default_rng(5).normal(size=(32, 8)).astype(np.float32)
    run = eqx.filter_jit(segment_recurrent)
    small = run(layers, x[:16], np.arange(16) < 12, 64)
    big = run(layers, x, np.arange(32) < 12, 64)
    np.testing.assert_allclose(np.asarray(small)[:12], np.asarray(big)[:12], atol=1e-5)
    with pytest.raises(ValueError, match="segments"):
        segment_recurrent(layers, x[:24], np.ones(24, bool), 16)


# --- The policy network --------------------------------------------------------------------


@pytest.mark.parametrize("tasks, devices, multitask", [
    (("placement",), 1, False), (("placement",), 4, True), (("placement", "schedule"), 2, True),
    (("schedule", "fusion"), 2, False), (TASKS, 1, True), (TASKS, 4, False)])
def test_output_shapes(tasks, devices, multitask):
    k = tuple({**ACTIONS, "placement": devices}[t] for t in tasks)
    config = dataclasses.replace(TINY, multitask=multitask)

    def run(key, graph, previous):
        return PolicyNetwork(config, tasks=tasks, num_actions=k, key=key)(graph, previous)

    logits, value = eqx.filter_eval_shape(run, jax.random.key(0), pad_graph(_graph(10, 0)),
                                          np.zeros((16, sum(k)), np.float32))
    assert [l.shape for l in logits] == [(16, a) for a in k]
    assert all(l.dtype == jnp.float32 for l in logits)
    assert value.shape == () and value.dtype == jnp.float32


@pytest.mark.parametrize("config, tasks", [(GDP, ("placement",)), (GO, TASKS)],
                         ids=["gdp", "go"])
def test_padding_invariance_and_one_compile_per_bucket(config, tasks):
    net = _network(config, tasks)
    g, other = _graph(27, 1), _graph(30, 2)
    small = bucket_for(g)
    big = _bigger(small)
    assert small.num_ops // config.segment >= 4  # several segments
    a = sum(ACTIONS[t] for t in tasks)
    previous = np.array(_previous(tasks, 27, big.num_ops, 7))
    logits, value = _run(net, pad_graph(g, small), previous[:small.num_ops])
    # Garbage on the padded rows of the big bucket: padded nodes then differ between the two
    # buckets, so a padded node used as a key, memory or in the value would show.
    previous[27:] = np.random.default_rng(8).normal(size=(big.num_ops - 27, a))
    big_logits, big_value = _run(net, pad_graph(g, big), previous)
    _run(net, pad_graph(other, small), np.zeros((small.num_ops, a), np.float32))
    for l, b in zip(logits, big_logits):
        l, b = np.asarray(l), np.asarray(b)
        assert np.isfinite(l).all()
        np.testing.assert_allclose(l[:27], b[:27], atol=1e-5)
        assert not l[27:].any() and not b[27:].any()
    np.testing.assert_allclose(value, big_value, atol=1e-5)
    traces = [t for t in TRACED if t[:2] == (config, tasks)]
    assert sorted(t[2] for t in traces) == sorted({small, big})  # each bucket traced once


def test_previous_round_changes_the_logits():
    net = _network(GO, TASKS)
    graph = pad_graph(_graph(27, 1))
    zero, _ = _run(net, graph, np.zeros((32, 9), np.float32))
    prev, _ = _run(net, graph, _previous(TASKS, 27, 32, 8))
    for z, p in zip(zero, prev):
        assert np.abs(np.asarray(z)[:27] - np.asarray(p)[:27]).max() > 1e-4


def test_superposition_on_and_off_and_gains_depend_on_the_graph():
    off = _network(dataclasses.replace(GDP, superposition=False), ("placement",))
    graph = pad_graph(_graph(27, 1))
    logits, value = _run(off, graph, np.zeros((32, 2), np.float32))
    assert np.isfinite(np.asarray(logits[0])).all() and np.isfinite(value)
    assert off.gains(graph) is None
    net = _network(GDP, ("placement",))  # on: run by the padding-invariance test
    gains = eqx.filter_jit(lambda n, g: n.gains(g))
    bucket = bucket_for([_graph(27, 1), _graph(30, 2)])
    first = gains(net, pad_graph(_graph(27, 1), bucket))
    second = gains(net, pad_graph(_graph(30, 2), bucket))
    assert [[g.shape[1] for g in group] for group in first] == [list(s) for s in
                                                                net.gain_groups]
    # per-graph mean gain of the first modulated input (rows are in topological order)
    mean_first = np.asarray(first[0][0])[:27].mean(0)
    mean_second = np.asarray(second[0][0])[:30].mean(0)
    assert np.abs(mean_first - mean_second).max() > 1e-3


def test_encode_actions_layout():
    placement = np.array([1, 0, 1, 0])
    schedule = np.array([2, 0, 1, 2])
    out = np.asarray(encode_actions((placement, schedule), (2, 3),
                                    np.array([True, True, True, False])))
    np.testing.assert_array_equal(out, [[0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 1, 0, 1, 0],
                                        [0, 0, 0, 0, 0]])
    assert out.dtype == np.float32


@pytest.mark.parametrize("change, message", [
    ({"gs_layers": 0}, "gs_layers"), ({"gs_knn": 1.5}, "gs_knn"), ({"n_head": True}, "n_head"),
    ({"segment": 48}, "power of two"), ({"type_embed": -1}, "type_embed"),
    ({"superposition": 1}, "superposition"), ({"d_inner": 0}, "d_inner")])
def test_config_validation(change, message):
    with pytest.raises(ValueError, match=message):
        NetworkConfig(**change)


@pytest.mark.parametrize("tasks, num_actions", [
    ((), ()), (("schedule", "placement"), (3, 2)), (("placement", "placement"), (2, 2)),
    (("routing",), (2,)), (("placement",), (0,)), (("placement", "fusion"), (2,))])
def test_task_validation(tasks, num_actions):
    with pytest.raises(ValueError, match="tasks|num_actions"):
        PolicyNetwork(TINY, tasks=tasks, num_actions=num_actions, key=jax.random.key(0))
