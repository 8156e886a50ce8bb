"""SPEC §3's memory walk with the chromosomes explicit (gsched.costmodel.memory.
multi_device_peak_memory) against ``jax.vmap(peak_memory)``: every MemoryProfile field bit for
bit with D = 2, 3, 4 on random and layered graphs with program inputs, control edges and
multi-output ops, a capacity some chromosomes exceed, populations that fill no whole block,
shorter step arrays (and ``peak_memory``'s walk over fewer steps, ``max_steps``), padding
to a larger bucket and a batch of different graphs."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph, pad_keys
from gsched.costmodel.memory import multi_device_peak_memory, peak_memory
from gsched.costmodel.pallas_decode import slot_bound
from gsched.costmodel.schedule import (
    decode_placement,
    schedule_init,
    schedule_result,
    schedule_step,
)
from gsched.generators import random_computation_graph
from tests.graphs import assert_identical, with_inputs
from tests.test_dense_schedule import BUCKET, PARAMS, graphs
from tests.test_dense_schedule_multi import tie_keys


@functools.partial(jax.jit, static_argnames="num_devices")
def decoded(graph, keys, *, num_devices):
    """Per chromosome (vmapped): the placement and the loop's list schedule of ``keys [P, L]``."""

    def one(k):
        placement = decode_placement(graph, k, num_devices)
        tables, state = schedule_init(graph, k, placement, PARAMS, num_devices)
        state = jax.lax.while_loop(lambda s: ~s.done,
                                   lambda s: schedule_step(tables, s, num_devices, 8), state)
        return placement, schedule_result(tables, state)

    return jax.vmap(one)(keys)


@functools.partial(jax.jit, static_argnames=("num_devices", "max_steps"))
def vmapped(graph, placement, schedule, *, num_devices, max_steps=None):
    return jax.vmap(lambda p, s: peak_memory(graph, p, s, PARAMS.capacity, num_devices,
                                             max_steps))(placement, schedule)


explicit = jax.jit(multi_device_peak_memory)


@pytest.mark.parametrize("num_devices", [2, 3, 4])
def test_matches_vmapped_peak_memory_bit_for_bit(num_devices):
    rng = np.random.default_rng(30 + num_devices)
    capacity = jnp.float32(PARAMS.capacity)
    feasible = []
    for graph in graphs(num_devices):
        padded = pad_graph(graph, BUCKET)
        keys = tie_keys(rng, graph, 37, num_devices, False)  # blocks of 64 // D, filler
        placement, schedule = decoded(padded, jnp.asarray(keys), num_devices=num_devices)
        want = vmapped(padded, placement, schedule, num_devices=num_devices)
        assert_identical(want, explicit(padded, placement, schedule.order, capacity))
        # Steps the dense decoder can take (N + T·(D−1)), and one chromosome alone.
        steps = BUCKET.num_ops + BUCKET.num_tensors * (num_devices - 1)
        assert (np.asarray(schedule.order)[:, steps:] == -1).all()
        assert_identical(want, explicit(padded, placement, schedule.order[:, :steps], capacity))
        # The walk over fewer steps: the fused kernels' V_p slots (< V here), the longest.
        vp = slot_bound(BUCKET.num_ops, BUCKET.num_tensors, BUCKET.num_edges, num_devices)
        assert vp < schedule.order.shape[1]
        for bound in (vp, int(np.max(schedule.num_steps))):
            assert_identical(want, vmapped(padded, placement, schedule, num_devices=num_devices,
                                           max_steps=bound))
        one = jax.tree.map(lambda x: x[3:4], (placement, schedule.order))
        assert_identical(jax.tree.map(lambda x: x[3:4], want), explicit(padded, *one, capacity))
        feasible.append(np.asarray(want.feasible))
        assert (np.asarray(schedule.order) >= BUCKET.num_ops).any()  # transfers happen
    feasible = np.concatenate(feasible)
    assert feasible.any() and not feasible.all()  # the capacity bites for some


def test_unbounded_capacity():
    rng = np.random.default_rng(34)
    graph = with_inputs(random_computation_graph(70, rng), rng)
    padded = pad_graph(graph, BUCKET)
    keys = jnp.asarray(pad_keys(rng.random((9, graph.chromosome_length(2))).astype(np.float32),
                                graph, BUCKET, 2))
    placement, schedule = decoded(padded, keys, num_devices=2)
    got = explicit(padded, placement, schedule.order, jnp.float32(np.inf))
    want = jax.vmap(lambda p, s: peak_memory(padded, p, s, jnp.float32(np.inf), 2))(
        placement, schedule)
    assert_identical(want, got)
    assert np.asarray(got.feasible).all() and not np.asarray(got.excess).any()


def test_padding_to_a_larger_bucket_changes_nothing():
    rng = np.random.default_rng(35)
    graph = with_inputs(random_computation_graph(64, rng), rng)
    keys = rng.random((6, graph.chromosome_length(3))).astype(np.float32)
    results = []
    for bucket in (bucket_for(graph), Bucket(100, 300, 300)):  # tight; odd, padded
        padded = pad_graph(graph, bucket)
        placement, schedule = decoded(padded, jnp.asarray(pad_keys(keys, graph, bucket, 3)),
                                      num_devices=3)
        got = explicit(padded, placement, schedule.order, jnp.float32(PARAMS.capacity))
        assert_identical(vmapped(padded, placement, schedule, num_devices=3), got)
        results.append(got)
    assert_identical(*results)


def test_batch_of_different_graphs():
    rng = np.random.default_rng(36)
    gs = [with_inputs(random_computation_graph(n, rng), rng) for n in (9, 60, 120)]
    bucket = bucket_for(gs)
    keys = jnp.asarray(np.stack([tie_keys(rng, g, 5, 2, False, bucket) for g in gs]))
    batch = batch_graphs(gs, bucket)
    placement, schedule = jax.vmap(functools.partial(decoded, num_devices=2))(batch, keys)
    want = jax.vmap(functools.partial(vmapped, num_devices=2))(batch, placement, schedule)
    got = jax.vmap(explicit, in_axes=(0, 0, 0, None))(batch, placement, schedule.order,
                                                      jnp.float32(PARAMS.capacity))
    assert_identical(want, got)
