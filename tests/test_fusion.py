"""SPEC §8.3 fusion in the jitted cost model, against SPEC §8.4 and the independent reference
(tests/reference_exec.py), under every scheduler, with padding, batching and compile checks.

Random cases use durations exact in float32 (tests/test_exec_model.py's ``random_case``), so
the reference's exact ties are ties here too: placement, groups, order and times compare
exactly; peaks and runtime to 1e-6 relative.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from gsched import random_computation_graph
from gsched.core.padding import Bucket, batch_graphs, pad_graph, pad_keys
from gsched.costmodel.evaluate import evaluate_batch, evaluate_population, order_keys
from gsched.costmodel.fusion import _dedup_sorted, contract, fusion_roots
from gsched.costmodel.host import evaluate_graph, evaluate_order
from gsched.costmodel.params import check_cost_params
from tests import reference_exec as rx
from tests.graphs import chain, diamond
from tests.test_exec_model import BUCKET, SCHEDULERS, exact_durations, random_case

D1_KEYS = [.5] * 4 + [.9, .8, .7, .1] + [.5] * 4
FUSE = [0, .9, .6, 0]


def op(j):
    return ["op", j]


def assert_matches_reference(graph, keys, d, scheduler, bucket=None, **params):
    got = evaluate_graph(graph, keys, d, scheduler=scheduler, bucket=bucket, fusion=True,
                         **params)
    want = rx.evaluate(graph, [float(k) for k in keys], d, scheduler=scheduler, fusion=True,
                       **params)
    assert got["placement"] == want["placement"]
    assert got["fusion"] == want["fusion"]
    assert [tuple(item) for item in got["order"]] == want["order"]
    np.testing.assert_allclose(got["device_peaks"], want["device_peaks"], rtol=1e-6)
    np.testing.assert_allclose(got["runtime"], want["runtime"], rtol=1e-6)
    assert got["feasible"] == want["feasible"]
    if scheduler != "list":
        times = [want["times_exact"][item] for item in want["order"]]
        np.testing.assert_allclose(got["start"], [float(s) for s, _ in times], rtol=1e-6)
        np.testing.assert_allclose(got["end"], [float(e) for _, e in times], rtol=1e-6)
    return got


# ---------------------------------------------------------------------------------------------
# SPEC §8.4 (fusion rows)
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_row1_fusion(scheduler):
    got = assert_matches_reference(diamond(), D1_KEYS + FUSE, 1, scheduler)
    assert got["fusion"] == [0, 3, 3, 3]  # {a}, {b, c, d} with root d
    assert got["order"] == [op(0), op(3)]
    assert got["device_peaks"] == [10.0] and got["runtime"] == 10.0


def test_row2_fusion_roofline():
    # a: max(2, 4/1) = 4; G reads t0 (4), writes t3 (1): max(3 + 4 + 1, 5) = 8.
    got = assert_matches_reference(diamond(), D1_KEYS + FUSE, 1, "list", hbm_bandwidth=1.0)
    assert got["order"] == [op(0), op(3)] and got["runtime"] == 12.0


def test_row4_fusion_capacity():
    # Visiting b (.9) first: {b, d} holds t1 (2) ≤ 4; then c (.6): + t2 (3) = 5 > 4, skipped.
    got = assert_matches_reference(diamond(), D1_KEYS + FUSE, 1, "list", fusion_capacity=4.0)
    assert got["fusion"] == [0, 3, 2, 3] and got["order"] == [op(0), op(2), op(3)]
    assert got["device_peaks"] == [12.0] and got["runtime"] == 10.0
    # Equal to the capacity is allowed.
    assert evaluate_graph(diamond(), D1_KEYS + FUSE, 1, fusion=True,
                          fusion_capacity=5.0)["fusion"] == [0, 3, 3, 3]


# ---------------------------------------------------------------------------------------------
# Random cross-checks against the reference
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_random_graphs_match_reference(d, scheduler):
    for seed in range(4):
        rng, graph = random_case(100 + 10 * d + seed)
        keys = rng.random(graph.chromosome_length(d) + graph.num_ops).astype(np.float32)
        if d > 1 and seed == 1:  # few devices used: many same-device candidates
            keys[: graph.num_ops * d] = np.round(keys[: graph.num_ops * d] * 1.2)
        if seed == 3:  # exact ties between fusion keys and priorities
            keys = np.round(keys * 4) / 4
        params = {"latency": float(rng.choice([0.0, 0.5])),
                  "bandwidth": float(rng.choice([np.inf, 8192.0]))}
        if seed % 2 == 0:
            params |= {"hbm_bandwidth": float(rng.choice([1024.0, 16384.0])),
                       "launch_overhead": float(rng.choice([0.0, 0.25])),
                       "fusion_capacity": float(np.round(graph.tensor_size.sum() / 8))}
        got = assert_matches_reference(graph, keys, d, scheduler, bucket=BUCKET, **params)
        assert len(got["order"]) <= graph.num_ops + graph.num_tensors * (d - 1)


def test_random_graphs_fuse_something():
    # The cross-checks above would pass vacuously if nothing fused: make sure groups form.
    fused = 0
    for seed in range(6):
        rng, graph = random_case(200 + seed)
        keys = rng.random(graph.chromosome_length(1) + graph.num_ops)
        got = evaluate_graph(graph, keys, 1, fusion=True, bucket=BUCKET)
        fused += sum(root != j for j, root in enumerate(got["fusion"]))
    assert fused >= 10


def test_tens_of_gigabytes_stay_exact():
    rng = np.random.default_rng(21)
    graph = exact_durations(random_computation_graph(50, rng))
    sizes = np.round(graph.tensor_size / graph.tensor_size.max() * 2**24) * 1024
    graph = graph.replace(tensor_size=sizes, compute_cost=graph.compute_cost * 64)
    keys = rng.random(graph.chromosome_length(2) + graph.num_ops).astype(np.float32)
    for scheduler in SCHEDULERS:
        assert_matches_reference(graph, keys, 2, scheduler, bucket=BUCKET, latency=0.5,
                                 bandwidth=2.0**27, hbm_bandwidth=2.0**30,
                                 fusion_capacity=float(np.sort(sizes)[-5]))


# ---------------------------------------------------------------------------------------------
# No fusion = the model without fusion; padding; batching; compiles
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_no_candidate_is_the_model_without_fusion(scheduler):
    rng, graph = random_case(9)
    keys = rng.random((4, graph.chromosome_length(2)))
    base = pad_keys(keys, graph, BUCKET, 2)
    off = pad_keys(np.concatenate([keys, 0.49 * np.ones((4, graph.num_ops))], 1), graph,
                   BUCKET, 2)
    params = check_cost_params(0.5, 8192.0, hbm_bandwidth=4096.0, launch_overhead=0.25)
    plain = evaluate_population(pad_graph(graph, BUCKET), base, params, num_devices=2,
                                scheduler=scheduler)
    fused = evaluate_population(pad_graph(graph, BUCKET), off, params, num_devices=2,
                                scheduler=scheduler, fusion=True)
    assert plain.fusion is None
    np.testing.assert_array_equal(fused.fusion[:, : graph.num_ops],
                                  np.broadcast_to(np.arange(graph.num_ops), (4, graph.num_ops)))
    for a, b in zip(jax.tree.leaves(plain), jax.tree.leaves(fused._replace(fusion=None))):
        np.testing.assert_array_equal(a, b)


def test_identity_contraction_keeps_the_graph():
    rng, graph = random_case(4)
    padded = pad_graph(graph, BUCKET)
    same = contract(padded, np.arange(BUCKET.num_ops, dtype=np.int32))
    for name in ("op_mask", "compute_cost", "temporary_memory", "tensor_mask",
                 "op_pair_start", "op_pair_end", "tensor_consumer_start", "tensor_consumer_end"):
        np.testing.assert_array_equal(getattr(same, name), getattr(padded, name), err_msg=name)
    # The relations are the same sets (the contraction re-sorts them).
    def pairs(g, a, b, m):
        return sorted(zip(np.asarray(getattr(g, a))[np.asarray(getattr(g, m))].tolist(),
                          np.asarray(getattr(g, b))[np.asarray(getattr(g, m))].tolist()))
    assert pairs(same, "edge_tensor", "edge_consumer", "edge_mask") == \
        pairs(padded, "edge_tensor", "edge_consumer", "edge_mask")
    assert pairs(same, "pair_producer", "pair_consumer", "pair_mask") == \
        pairs(padded, "pair_producer", "pair_consumer", "pair_mask")


@pytest.mark.parametrize("sizes", [(64, 32), (1 << 20, 1 << 15)], ids=["int32", "int64"])
def test_relation_dedup_sorts_and_packs_the_distinct_pairs(sizes):
    """The contraction's relation step against numpy, with a key that fits 30 bits and one that
    needs int64 (values near both sizes' tops, many repeats, a mask)."""
    rng = np.random.default_rng(0)
    size = 300
    first = rng.integers(sizes[0] - 6, sizes[0], size).astype(np.int32)
    second = rng.integers(sizes[1] - 6, sizes[1], size).astype(np.int32)
    mask = rng.random(size) < 0.7
    keep, a, b = jax.jit(_dedup_sorted, static_argnums=(2, 4))(mask, first, sizes[0], second,
                                                                 sizes[1])
    want = sorted(set(zip(first[mask].tolist(), second[mask].tolist())))
    assert 0 < len(want) < mask.sum()
    np.testing.assert_array_equal(keep, np.arange(size) < len(want))
    np.testing.assert_array_equal(np.stack([a, b], 1)[: len(want)], np.array(want))
    assert not np.any(np.asarray(a)[len(want):]) and not np.any(np.asarray(b)[len(want):])


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_padding_invariance(scheduler):
    rng, graph = random_case(7)
    keys = rng.random(graph.chromosome_length(2) + graph.num_ops).astype(np.float32)
    params = {"latency": 0.5, "bandwidth": 8192.0, "hbm_bandwidth": 4096.0,
              "fusion_capacity": float(graph.tensor_size.sum() / 4)}
    small = evaluate_graph(graph, keys, 2, scheduler=scheduler, fusion=True, **params)
    big = evaluate_graph(graph, keys, 2, scheduler=scheduler, fusion=True,
                         bucket=Bucket(128, 256, 512), **params)
    assert small == big


def test_batch_of_different_graphs_equals_one_by_one():
    rng = np.random.default_rng(3)
    graphs = [random_case(s)[1] for s in (1, 4, 8)]
    keys = np.stack([pad_keys(rng.random((2, g.chromosome_length(2) + g.num_ops)), g, BUCKET, 2)
                     for g in graphs])
    params = check_cost_params(0.5, 8192.0, hbm_bandwidth=4096.0, fusion_capacity=5e3)
    batch = evaluate_batch(batch_graphs(graphs, BUCKET), keys, params, num_devices=2,
                           scheduler="priority", fusion=True)
    for i, g in enumerate(graphs):
        one = evaluate_population(pad_graph(g, BUCKET), keys[i], params, num_devices=2,
                                  scheduler="priority", fusion=True)
        row = jax.tree.map(lambda x, i=i: x[i], batch)
        for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(row)):
            np.testing.assert_array_equal(a, b)


