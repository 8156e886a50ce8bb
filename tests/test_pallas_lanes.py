"""The list kernel with one chromosome per lane (gsched.costmodel.pallas_lanes, decoder
"pallas_lanes") beyond its identity with the loop (tests/test_pallas_memory.py runs those in
Pallas' interpreter; tests/test_pallas_decode.py checks one compile per bucket): its ready tree
(levels, packing, lowest set bit) against NumPy, a ready tree of two levels in memory, a
population that is not a multiple of a program's lanes, fewer programs than blocks (each
running its blocks in turn), "auto" on a GPU choosing it or a kernel with one chromosome per
program by the chromosomes per call, and one barrier per step in its Triton
IR (lowered on the CPU; no GPU here). Its lowering, a program per 32 chromosomes:
tests/test_pallas_memory.py."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import Bucket, batch_graphs, pad_graph
from gsched.costmodel import evaluate as evaluate_module
from gsched.costmodel.evaluate import (
    evaluate_batch, evaluate_population, evaluate_with_decoder)
from gsched.costmodel.pallas_decode import pallas_schedule
from gsched.costmodel.pallas_dynamic import fused_schedule, fused_schedule_and_memory
from gsched.costmodel.pallas_lanes import pack_bits, ready_tree, trailing_zeros, tree_levels
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from tests.graphs import assert_identical, chain
from tests.grids import slow_except
from tests.test_pallas_decode import BUCKET, PARAMS, tie_keys


def test_tree_levels_end_below_one_word():
    assert [tree_levels(w) for w in (16, 32, 64, 1024, 2048, 32768, 65536)] == [
        (1,), (1,), (2,), (32,), (64, 2), (1024, 32), (2048, 64, 2)]


def test_packing_and_the_lowest_set_bit_match_numpy():
    rng = np.random.default_rng(0)
    flags = rng.random((5, 70)) < 0.2
    flags[0] = False
    flags[1, 31] = True  # bit 31: a negative int32 word
    words = np.asarray(pack_bits(jnp.asarray(flags))).view(np.uint32)
    want = [[sum(1 << j for j in range(32) if i * 32 + j < 70 and row[i * 32 + j])
             for i in range(3)] for row in flags]
    np.testing.assert_array_equal(words, np.array(want, np.uint32))
    x = np.array([1, 2, 12, 1 << 31, 0, 96], np.uint32).view(np.int32)
    np.testing.assert_array_equal(trailing_zeros(jnp.asarray(x)), [0, 1, 2, 31, 32, 5])


def test_ready_tree_marks_the_ready_slots_at_every_level():
    width, k = 2048, 11
    rng = np.random.default_rng(1)
    ready = np.zeros((2, width), bool)
    ready[0, rng.choice(width, 40, replace=False)] = True  # the second has none
    word = np.where(ready, np.arange(width), (3 << k) | np.arange(width)).astype(np.int32)
    tree, top = (np.asarray(x) for x in ready_tree(jnp.asarray(word), k))
    assert tree.shape == (2, 64 + 2)
    level0 = np.asarray(pack_bits(jnp.asarray(ready)))
    np.testing.assert_array_equal(tree[:, :64], level0)
    np.testing.assert_array_equal(tree[:, 64:], pack_bits(jnp.asarray(level0 != 0)))
    np.testing.assert_array_equal(top, np.asarray(pack_bits(jnp.asarray(tree[:, 64:] != 0)))[:,
                                                                                           0])
    assert top[1] == 0


def test_two_levels_of_the_tree_in_memory():
    # 600 ops alternating between two devices: 1,199 running items, so the kernel runs at
    # 2,048 slots with two levels of its ready tree in memory (64 and 2 words).
    n = 600
    graph = chain(n)
    bucket = Bucket(n, n, n)
    keys = tie_keys(np.random.default_rng(2), graph, 3, 2, bucket=bucket)
    padded = pad_graph(graph, bucket)
    pinned = jnp.asarray(np.arange(n) % 2, jnp.int32)
    want, got = (evaluate_with_decoder(padded, keys, PARAMS, num_devices=2, pinned=pinned,
                                       decoder=decoder) for decoder in ("loop", "pallas_lanes"))
    assert_identical(want, got)
    assert (np.asarray(got.num_steps) == 2 * n - 1).all()


@pytest.mark.parametrize("population", slow_except([1, 33, 70], 33))
def test_populations_that_do_not_fill_a_program(population):
    rng = np.random.default_rng(population)
    graph = random_computation_graph(25, rng)
    keys = tie_keys(rng, graph, population, 2)
    padded = pad_graph(graph, BUCKET)
    want, got = (evaluate_with_decoder(padded, keys, PARAMS, num_devices=2, decoder=decoder)
                 for decoder in ("loop", "pallas_lanes"))
    assert_identical(want, got)


def test_fewer_programs_run_their_blocks_in_turn():
    # 100 chromosomes, blocks of 32: four blocks (the last one padded). With 3 programs the
    # first runs blocks 0 and 3; with 1, all four in turn. The schedules are the default's,
    # a program per block, which the other tests check against the loop.
    rng = np.random.default_rng(5)
    graph = random_computation_graph(25, rng)
    keys = tie_keys(rng, graph, 100, 2)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, BUCKET))
    base = BUCKET.chromosome_length(2)

    def schedules(programs):
        def one(k):
            placement = decode_placement(padded, k[:base], 2)
            return pallas_schedule(padded, k[:base], placement, PARAMS, 2, state="lanes",
                                   programs=programs)
        return jax.jit(jax.vmap(one))(jnp.asarray(keys))

    want = schedules(None)
    for programs in (3, 1):
        jax.tree.map(np.testing.assert_array_equal, want, schedules(programs))


def test_programs_are_the_lane_kernels_alone():
    graph = pad_graph(random_computation_graph(6, np.random.default_rng(6)), BUCKET)
    keys = jnp.zeros(BUCKET.chromosome_length(2), jnp.float32)
    placement = decode_placement(graph, keys, 2)
    with pytest.raises(ValueError, match="programs applies to the 'lanes' kernel, not "
                                         "'registers'"):
        pallas_schedule(graph, keys, placement, PARAMS, 2, programs=4)
    with pytest.raises(ValueError, match="the list lane kernel, not 'fifo'"):
        fused_schedule(graph, keys, placement, PARAMS, 2, "fifo", state="lanes", programs=4)
    with pytest.raises(ValueError, match="programs must be at least 1, got 0"):
        pallas_schedule(graph, keys, placement, PARAMS, 2, state="lanes", programs=0)


@pytest.mark.parametrize("scheduler", ["list", "priority"])
def test_auto_on_a_gpu_picks_the_kernel_by_chromosomes_per_call(monkeypatch, scheduler):
    # On an H200 the lane kernels were the fastest from a few thousand chromosomes per call,
    # the kernels with one chromosome per program below that on buckets up to 2,000 ops
    # (docs/benchmarks.md, session 37).
    monkeypatch.setattr(evaluate_module, "pallas_applies", lambda *_: True)
    monkeypatch.setattr(evaluate_module, "dense_applies", lambda *_, **__: False)  # a GPU's
    few, few_state = ("pallas_memory", "memory") if scheduler == "list" else ("pallas",
                                                                              "registers")
    pick = functools.partial(evaluate_module._fused_decoder, "auto", scheduler)
    assert pick(2047, 2048) == few
    assert pick(2048, 2048) == "pallas_lanes"
    assert pick(512, 8192) == (few if scheduler == "list" else "pallas_lanes")
    assert pick(512, 32768) == "pallas_lanes"  # a chromosome's own work is O(V_p²) per program
    assert evaluate_module._fused_decoder("loop", scheduler, 16, 2048) is None

    states = []

    def spy(*args, **kwargs):  # which kernel each evaluation traces
        states.append(kwargs["state"])
        return fused_schedule_and_memory(*args, **kwargs)

    monkeypatch.setattr(evaluate_module, "fused_schedule_and_memory", spy)
    monkeypatch.setattr(evaluate_module, "LANES_MIN_CHROMOSOMES", 4)
    rng = np.random.default_rng(4)
    graphs = [random_computation_graph(n, rng) for n in (12, 9)]
    keys = np.stack([tie_keys(rng, g, 3, 2) for g in graphs])
    padded = batch_graphs(graphs, BUCKET)
    jax.clear_caches()  # nothing traced before the switch is reused
    one = evaluate_population(pad_graph(graphs[0], BUCKET), keys[0], PARAMS, num_devices=2,
                              scheduler=scheduler)  # 3 chromosomes
    both = evaluate_batch(padded, keys, PARAMS, num_devices=2, scheduler=scheduler)  # 2 × 3
    assert states == [few_state, "lanes"]
    assert_identical(evaluate_with_decoder(pad_graph(graphs[0], BUCKET), keys[0], PARAMS,
                                           num_devices=2, decoder="loop", scheduler=scheduler),
                     one)
    assert_identical(evaluate_with_decoder(padded, keys, PARAMS, num_devices=2, decoder="loop",
                                           scheduler=scheduler, batch=True), both)


def test_one_barrier_per_step_in_the_triton_ir():
    from eval.kernel_registers import triton_modules

    modules = triton_modules(20, 2, "list_lanes", 2)
    assert [width for width, _ in modules] == [64, 32, 16]
    assert all(text.count("gpu.barrier") == 1 for _, text in modules)
