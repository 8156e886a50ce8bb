"""Topoformer-seeded BRKGA (``topoformer_brkga``): rank Betas, seed chromosomes, the exact
budget, never worse than the Topoformer's order, padding, one compilation per bucket, errors."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gsched import (
    CostParams,
    batch_graphs,
    bucket_for,
    layered_graph,
    pad_graph,
    random_computation_graph,
)
from gsched.methods import optimize
from gsched.policies.topoformer import checkpoint as topo_checkpoint
from gsched.policies.topoformer import hybrid
from gsched.policies.topoformer import method as topo_method
from gsched.policies.topoformer.model import Topoformer, TopoformerConfig
from tests import reference_spec as ref

TINY = TopoformerConfig(num_layers=1, dim=8, heads_per_relation=1, head_dim=4, pe_dim=4)
GRAPHS = [layered_graph(12, 3), random_computation_graph(10, 1), layered_graph(14, 4)]
OTHERS = [layered_graph(13, 8), random_computation_graph(11, 6), layered_graph(12, 9)]
BIG = layered_graph(20, 0)  # batched with GRAPHS[0], pads it to a larger bucket (32 ops)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A randomly initialized tiny Topoformer export (its greedy orders are poor, so BRKGA
    has something to improve)."""
    path = tmp_path_factory.mktemp("hybrid") / "model"
    topo_checkpoint.save_model(path, Topoformer(TINY, jax.random.key(3)), TINY)
    return str(path)


def _real_keys(keys, graph, bucket):
    """A padded ``D = 1`` chromosome → the real one (SPEC §2 layout)."""
    n = bucket.num_ops
    return np.concatenate([keys[: graph.num_ops], keys[n: n + graph.num_ops],
                           keys[2 * n: 2 * n + graph.num_tensors]])


def _peak(graph, order):
    return ref.evaluate_order(graph, [0] * graph.num_ops, [("op", int(j)) for j in order],
                              1)["peak_memory"]


@functools.lru_cache(maxsize=1)
def _greedy_decoder(checkpoint):
    """The checkpoint's greedy decoding, jitted once (compiled once per bucket)."""
    model, config = topo_checkpoint.load_model(checkpoint)
    return jax.jit(lambda g: topo_method.decoded_orders(model, config, "greedy",
                                                        jax.random.key(0), g, 1))


def _greedy_orders(checkpoint, graphs, bucket):
    orders, best = _greedy_decoder(checkpoint)(batch_graphs(graphs, bucket))
    assert np.all(np.asarray(best) == 0)
    return [np.asarray(orders[b, 0, :g.num_ops]) for b, g in enumerate(graphs)]


def test_rank_betas_by_hand_and_as_order_statistics():
    mask = jnp.asarray([True, True, True, False])
    order = jnp.asarray([2, 0, 1, 3])  # positions: op 2 → 0, op 0 → 1, op 1 → 2
    np.testing.assert_allclose(hybrid.seed_keys(mask, order), [0.5, 0.25, 0.75, 0])
    alpha, beta = hybrid.rank_betas(mask, order, 2.0)  # κ m, κ (1 − m); padding 1
    np.testing.assert_allclose(alpha, [1.0, 0.5, 1.5, 1.0])
    np.testing.assert_allclose(beta, [1.0, 1.5, 0.5, 1.0])
    # κ = n + 1: the key of rank p (0 = largest) among n uniforms, Beta(n − p, p + 1).
    n = 7
    a, b = (np.asarray(x) for x in hybrid.rank_betas(jnp.ones(n, bool), jnp.arange(n), n + 1))
    np.testing.assert_allclose(a, n - np.arange(n), rtol=1e-6)
    np.testing.assert_allclose(b, np.arange(n) + 1, rtol=1e-6)
    keys = -np.sort(-np.random.default_rng(0).random((200_000, n)), axis=1)
    np.testing.assert_allclose(keys.mean(0), a / (a + b), atol=2e-3)
    np.testing.assert_allclose(keys.var(0), a * b / ((a + b) ** 2 * (a + b + 1)), rtol=3e-2)


def test_seed_chromosome_reproduces_topological_orders_and_params_layout():
    graph = random_computation_graph(15, 2)
    bucket = bucket_for(graph)
    padded = pad_graph(graph, bucket)
    rng = np.random.default_rng(1)
    for _ in range(5):  # random topological orders: SPEC §2 schedules of random priorities
        keys = rng.random(graph.chromosome_length(1))
        order = [j for _, j in ref.decode(graph, keys, 1)["order"]]
        full = jnp.asarray(order + list(range(graph.num_ops, bucket.num_ops)), jnp.int32)
        seed = np.asarray(hybrid.seed_chromosome(padded, full))
        assert seed.shape == (bucket.chromosome_length(1),) and ((seed >= 0) & (seed < 1)).all()
        decoded = ref.decode(graph, _real_keys(seed, graph, bucket), 1)["order"]
        assert [j for _, j in decoded] == order
    params = hybrid.mutant_params(padded, full, 2.0)
    n = bucket.num_ops
    alpha, beta = hybrid.rank_betas(padded.op_mask, full, 2.0)
    np.testing.assert_array_equal(params.alpha[n: 2 * n], alpha)
    np.testing.assert_array_equal(params.beta[n: 2 * n], beta)
    mean = np.where(padded.op_mask, alpha / (alpha + beta), 0)
    np.testing.assert_allclose(seed[n: 2 * n], mean, rtol=1e-6)  # the seed is the Beta mean
    for field in (params.alpha, params.beta):  # affinity and transfer genes stay uniform
        np.testing.assert_array_equal(np.concatenate([field[:n], field[2 * n:]]), 1.0)
    np.testing.assert_allclose(params.elite_bias, 0.7)