def test_compiles_once_per_bucket_and_mode():
    rng = np.random.default_rng(13)
    bucket = Bucket(32, 64, 128)
    before = evaluate_population._cache_size()
    traces = []
    for fusion in (True, False, True):
        for n in (10, 20):
            g = random_computation_graph(n, rng)
            length = g.chromosome_length(2) + (g.num_ops if fusion else 0)
            keys = pad_keys(rng.random((3, length)), g, bucket, 2)
            params = check_cost_params(fusion_capacity=float(rng.choice([np.inf, 100.0])))
            evaluate_population(pad_graph(g, bucket), keys, params, num_devices=2,
                                scheduler="fifo", fusion=fusion)
            traces.append(evaluate_population._cache_size() - before)
    assert traces == [1, 1, 2, 2, 2, 2]


def test_fusion_roots_are_in_trees_on_one_device():
    rng, graph = random_case(11)
    padded = pad_graph(graph, BUCKET)
    device = rng.integers(0, 2, BUCKET.num_ops).astype(np.int32)
    keys = rng.random(BUCKET.num_ops).astype(np.float32)
    root = np.asarray(fusion_roots(padded, device, keys, np.float32(np.inf)))
    n = graph.num_ops
    assert (root[n:] == np.arange(n, BUCKET.num_ops)).all()  # padding stays alone
    for j in range(n):
        r = root[j]
        assert root[r] == r and device[j] == device[r]
        if r != j:
            assert keys[j] >= 0.5 and not graph.is_input[j]


