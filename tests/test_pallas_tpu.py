"""The TPU list kernel (gsched.costmodel.pallas_tpu, decoder "pallas_tpu") beyond its identity
with the loop (tests/test_pallas_memory.py runs those in Pallas' interpreter;
tests/test_pallas_decode.py checks one compile per bucket): lowered for a TPU through Pallas'
Mosaic backend on the CPU (one call per lane width), compiled by libtpu for a TPU v5e ahead of
time where the optional jax[tpu] is installed (skipped otherwise; no TPU needed); tables too
big for a TPU's scalar memory, and a GPU, refused with a clear error."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.costmodel import pallas_tpu
from gsched.core.padding import bucket_for, pad_graph
from gsched.costmodel.pallas_decode import pallas_schedule_and_memory, tpu_smem_words
from gsched.costmodel.schedule import decode_placement
from gsched.generators import random_computation_graph
from tests.test_pallas_decode import BUCKET, PARAMS, tie_keys


def population(d: int, size: int = 20, shape=(2, 5)):
    """``(vmapped TPU kernel — schedule and memory — of a population, its keys)`` on a random
    graph."""
    rng = np.random.default_rng(8)
    graph = random_computation_graph(size, rng)
    padded = jax.tree.map(jnp.asarray, pad_graph(graph, BUCKET))
    keys = tie_keys(rng, graph, int(np.prod(shape)), d).reshape(*shape, -1)
    params = jax.tree.map(jnp.asarray, PARAMS)

    def one(k):
        return pallas_schedule_and_memory(padded, k, decode_placement(padded, k, d), params, d,
                                          interpret=False, state="tpu")

    fn = jax.vmap(one)
    for _ in shape[1:]:
        fn = jax.vmap(fn)
    return jax.jit(fn), keys


@pytest.mark.parametrize("d, widths", [(1, 2), (2, 3), (3, 3)])
def test_lowers_for_a_tpu_through_mosaic(d, widths):
    # Pallas' Mosaic lowering on the CPU accepts every op and block of the kernel (2-D blocks
    # whose last two dimensions are the array's, scalar memory, the loops); one call per lane
    # width (V_p = 32 for D = 1: 32, 16; 128 for D = 2 and 3: 128, 64, 32).
    fn, keys = population(d)
    text = fn.trace(keys).lower(lowering_platforms=("tpu",)).as_text()
    assert text.count("tpu_custom_call") == widths
    assert text.count('kernel_name = "gsched_schedule_tpu"') == widths


def _v5e_core():
    pytest.importorskip("libtpu", reason="libtpu (the optional jax[tpu]) compiles for a TPU")
    from jax.experimental import topologies

    return topologies.get_topology_desc("v5e:2x2", "tpu").devices[0]


def test_compiles_for_a_tpu_ahead_of_time():
    # libtpu's own compiler (Mosaic's layout passes, SMEM allocation) on a described v5e, on
    # the CPU: what the lowering above cannot check. Nothing runs.
    core = _v5e_core()
    fn, keys = population(2, shape=(4,))
    sharding = jax.sharding.SingleDeviceSharding(core)
    fn.trace(jax.ShapeDtypeStruct(keys.shape, jnp.float32, sharding=sharding)).lower().compile()


def test_tables_too_big_for_the_scalar_memory_are_refused(monkeypatch):
    # A 32-op bucket at D = 2 takes ~20 KB of SMEM; on a TPU with 16 KiB (v2, v3) the call
    # names the sizes instead of failing in the compiler.
    padded = pad_graph(random_computation_graph(20, 0), BUCKET)
    assert 16 * 1024 < 4 * tpu_smem_words(padded, 2) < 64 * 1024
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    monkeypatch.setattr(pallas_tpu, "smem_capacity", lambda: 16 * 1024)
    fn, keys = population(2, shape=(2,))
    with pytest.raises(ValueError, match="exceed 90% of this TPU's 16,384 bytes of SMEM"):
        fn.trace(keys)
    monkeypatch.setattr(pallas_tpu, "smem_capacity", lambda: 1024 * 1024)
    fn.trace(keys)  # fits v5e's 1 MiB


def test_a_gpu_is_told_to_use_its_own_kernels(monkeypatch):
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    fn, keys = population(1, shape=(2,))
    with pytest.raises(NotImplementedError, match="on a GPU use decoder 'pallas'"):
        fn.trace(keys)


def test_the_smem_estimate_counts_double_buffered_tables():
    # Inputs and outputs twice, the ready times and the read counts once, each with its sink.
    assert pallas_tpu.smem_words(2048, 8, 3000, 8, (1024,)) == (
        2 * (2048 * 8 + 3000 + 2048 + 8) + 2 * 2049 + 1025)
    assert pallas_tpu.smem_words(16, 8, 10) == pallas_tpu.smem_words(128, 8, 10)  # one row
    # 500 ops fit a v5e core's 1 MiB at D = 1, 2, 4; 10,000 ops at D = 2 do not.
    for size, d, fits in ((500, 1, True), (500, 2, True), (500, 4, True), (10000, 2, False)):
        graph = random_computation_graph(size, 0)
        words = tpu_smem_words(pad_graph(graph, bucket_for(graph)), d)
        assert pallas_tpu.fits_smem(words, 1 << 20) == fits, (size, d, words)