def test_budget_is_exact_never_worse_than_the_seed_and_compiles_once(checkpoint, monkeypatch):
    traces = []
    params = hybrid.mutant_params
    monkeypatch.setattr(hybrid, "mutant_params", lambda *a: (traces.append(1), params(*a))[1])
    bucket = bucket_for(GRAPHS)
    assert bucket_for(OTHERS) == bucket
    options = {"checkpoint": checkpoint, "decode": "greedy"}
    improved = 0
    for graphs, capacity in ((GRAPHS, None), (OTHERS, 1e12)):
        out = optimize("topoformer_brkga", graphs, num_devices=1, budget=300, seed=1,
                       options=options, cost_params=CostParams(capacity=capacity or np.inf))
        for g, seed_order, row in zip(graphs, _greedy_orders(checkpoint, graphs, bucket),
                                      out.results):
            assert row["evals_used"] == 300
            order = [j for _, j in row["order"]]
            assert row["value"] == pytest.approx(_peak(g, order), rel=1e-6)
            assert row["value"] <= _peak(g, seed_order) * (1 + 1e-6)
            improved += row["value"] < _peak(g, seed_order) * (1 - 1e-6)
    assert traces == [1]  # one trace for two batches of one bucket and two capacities
    assert improved > 0  # the tiny random model's orders leave room that BRKGA finds


def test_seeds_only_is_the_topoformer_order_in_any_bucket(checkpoint):
    """With ``budget = K`` only the seeds are evaluated: the graph padded to a larger bucket
    (batched with a bigger graph) gets exactly the order decoded in the smaller bucket."""
    graph = GRAPHS[0]
    small, big = bucket_for(GRAPHS), bucket_for([graph, BIG])
    assert big.num_ops > small.num_ops
    seed = _greedy_orders(checkpoint, GRAPHS, small)[0]
    row = optimize("topoformer_brkga", [graph, BIG], num_devices=1, budget=1,
                   options={"checkpoint": checkpoint, "decode": "greedy"}).results[0]
    assert row["evals_used"] == 1
    assert [j for _, j in row["order"]] == list(seed)
    assert row["value"] == pytest.approx(_peak(graph, seed), rel=1e-6)
    # Seeds and mutant Betas of the real genes do not depend on the bucket either.
    genes = []
    for bucket in (small, big):
        padded = pad_graph(graph, bucket)
        order = jnp.asarray(list(seed) + list(range(graph.num_ops, bucket.num_ops)))
        params = hybrid.mutant_params(padded, order, 2.0)
        genes.append([_real_keys(np.asarray(x), graph, bucket) for x in
                      (hybrid.seed_chromosome(padded, order), params.alpha, params.beta)])
    for a, b in zip(*genes):
        np.testing.assert_array_equal(a, b)


def test_seed_from_adds_the_heuristics_seeds_after_the_decoded_orders(checkpoint):
    """``--seed-from xla_list`` with a budget of exactly the seeds (greedy: one order, one
    list-scheduled order): the better of the two, both counted."""
    bucket = bucket_for(GRAPHS)
    rows = optimize("topoformer_brkga", GRAPHS, num_devices=1, budget=3, seed=1,
                    options={"checkpoint": checkpoint, "decode": "greedy",
                             "seed_from": "xla_list"}).results
    listed = optimize("xla_list", GRAPHS, num_devices=1, budget=1).results
    wins = 0
    for g, seed_order, row, alone in zip(GRAPHS, _greedy_orders(checkpoint, GRAPHS, bucket),
                                         rows, listed):
        assert row["evals_used"] == 3 and row["seed_from"] == "xla_list"
        assert row["value"] == pytest.approx(min(_peak(g, seed_order), alone["value"]),
                                             rel=1e-6)
        wins += alone["value"] < _peak(g, seed_order) * (1 - 1e-6)
    assert wins > 0  # the list order beats the tiny random model somewhere: its seed counts


def test_errors(checkpoint, tmp_path):
    graphs = GRAPHS[:1]
    with pytest.raises(ValueError, match="at most 1 device"):
        optimize("topoformer_brkga", graphs, num_devices=2, budget=100,
                 options={"checkpoint": checkpoint})
    with pytest.raises(ValueError, match="optimizes only peak_memory"):
        optimize("topoformer_brkga", graphs, num_devices=1, budget=100, objective="runtime",
                 options={"checkpoint": checkpoint})
    runner = hybrid.build_topoformer_brkga(checkpoint, "greedy")
    batch = batch_graphs(graphs, None)
    with pytest.raises(ValueError, match="single device"):
        runner(jax.random.key(0), batch, CostParams(), num_devices=2, budget=100,
               objective="peak_memory")
    with pytest.raises(ValueError, match="optimizes only peak_memory"):
        runner(jax.random.key(0), batch, CostParams(), num_devices=1, budget=100,
               objective="runtime")
    with pytest.raises(ValueError, match="python -m train.topoformer"):
        hybrid.build_topoformer_brkga(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="decode mode"):
        hybrid.build_topoformer_brkga(checkpoint, "topk")
    for bad in (0.0, -1.0, float("nan"), "2", True):
        with pytest.raises(ValueError, match="concentration"):
            hybrid.build_topoformer_brkga(checkpoint, concentration=bad)
    with pytest.raises(ValueError, match="does not take"):
        optimize("topoformer_brkga", graphs, num_devices=1, budget=100,
                 options={"checkpoint": checkpoint, "beam_size": 4})