@pytest.mark.parametrize("case", ["chain", 3, 4, 6, 7, 8])
def test_roots_without_a_capacity_are_the_greedy_merges(case):
    """Without a capacity the roots come from pointer jumping; with one that no group can
    exceed (every op's outputs together) they come from the greedy loop: the same roots, on a
    chain as long as the bucket (the longest jump) and on random graphs with random keys."""
    if case == "chain":
        rng, graph = np.random.default_rng(0), chain(BUCKET.num_ops)
        keys = np.ones(BUCKET.num_ops, np.float32)
    else:
        rng, graph = random_case(case)
        keys = rng.random(BUCKET.num_ops).astype(np.float32)
    padded = pad_graph(graph, BUCKET)
    device = rng.integers(0, 2, BUCKET.num_ops).astype(np.int32) * (case != "chain")
    everything = np.float32(2 * np.sum(graph.tensor_size) + 1)
    roots = [np.asarray(fusion_roots(padded, device, keys, np.float32(c)))
             for c in (np.inf, everything)]
    np.testing.assert_array_equal(*roots)
    assert len(np.unique(roots[0][: graph.num_ops])) < graph.num_ops  # something fused
    if case == "chain":
        assert (roots[0][: graph.num_ops] == graph.num_ops - 1).all()


# ---------------------------------------------------------------------------------------------
# Explicit orders, chromosome lengths, bad settings
# ---------------------------------------------------------------------------------------------

