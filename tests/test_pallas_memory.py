"""The list scheduler's other kernels: with its lanes in memory (gsched.costmodel.pallas_memory,
decoder "pallas_memory"), that kernel accounting SPEC §3's memory as it schedules
(gsched.costmodel.pallas_peaks, decoder "pallas_fused"), the TPU kernel
(gsched.costmodel.pallas_tpu, decoder "pallas_tpu") and the kernel with a chromosome per lane
(gsched.costmodel.pallas_lanes, decoders "pallas_lanes" and, accounting the memory,
"pallas_lanes_fused"), in Pallas' interpreter on the CPU,
against the loop: every Evaluation field bit for bit for D = 1, 2, 3 with program inputs, exact
key ties, pinned ops, fusion, batches of graphs, padding, chains across devices and rows wider
than a warp; the memory kernels' row layout and their lowering for a GPU (Triton; lowering
only, no GPU here). The TPU kernel's own tests: tests/test_pallas_tpu.py; the lane kernel's:
tests/test_pallas_lanes.py. The pinned-ops and fusion test also runs the §8.2 lane kernels
(tests/test_pallas_lanes_dynamic.py)."""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_with_decoder
from gsched.costmodel.pallas_decode import pallas_schedule_and_memory
from gsched.costmodel.pallas_dynamic import fused_schedule
from gsched.costmodel.pallas_memory import row_shape
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from tests.graphs import chain, with_inputs
from tests.grids import diagonal_then_slow, slow_except
from tests.test_pallas_decode import BUCKET, PARAMS, compare, small_graphs, tie_keys


DECODERS = ("pallas_memory", "pallas_fused", "pallas_tpu", "pallas_lanes", "pallas_lanes_fused")


def test_rows_are_about_the_square_root_of_the_lanes_and_at_least_a_warp_wide():
    assert [row_shape(w) for w in (16, 32, 64, 512, 1024, 2048, 32768)] == [
        (1, 16), (1, 32), (2, 32), (16, 32), (32, 32), (32, 64), (128, 256)]


@pytest.mark.parametrize("d, decoder", diagonal_then_slow([1, 2, 3], DECODERS))
def test_matches_the_loop_bit_for_bit(d, decoder):
    rng = np.random.default_rng(d)
    feasible = []
    for graph in small_graphs(rng):
        got = compare(pad_graph(graph, BUCKET), tie_keys(rng, graph, 6, d), d, decoder=decoder)
        feasible.append(np.asarray(got.feasible))
    if d == 1:  # the capacity bites for some
        assert np.concatenate(feasible).any() and not np.concatenate(feasible).all()


# Each decoder at its default chunk (KERNEL_CHUNK; the loop at LOOP_CHUNK), and §8.2's lane
# kernel; chunks 1 and 16 are slow.
DEFAULT_CHUNK = [(None, decoder, "list") for decoder in DECODERS] + [
    (None, "pallas_lanes_fused", "fifo")]


@pytest.mark.parametrize("chunk, decoder, scheduler", slow_except(
    [*DEFAULT_CHUNK, *itertools.product((1, 16), DECODERS, ["list"]),
     (1, "pallas_lanes", "priority"), (1, "pallas_lanes_fused", "fifo")],
    *DEFAULT_CHUNK))
def test_pinned_ops_fusion_and_any_chunk(chunk, decoder, scheduler):
    rng = np.random.default_rng(4)
    graph = with_inputs(random_computation_graph(20, rng), rng)
    padded = pad_graph(graph, BUCKET)
    pinned = np.full(BUCKET.num_ops, -1, np.int32)
    pinned[[0, 3, 7]] = [1, 0, 1]
    got = compare(padded, tie_keys(rng, graph, 4, 2), 2, pinned=pinned, chunk=chunk,
                  decoder=decoder, scheduler=scheduler)
    assert (np.asarray(got.placement)[:, [0, 3, 7]] == [1, 0, 1]).all()
    got = compare(padded, tie_keys(rng, graph, 4, 2, fusion=True), 2, fusion=True, chunk=chunk,
                  decoder=decoder, scheduler=scheduler)
    assert (np.asarray(got.fusion)[:, :graph.num_ops] != np.arange(graph.num_ops)).any()


