"""The dense one-device decode (gsched.costmodel.dense) against the ready-tree loop
(gsched.costmodel.schedule): every Evaluation field bit for bit, on random and layered graphs
with program inputs, control edges, exact priority ties and padding, with and without fusion;
and the static switch between them."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched.core.graph import make_graph
from gsched.core.padding import Bucket, batch_graphs, bucket_for, pad_graph, pad_keys
from gsched.costmodel import dense
from gsched.costmodel import evaluate as evaluate_module
from gsched.costmodel.evaluate import (
    evaluate,
    evaluate_batch,
    evaluate_population,
    evaluate_population_sharded,
    evaluate_with_decoder,
)
from gsched.costmodel.params import CostParams
from gsched.generators import layered_graph, random_computation_graph
from tests.graphs import assert_identical, with_inputs

BUCKET = Bucket(128, 256, 256)
# Transfers, roofline, launch overhead, a capacity some chromosomes exceed, a fusion capacity.
PARAMS = CostParams(latency=0.1, bandwidth=1e3, capacity=2.5e5, hbm_bandwidth=3e4,
                    launch_overhead=0.01, fusion_capacity=5e4)




def tie_keys(rng, graph, population, fusion, bucket=BUCKET):
    """Padded chromosomes whose priorities are quantized to eighths (many exact ties), with
    some 0.0, −0.0 and 1.0; fusion keys uniform."""
    keys = rng.random((population, graph.chromosome_length(1) + (graph.num_ops if fusion else 0)))
    n = graph.num_ops
    prio = np.round(rng.random((population, n)) * 8) / 8
    prio[rng.random(prio.shape) < 0.05] = -0.0
    keys[:, n: 2 * n] = prio
    return pad_keys(keys.astype(np.float32), graph, bucket, 1)


def graphs(seed):
    rng = np.random.default_rng(seed)
    out = [with_inputs(random_computation_graph(int(rng.integers(20, 110)), rng), rng)
           for _ in range(3)]
    out.append(layered_graph(60, rng))
    # Multi-output op, a tensor read twice by one op (one pair), a control edge, an input.
    out.append(make_graph(compute_cost=[1, 2, 3, 1], temporary_memory=[0, 5, 0, 2],
                          tensor_producer=[0, 0, 1, 2, 0], tensor_size=[8, 2, 4, 1, 0],
                          tensor_is_control=[False, False, False, False, True],
                          edge_tensor=[0, 1, 2, 3, 4], edge_consumer=[1, 1, 2, 3, 3],
                          is_input=[True, False, False, False]))
    return out


@pytest.mark.parametrize("fusion", [False, True])
def test_population_matches_the_loop_bit_for_bit(fusion):
    rng = np.random.default_rng(1)
    feasible = []
    for graph in graphs(1):
        padded = pad_graph(graph, BUCKET)
        keys = tie_keys(rng, graph, 37, fusion)  # two blocks, the second with filler
        want = evaluate_with_decoder(padded, keys, PARAMS, num_devices=1, decoder="loop",
                                     fusion=fusion)
        got = evaluate_with_decoder(padded, keys, PARAMS, num_devices=1, decoder="dense",
                                    fusion=fusion)
        assert_identical(want, got)
        auto = evaluate_population(padded, keys, PARAMS, num_devices=1, fusion=fusion)
        assert_identical(want, auto)
        feasible.append(np.asarray(got.feasible))
    feasible = np.concatenate(feasible)
    assert feasible.any() and not feasible.all()  # the capacity bites for some


@pytest.mark.parametrize("fusion", [False, True])
def test_batch_of_different_graphs_matches_the_loop(fusion):
    # Different real op counts in one block: the shorter schedules go on with padding.
    rng = np.random.default_rng(2)
    gs = [with_inputs(random_computation_graph(n, rng), rng) for n in (9, 60, 120)]
    bucket = bucket_for(gs)
    keys = np.stack([tie_keys(rng, g, 5, fusion, bucket) for g in gs])
    batch = batch_graphs(gs, bucket)
    want = evaluate_with_decoder(batch, keys, PARAMS, num_devices=1, decoder="loop", batch=True,
                                 fusion=fusion)
    got = evaluate_batch(batch, keys, PARAMS, num_devices=1, fusion=fusion)
    assert_identical(want, got)


def test_padding_full_and_odd_buckets():
    rng = np.random.default_rng(3)
    graph = with_inputs(random_computation_graph(64, rng), rng)
    keys = rng.random((6, graph.chromosome_length(1))).astype(np.float32)
    results = []
    for bucket in (Bucket(64, 256, 256), Bucket(100, 256, 256)):  # full; odd, padded
        assert graph.num_ops <= bucket.num_ops
        padded, padded_keys = pad_graph(graph, bucket), pad_keys(keys, graph, bucket, 1)
        want = evaluate_with_decoder(padded, padded_keys, PARAMS, num_devices=1, decoder="loop")
        got = evaluate_with_decoder(padded, padded_keys, PARAMS, num_devices=1, decoder="dense")
        assert_identical(want, got)
        results.append(got)
    for other in results[1:]:  # padding is inert
        np.testing.assert_array_equal(other.order[:, :64], results[0].order[:, :64])
        for field in ("peak_memory", "runtime", "num_steps", "feasible", "excess"):
            np.testing.assert_array_equal(getattr(other, field), getattr(results[0], field))


def test_panels_above_1024_ops():
    # A 2,048-op bucket: the loop state is split in two panels of 1,024 ops.
    rng = np.random.default_rng(4)
    graph = with_inputs(random_computation_graph(1100, rng), rng)
    padded = pad_graph(graph)
    assert padded.bucket.num_ops == 2048
    keys = tie_keys(rng, graph, 3, False, padded.bucket)
    want = evaluate_with_decoder(padded, keys, PARAMS, num_devices=1, decoder="loop")
    got = evaluate_population(padded, keys, PARAMS, num_devices=1)
    assert_identical(want, got)


def test_unbatched_vmapped_and_sharded_entry_points():
    rng = np.random.default_rng(5)
    graph = with_inputs(random_computation_graph(50, rng), rng)
    padded = pad_graph(graph, BUCKET)
    keys = jnp.asarray(tie_keys(rng, graph, 4, False))
    want = evaluate_with_decoder(padded, keys, PARAMS, num_devices=1, decoder="loop")
    one = jax.jit(lambda k: evaluate(padded, k, PARAMS, num_devices=1))(keys[2])
    assert_identical(jax.tree.map(lambda x: x[2], want), one)
    assert_identical(want, jax.jit(jax.vmap(
        lambda k: evaluate(padded, k, PARAMS, num_devices=1)))(keys))
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("population",))
    keys = jnp.concatenate([keys] * len(jax.devices()))
    want = evaluate_with_decoder(padded, keys, PARAMS, num_devices=1, decoder="loop")
    assert_identical(want, evaluate_population_sharded(padded, keys, PARAMS, num_devices=1,
                                                       mesh=mesh))
    assert_identical(want, evaluate_with_decoder(padded, keys, PARAMS, num_devices=1,
                                                 decoder="dense", mesh=mesh))


def test_the_switch_is_static_by_bucket_devices_and_scheduler(monkeypatch):
    assert dense.DENSE_MAX_OPS == 2048
    assert dense.dense_applies(8, 1, backend="cpu") and dense.dense_applies(2048, 1, "list", "cpu")
    assert not dense.dense_applies(4096, 1, backend="cpu")
    assert not dense.dense_applies(512, 1, "priority") and not dense.dense_applies(512, 1, "fifo")
    assert not dense.dense_applies(512, 1, backend="gpu")
    assert dense.dense_applies(512, 1) == (jax.default_backend() == "cpu")

    calls = []
    for name in ("dense_order", "dense_multi_order"):  # D = 1, D ≥ 2
        real = getattr(evaluate_module, name)
        monkeypatch.setattr(evaluate_module, name,
                            lambda *a, real=real, **k: calls.append(1) or real(*a, **k))

    def traces_dense(num_ops, num_devices, scheduler="list", fusion=False):
        """Whether tracing evaluate_population (fresh shapes: no trace cache) uses a dense
        decode."""
        bucket = Bucket(num_ops, 2 * num_ops + 3, 2 * num_ops + 5)
        graph = jax.tree.map(jnp.asarray, pad_graph(random_computation_graph(5, 0), bucket))
        keys = jnp.zeros((3, bucket.chromosome_length(num_devices, fusion)), jnp.float32)
        del calls[:]
        jax.eval_shape(lambda g, k: evaluate_population(
            g, k, num_devices=num_devices, scheduler=scheduler, fusion=fusion), graph, keys)
        return bool(calls)

    if jax.default_backend() != "cpu":
        assert not traces_dense(24, 1)
        return
    assert traces_dense(24, 1) and traces_dense(24, 1, fusion=True)
    assert traces_dense(2048, 1)
    assert not traces_dense(4096, 1)
    assert traces_dense(24, 2) and traces_dense(24, 3, fusion=True)
    assert not traces_dense(2 * dense.DENSE_MULTI_MAX_OPS, 2)
    assert not traces_dense(24, 1, "priority") and not traces_dense(24, 2, "fifo")


def test_decoder_settings_are_checked():
    graph = pad_graph(random_computation_graph(10, 0))
    keys = np.zeros((2, graph.bucket.chromosome_length(2)), np.float32)
    with pytest.raises(ValueError, match="unknown decoder"):
        evaluate_with_decoder(graph, keys, num_devices=2, decoder="fast")


def test_compiles_once_per_bucket_with_one_device():
    rng = np.random.default_rng(6)
    bucket = Bucket(64, 160, 160)
    before = evaluate_population._cache_size()
    for n in (20, 33, 50):
        g = random_computation_graph(n, rng)
        keys = pad_keys(rng.random((3, g.chromosome_length(1))), g, bucket, 1)
        evaluate_population(pad_graph(g, bucket), keys, CostParams(0.0, 1e3, 1e9),
                            num_devices=1)
    assert evaluate_population._cache_size() - before == 1


def test_bench_reports_both_decoders(tmp_path):
    from eval import bench_cost_model as bench

    output = tmp_path / "benchmarks.md"
    results = bench.main(["--sizes", "20", "--devices", "1", "--population", "8", "--repeats",
                          "1", "--chunks", "", "--sweep-populations", "", "--batch-graphs", "0",
                          "--schedulers", "", "--decoder-sizes", "20", "--decoder-population",
                          "8", "--output", str(output), "--section-title", "T"])
    decoders = {(c.decoder, c.num_devices, c.sharded) for c in results if c.decoder != "auto"}
    assert {(decoder, d, False) for decoder in ("loop", "dense") for d in (1, 2)} <= decoders
    text = output.read_text()
    assert "**Decoders**" in text
    for decoder in ("loop", "dense"):
        for d in (1, 2):
            assert re.search(rf"\| {decoder} \| 20 \| 32/[0-9/,]+ \| {d} \|", text), (decoder, d)
