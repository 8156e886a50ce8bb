"""Topoformer decoding: valid orders, exact peak memory, padding invariance, beam search with
state collapsing against brute force, and the order log-probability of eq. 8."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched import batch_graphs, bucket_for, layered_graph, random_computation_graph
from gsched.core.padding import Bucket
from gsched.costmodel.evaluate import evaluate_batch, order_keys
from gsched.policies.topoformer import decode as D
from tests import reference_spec as ref

GRAPHS = ([random_computation_graph(n, seed) for seed, n in enumerate((5, 12, 25))]
          + [layered_graph(30, 1)])
BUCKET = bucket_for(GRAPHS)
WIDTH = 4


def _priorities(graphs, bucket, seed=0, scale=5.0):
    """Random priorities per real op (padding gets its own draws, which must not matter)."""
    rng = np.random.default_rng(seed)
    out = rng.normal(0, scale, (len(graphs), bucket.num_ops)).astype(np.float32)
    for b, g in enumerate(graphs):
        out[b, g.num_ops:] = rng.normal(0, 100, bucket.num_ops - g.num_ops)
    return jnp.asarray(out)


@functools.partial(jax.jit, static_argnames=("mode", "width", "collapse"))
def _decode_and_score(graphs, priorities, key, mode, width, collapse=True):
    decoded = D.decode_batch(graphs, priorities, key, mode=mode, width=width, collapse=collapse)
    keys = jax.vmap(jax.vmap(lambda g, o: order_keys(g, o, jnp.zeros_like(o), 1),
                             in_axes=(None, 0)))(graphs, decoded.order)
    return decoded, evaluate_batch(graphs, keys, num_devices=1).peak_memory


def _topological_orders(g):
    preds = [set() for _ in range(g.num_ops)]
    for t, c in zip(g.edge_tensor, g.edge_consumer):
        preds[c].add(int(g.tensor_producer[t]))

    def extend(prefix, done):
        if len(prefix) == g.num_ops:
            yield list(prefix)
        for j in range(g.num_ops):
            if j not in done and preds[j] <= done:
                yield from extend(prefix + [j], done | {j})

    return list(extend([], frozenset()))


def _reference_peak(g, order):
    """Exact SPEC §3 peak (tests/reference_spec.py); raises if ``order`` is not topological."""
    return ref.evaluate_order(g, [0] * g.num_ops, [("op", int(j)) for j in order], 1)[
        "peak_memory"]


# The cost model is compared on one rollout mode and one beam mode (its compilation is slow);
# every mode is compared with the exact reference.
@pytest.mark.parametrize("mode,collapse,cost_model", [
    ("greedy", True, False), ("sample", True, True), ("beam", True, True),
    ("beam", False, False)])
def test_orders_are_topological_with_the_cost_models_peak(mode, collapse, cost_model):
    graphs = batch_graphs(GRAPHS, BUCKET)
    args = (graphs, _priorities(GRAPHS, BUCKET), jax.random.key(0))
    if cost_model:
        decoded, cost_model_peak = _decode_and_score(*args, mode, WIDTH, collapse)
    else:
        decoded = D.decode_batch(*args, mode=mode, width=WIDTH, collapse=collapse)
        cost_model_peak = decoded.peak_memory
    k = 1 if mode == "greedy" else WIDTH
    assert decoded.order.shape == (len(GRAPHS), k, BUCKET.num_ops)
    for b, g in enumerate(GRAPHS):
        n = g.num_ops
        for r in np.flatnonzero(np.asarray(decoded.valid[b])):
            order = np.asarray(decoded.order[b, r])
            np.testing.assert_array_equal(order[n:], np.arange(n, BUCKET.num_ops))
            # Exactly the cost model's number (same fixed point), and SPEC's exact value.
            assert float(decoded.peak_memory[b, r]) == float(cost_model_peak[b, r])
            np.testing.assert_allclose(float(decoded.peak_memory[b, r]),
                                       _reference_peak(g, order[:n]), rtol=1e-6)
    assert bool(decoded.valid[:, 0].all())
    if mode == "beam" and collapse:  # all complete orders share one set: one survives
        assert not bool(decoded.valid[:, 1:].any())


def test_padding_does_not_change_greedy_or_beam_orders():
    bigger = Bucket(*(2 * x for x in BUCKET))
    small_p = _priorities(GRAPHS, BUCKET)
    big_p = jnp.pad(small_p, ((0, 0), (0, bigger.num_ops - BUCKET.num_ops)), constant_values=9.0)
    for mode in ("greedy", "beam"):
        small = D.decode_batch(batch_graphs(GRAPHS, BUCKET), small_p, jax.random.key(0),
                               mode=mode, width=WIDTH)
        big = D.decode_batch(batch_graphs(GRAPHS, bigger), big_p, jax.random.key(0),
                             mode=mode, width=WIDTH)
        for b, g in enumerate(GRAPHS):
            np.testing.assert_array_equal(big.order[b, 0, :g.num_ops],
                                          small.order[b, 0, :g.num_ops])
        np.testing.assert_array_equal(big.peak_memory[:, 0], small.peak_memory[:, 0])
        np.testing.assert_allclose(big.log_prob[:, 0], small.log_prob[:, 0], rtol=1e-5)


def test_beam_of_width_one_is_greedy():
    graphs = batch_graphs(GRAPHS, BUCKET)
    priorities = _priorities(GRAPHS, BUCKET, seed=3)
    greedy = D.decode_batch(graphs, priorities, jax.random.key(0), mode="greedy", width=WIDTH)
    beam = D.decode_batch(graphs, priorities, jax.random.key(0), mode="beam", width=1)
    np.testing.assert_array_equal(beam.order, greedy.order)
    np.testing.assert_array_equal(beam.peak_memory, greedy.peak_memory)
    np.testing.assert_allclose(beam.log_prob, greedy.log_prob, rtol=1e-5)


def test_collapsed_beam_search_is_exact_on_tiny_graphs():
    tiny = ([random_computation_graph(7, seed) for seed in range(4)]
            + [layered_graph(7, seed) for seed in range(2)])
    bucket = bucket_for(tiny)
    # 7 ops have at most C(7, 3) = 35 scheduled sets per step: width 40 keeps them all, so
    # collapsed beam search is exact dynamic programming whatever the priorities.
    decoded = D.decode_batch(batch_graphs(tiny, bucket), _priorities(tiny, bucket, seed=5),
                             jax.random.key(0), mode="beam", width=40)
    best = np.asarray(D.best_index(decoded))
    for b, g in enumerate(tiny):
        optimum = min(_reference_peak(g, o) for o in _topological_orders(g))
        np.testing.assert_allclose(float(decoded.peak_memory[b, best[b]]), optimum, rtol=1e-6)
        assert _reference_peak(g, np.asarray(decoded.order[b, best[b], :g.num_ops])) == \
            pytest.approx(optimum, rel=1e-6)


def test_order_log_prob_is_a_distribution_and_matches_decoding():
    g = random_computation_graph(6, 2)
    bucket = bucket_for(g)
    graphs = batch_graphs([g], bucket)
    one = jax.tree.map(lambda x: x[0], graphs)
    priorities = _priorities([g], bucket, seed=1)[0]
    orders = _topological_orders(g)
    assert len(orders) > 2
    padded = jnp.asarray([o + list(range(g.num_ops, bucket.num_ops)) for o in orders])
    log_prob = jax.jit(jax.vmap(D.order_log_prob, in_axes=(None, None, 0)))
    np.testing.assert_allclose(float(jnp.sum(jnp.exp(log_prob(one, priorities, padded)))), 1.0,
                               rtol=1e-5)
    sampled = D.decode_batch(graphs, priorities[None], jax.random.key(4), mode="sample",
                             width=len(orders))
    np.testing.assert_allclose(sampled.log_prob[0], log_prob(one, priorities, sampled.order[0]),
                               rtol=1e-5)
    # Large priorities (far beyond exp's float32 range) still give finite gradients.
    grads = jax.grad(lambda p: D.order_log_prob(one, p, padded[0]))(priorities * 100)
    assert np.isfinite(np.asarray(grads)).all()


def test_bad_settings():
    g = batch_graphs([GRAPHS[0]], BUCKET)
    with pytest.raises(ValueError, match="decoding mode"):
        D.decode_batch(g, jnp.zeros((1, BUCKET.num_ops)), jax.random.key(0), mode="topk")
    with pytest.raises(ValueError, match="width"):
        D.decode_batch(g, jnp.zeros((1, BUCKET.num_ops)), jax.random.key(0), mode="beam",
                       width=0)
