"""The dense multi-device decode (gsched.costmodel.dense_multi) against the ready-tree loop
(gsched.costmodel.schedule): every Evaluation field bit for bit with D = 2, 3, 4, on random and
layered graphs with program inputs, control edges, pinned ops, exact ties in every key part,
a capacity and padding, with and without fusion; padding invariance, one compile per bucket and
the static switch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph, pad_keys
from gsched.costmodel import dense
from gsched.costmodel.evaluate import (
    evaluate,
    evaluate_population,
    evaluate_population_sharded,
    evaluate_with_decoder,
)
from gsched.costmodel.host import item_to_tuple
from gsched.generators import random_computation_graph
from tests.graphs import assert_identical, with_inputs
from tests.test_dense_schedule import BUCKET, PARAMS, graphs


def tie_keys(rng, graph, population, num_devices, fusion, bucket=BUCKET):
    """Padded chromosomes whose affinities and op and transfer priorities are quantized to
    quarters (exact ties everywhere, placement ties included), with some −0.0; fusion keys
    uniform."""
    length = graph.chromosome_length(num_devices) + (graph.num_ops if fusion else 0)
    keys = np.round(rng.random((population, length)) * 4) / 4
    keys[rng.random(keys.shape) < 0.05] = -0.0
    if fusion:
        keys[:, graph.chromosome_length(num_devices):] = rng.random((population, graph.num_ops))
    return pad_keys(keys.astype(np.float32), graph, bucket, num_devices)


def pinned_ops(rng, graph, num_devices, bucket=BUCKET):
    """``[N]`` int32: about a third of the real ops pinned to a random device, −1 elsewhere."""
    pinned = np.full(bucket.num_ops, -1, np.int32)
    chosen = rng.random(graph.num_ops) < 0.3
    pinned[: graph.num_ops][chosen] = rng.integers(0, num_devices, chosen.sum())
    return jnp.asarray(pinned)


@pytest.mark.parametrize("num_devices,fusion", [(2, False), (2, True), (3, False), (4, True)])
def test_population_matches_the_loop_bit_for_bit(num_devices, fusion):
    rng = np.random.default_rng(10 + num_devices)
    feasible = []
    for i, graph in enumerate(graphs(num_devices)):
        padded = pad_graph(graph, BUCKET)
        keys = tie_keys(rng, graph, 37, num_devices, fusion)  # two blocks, one with filler
        pinned = pinned_ops(rng, graph, num_devices) if i % 2 else None
        want = evaluate_with_decoder(padded, keys, PARAMS, num_devices=num_devices,
                                     decoder="loop", fusion=fusion, pinned=pinned)
        got = evaluate_with_decoder(padded, keys, PARAMS, num_devices=num_devices,
                                    decoder="dense", fusion=fusion, pinned=pinned)
        assert_identical(want, got)
        feasible.append(np.asarray(got.feasible))
        assert (np.asarray(got.order) >= padded.bucket.num_ops).any()  # transfers happen
    feasible = np.concatenate(feasible)
    assert feasible.any() and not feasible.all()  # the capacity bites for some


@pytest.mark.parametrize("fusion", [False, True])
def test_batch_of_different_graphs_matches_the_loop(fusion):
    # Different real op counts in one block: the shorter schedules go on with nothing.
    rng = np.random.default_rng(20)
    gs = [with_inputs(random_computation_graph(n, rng), rng) for n in (9, 60, 120)]
    bucket = bucket_for(gs)
    keys = np.stack([tie_keys(rng, g, 5, 2, fusion, bucket) for g in gs])
    batch = batch_graphs(gs, bucket)
    want = evaluate_with_decoder(batch, keys, PARAMS, num_devices=2, decoder="loop", batch=True,
                                 fusion=fusion)
    got = evaluate_with_decoder(batch, keys, PARAMS, num_devices=2, decoder="dense", batch=True,
                                fusion=fusion)
    assert_identical(want, got)


def test_padding_to_a_larger_bucket_changes_nothing():
    rng = np.random.default_rng(21)
    graph = with_inputs(random_computation_graph(64, rng), rng)
    keys = rng.random((6, graph.chromosome_length(3))).astype(np.float32)
    results = []
    for bucket in (Bucket(64, 128, 128), Bucket(100, 300, 200)):  # full; odd, padded
        padded, padded_keys = pad_graph(graph, bucket), pad_keys(keys, graph, bucket, 3)
        got = evaluate_with_decoder(padded, padded_keys, PARAMS, num_devices=3, decoder="dense")
        if not results:
            assert_identical(evaluate_with_decoder(padded, padded_keys, PARAMS, num_devices=3,
                                                   decoder="loop"), got)
        order = [[item_to_tuple(int(i), bucket.num_ops, 3) for i in row if i >= 0]
                 for row in np.asarray(got.order)]
        results.append((order, got))
    (order, first), (other_order, other) = results
    assert order == other_order
    for field in ("peak_memory", "device_peaks", "runtime", "num_steps", "feasible", "excess"):
        np.testing.assert_array_equal(getattr(other, field), getattr(first, field))


def test_unbatched_vmapped_and_sharded_entry_points():
    rng = np.random.default_rng(22)
    graph = with_inputs(random_computation_graph(50, rng), rng)
    padded = pad_graph(graph, BUCKET)
    keys = jnp.asarray(tie_keys(rng, graph, 4 * len(jax.devices()), 2, False))
    want = evaluate_with_decoder(padded, keys, PARAMS, num_devices=2, decoder="loop")
    assert_identical(want, evaluate_population(padded, keys, PARAMS, num_devices=2))
    one = jax.jit(lambda k: evaluate(padded, k, PARAMS, num_devices=2))(keys[1])  # unbatched
    assert_identical(jax.tree.map(lambda x: x[1], want), one)
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("population",))
    assert_identical(want, evaluate_population_sharded(padded, keys, PARAMS, num_devices=2,
                                                       mesh=mesh))
    assert_identical(want, evaluate_with_decoder(padded, keys, PARAMS, num_devices=2,
                                                 decoder="dense", mesh=mesh))


def test_the_switch_is_static_by_bucket_devices_and_scheduler():
    limit = dense.DENSE_MULTI_MAX_OPS
    assert dense.dense_applies(limit, 2, backend="cpu")
    assert not dense.dense_applies(2 * limit, 2, backend="cpu")
    assert not dense.dense_applies(512, 2, "priority", "cpu")
    assert not dense.dense_applies(512, 2, backend="gpu")


def test_compiles_once_per_bucket():
    rng = np.random.default_rng(24)
    bucket = Bucket(64, 160, 160)
    before = evaluate_population._cache_size()
    for n in (20, 33, 50):
        g = random_computation_graph(n, rng)
        keys = pad_keys(rng.random((3, g.chromosome_length(2))), g, bucket, 2)
        evaluate_population(pad_graph(g, bucket), keys, PARAMS, num_devices=2)
    assert evaluate_population._cache_size() - before == 1