def test_explicit_order_with_greedy_fusion():
    # Every fusion key 1 (the default of evaluate_order with fusion): {a}, {b, c, d}.
    got = evaluate_order(diamond(), [0, 1, 2, 3], fusion=True)
    assert got["fusion"] == [0, 3, 3, 3] and got["order"] == [op(0), op(3)]
    none = evaluate_order(diamond(), [0, 1, 2, 3], fusion=True, fusion_keys=[0, 0, 0, 0])
    assert none["fusion"] == [0, 1, 2, 3] and len(none["order"]) == 4
    with pytest.raises(ValueError, match="fusion_keys need fusion=True"):
        evaluate_order(diamond(), [0, 1, 2, 3], fusion_keys=[1, 1, 1, 1])


def test_order_keys_then_fusion_keys_is_a_fusion_chromosome():
    g = diamond()
    padded = pad_graph(g)
    keys = order_keys(padded, np.arange(padded.bucket.num_ops, dtype=np.int32),
                      np.zeros(padded.bucket.num_ops, np.int32), 1)
    fuse = np.zeros(padded.bucket.num_ops, np.float32)
    fuse[:4] = FUSE
    ev = evaluate_population(padded, np.concatenate([keys, fuse])[None], num_devices=1,
                             fusion=True)
    assert ev.fusion[0, :4].tolist() == [0, 3, 3, 3]


def test_bad_lengths_and_settings_are_rejected():
    g = diamond()
    with pytest.raises(ValueError, match="fusion needs N fusion keys"):
        evaluate_graph(g, D1_KEYS, 1, fusion=True)
    with pytest.raises(ValueError, match="only allowed with fusion on"):
        evaluate_graph(g, D1_KEYS + FUSE, 1)
    padded = pad_graph(g)
    with pytest.raises(ValueError, match=r"N·D \+ N \+ T·D \+ N \(fusion on\)"):
        evaluate_population(padded, pad_keys(np.array(D1_KEYS), g, padded.bucket, 1)[None],
                            num_devices=1, fusion=True)
    with pytest.raises(TypeError, match="fusion must be a bool"):
        evaluate_graph(g, D1_KEYS + FUSE, 1, fusion="yes")
    with pytest.raises(ValueError, match="fusion_capacity must be >= 0"):
        check_cost_params(fusion_capacity=-1.0)
    with pytest.raises(ValueError, match="fusion_capacity must be >= 0"):
        evaluate_graph(g, D1_KEYS + FUSE, 1, fusion=True, fusion_capacity=float("nan"))