@pytest.mark.parametrize("decoder", slow_except(DECODERS, "pallas_lanes_fused"))
def test_batch_of_graphs_and_padding(decoder):
    rng = np.random.default_rng(5)
    gs = [with_inputs(random_computation_graph(n, rng), rng) for n in (6, 17, 29)]
    keys = np.stack([tie_keys(rng, g, 3, 2) for g in gs])
    compare(batch_graphs(gs, BUCKET), keys, 2, batch=True, decoder=decoder)
    graph = gs[1]
    raw = rng.random((3, graph.chromosome_length(2))).astype(np.float32)
    small, large = Bucket(17, 40, 40), Bucket(64, 128, 128)
    a, b = (compare(pad_graph(graph, bucket), pad_keys(raw, graph, bucket, 2), 2,
                    decoder=decoder) for bucket in (small, large))
    for field in ("device_peaks", "peak_memory", "runtime", "num_steps", "feasible"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


@pytest.mark.parametrize("decoder", slow_except(DECODERS, "pallas_fused", "pallas_lanes_fused"))
def test_a_chain_across_devices_at_full_width(decoder):
    # Every slot of the widest kernel runs: successors in every row, rows emptied in turn.
    n = 32
    graph = chain(n)
    bucket = Bucket(32, 32, 32)
    keys = tie_keys(np.random.default_rng(9), graph, 3, 2, bucket=bucket)
    got = compare(pad_graph(graph, bucket), keys, 2,
                  pinned=jnp.asarray(np.arange(n) % 2, jnp.int32), decoder=decoder)
    assert (np.asarray(got.num_steps) == 2 * n - 1).all()


@pytest.mark.parametrize("decoder", slow_except(DECODERS))
def test_rows_wider_than_a_warp(decoder):
    # 500 ops, D = 2: V_p = 2,048 slots, so the kernel runs at 2,048 (32 rows of 64 lanes) or
    # 1,024 lanes (32 rows of 32); the TPU kernel's words are 16 or 8 rows of 128.
    rng = np.random.default_rng(10)
    graph = random_computation_graph(500, rng)
    bucket = bucket_for(graph)
    keys = pad_keys(rng.random((2, graph.chromosome_length(2))).astype(np.float32), graph,
                    bucket, 2)
    compare(pad_graph(graph, bucket), keys, 2, decoder=decoder)


@pytest.mark.parametrize("decoder, state, grid", [
    ("pallas_memory", "memory", 70), ("pallas_fused", "memory", 70), ("pallas_lanes", "lanes", 3),
    ("pallas_lanes_fused", "lanes", 3)])
@pytest.mark.parametrize("d", slow_except([2, 3], 2))
def test_lowers_for_a_gpu_through_triton_with_one_warp(d, decoder, state, grid):
    rng = np.random.default_rng(8)
    graph = random_computation_graph(20, rng)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, BUCKET))
    keys = tie_keys(rng, graph, 70, d).reshape(2, 35, -1)
    params = jax.tree.map(jnp.asarray, PARAMS)

    def one(k):
        placement = decode_placement(padded, k, d)
        if decoder.endswith("fused"):  # tail 4 + 2·D: 8, or 10 (not a power of two)
            return pallas_schedule_and_memory(padded, k, placement, params, d, interpret=False,
                                              state=state)
        return fused_schedule(padded, k, placement, params, d, "list", interpret=False,
                              state=state)

    text = jax.jit(jax.vmap(jax.vmap(one))).trace(keys).lower(
        lowering_platforms=("cuda",)).as_text()
    # One call per lane width (V_p = 128: 128, 64, 32), of one warp per program: a program per
    # chromosome, or per 32 chromosomes (70 in 3 programs).
    assert text.count("xla.gpu.triton") == 3
    assert f"grid_x = {grid} : i32, grid_y = 1 : i32" in text and "num_warps = 1" in text


@pytest.mark.parametrize("decoder", ["pallas_memory", "pallas_fused", "pallas_tpu"])
def test_only_the_list_scheduler(decoder):
    graph = pad_graph(random_computation_graph(10, 0), BUCKET)
    keys = np.zeros((2, BUCKET.chromosome_length(2)), np.float32)
    with pytest.raises(ValueError, match=f"{decoder} decoder needs scheduler='list'"):
        evaluate_with_decoder(graph, keys, num_devices=2, decoder=decoder, scheduler="priority")


@pytest.mark.parametrize("kernel", ["list_memory", "list_fused"])
def test_each_step_ends_with_a_barrier_on_a_gpu(kernel):
    # The Triton IR (lowered on the CPU): one barrier after the lanes (and the read counts) are
    # written at the start, one per step; tests/test_kernel_registers.py compiles it where
    # triton is installed.
    from eval.kernel_registers import triton_modules

    modules = triton_modules(20, 2, kernel, 2)
    assert [width for width, _ in modules] == [64, 32, 16]
    assert all(text.count("gpu.barrier") == 2 for _, text in modules)
