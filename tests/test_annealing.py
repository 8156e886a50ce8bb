"""Simulated annealing (GO's SA baseline): exact budget, results that re-evaluate, frozen genes,
the diamond's optimum, padding invariance, one compile per bucket, setting checks."""

import jax
import numpy as np
import pytest

from gsched import batch_graphs, random_computation_graph
from gsched.core.padding import Bucket, bucket_for
from gsched.costmodel.evaluate import evaluate_batch, score
from gsched.costmodel.params import CostParams
from gsched.search import random as random_search
from gsched.search.annealing import run_batch
from tests.graphs import diamond

GRAPHS = [random_computation_graph(n, seed) for seed, n in ((0, 8), (1, 11))]
BUCKET = bucket_for(GRAPHS)
PARAMS = CostParams(0.5, 1e4, float("inf"))


def reevaluate(graphs, out, params, *, num_devices, objective, scheduler="list", fusion=False):
    kwargs = {"fusion": True} if fusion else {}
    evaluation = evaluate_batch(graphs, out.best_keys[:, None], params, num_devices=num_devices,
                                scheduler=scheduler, **kwargs)
    return np.asarray(score(evaluation, objective, params))[:, 0]


def parts(keys, bucket, num_devices, fusion=False):
    """Affinities [..., N, D], op priorities [..., N], transfer keys [..., T, D], fusion keys."""
    keys = np.asarray(keys)
    n, t, d = bucket.num_ops, bucket.num_tensors, num_devices
    lead = keys.shape[:-1]
    base = n * d + n + t * d
    return (keys[..., :n * d].reshape(lead + (n, d)), keys[..., n * d:n * d + n],
            keys[..., n * d + n:base].reshape(lead + (t, d)),
            keys[..., base:] if fusion else None)


def test_consistent_deterministic_exact_budget_one_compile():
    graphs = batch_graphs(GRAPHS, BUCKET)
    kwargs = {"num_devices": 2, "budget": 37, "objective": "runtime", "cost_params": PARAMS,
              "chains": 8}
    out = run_batch(jax.random.key(3), graphs, **kwargs)
    compiled = run_batch._cache_size()
    again = run_batch(jax.random.key(3), graphs, **kwargs)
    other = run_batch(jax.random.key(4), graphs, **kwargs)
    assert run_batch._cache_size() == compiled  # a new key does not recompile
    np.testing.assert_array_equal(out.best_keys, again.best_keys)
    np.testing.assert_array_equal(out.best_value, again.best_value)
    assert out.evals_used.tolist() == [37, 37]
    assert out.best_keys.shape == (2, BUCKET.chromosome_length(2))
    assert np.all(np.isfinite(out.best_value)) and np.all(np.isfinite(other.best_value))
    np.testing.assert_allclose(reevaluate(graphs, out, PARAMS, num_devices=2,
                                          objective="runtime"),
                               np.asarray(out.best_value), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(out.best_evaluation.runtime),
                               np.asarray(out.best_value), rtol=1e-6)


def test_never_worse_than_its_own_initial_chromosomes():
    # budget == chains: only the initial chromosomes are evaluated (the same ones as below).
    graphs = batch_graphs(GRAPHS, BUCKET)
    kwargs = {"num_devices": 1, "objective": "peak_memory", "chains": 6}
    start = run_batch(jax.random.key(1), graphs, budget=6, **kwargs)
    annealed = run_batch(jax.random.key(1), graphs, budget=120, **kwargs)
    assert annealed.evals_used.tolist() == [120, 120]
    assert np.all(np.asarray(annealed.best_value) <= np.asarray(start.best_value))
    np.testing.assert_allclose(reevaluate(graphs, annealed, CostParams(), num_devices=1,
                                          objective="peak_memory"),
                               np.asarray(annealed.best_value), rtol=1e-6)


DIAMOND_PARAMS = CostParams()  # free transfers: the optimum is the critical path
DIAMOND_KW = {"num_devices": 2, "budget": 200, "objective": "runtime",
              "cost_params": DIAMOND_PARAMS, "chains": 8}


def test_finds_the_diamonds_optimum():
    # a (2) then b (3) and c (4) on different devices, then d (1): runtime 7, the critical path
    # a→c→d (a lower bound); one device needs 10.
    graphs = batch_graphs([diamond()])
    out = run_batch(jax.random.key(0), graphs, **DIAMOND_KW)
    assert float(out.best_value[0]) == 7.0
    assert float(out.best_evaluation.runtime[0]) == 7.0
    placement = np.asarray(out.best_evaluation.placement[0])[:4]
    assert placement[1] != placement[2]  # b and c run in parallel
    # Observation only: random search with the same budget.
    rand = random_search.run_batch(jax.random.key(0), graphs, num_devices=2, budget=200,
                                   objective="runtime", cost_params=DIAMOND_PARAMS)
    print(f"diamond D=2 runtime: SA {float(out.best_value[0])}, "
          f"random {float(rand.best_value[0])}")


def test_padding_invariance():
    small, large = bucket_for(diamond()), Bucket(16, 16, 16)
    assert small != large
    outs = [run_batch(jax.random.key(5), batch_graphs([diamond()], b), **DIAMOND_KW)
            for b in (small, large)]
    np.testing.assert_array_equal(outs[0].best_value, outs[1].best_value)
    for a, b in zip(parts(outs[0].best_keys, small, 2), parts(outs[1].best_keys, large, 2)):
        if a is not None:  # the real ops' (4) and tensors' (4) genes are identical
            np.testing.assert_array_equal(a[:, :4], b[:, :4])


def test_placement_genes_leave_priorities_at_half():
    bucket = bucket_for(diamond())
    graphs = batch_graphs([diamond()], bucket)
    out = run_batch(jax.random.key(2), graphs, num_devices=2, budget=40, objective="runtime",
                    cost_params=DIAMOND_PARAMS, genes="placement", chains=4)
    _, priority, transfer, _ = parts(out.best_keys, bucket, 2)
    assert np.all(priority == 0.5) and np.all(transfer == 0.5)
    assert out.evals_used.tolist() == [40]
    np.testing.assert_allclose(reevaluate(graphs, out, DIAMOND_PARAMS, num_devices=2,
                                          objective="runtime"),
                               np.asarray(out.best_value), rtol=1e-6)


@pytest.mark.parametrize("genes", ["all", "placement+schedule"])
def test_fusion(genes):
    graphs = batch_graphs(GRAPHS, BUCKET)
    params = CostParams(0.5, 1e4, float("inf"), hbm_bandwidth=1e3, launch_overhead=0.1)
    out = run_batch(jax.random.key(7), graphs, num_devices=2, budget=30, objective="runtime",
                    cost_params=params, fusion=True, genes=genes, chains=8)
    assert out.best_keys.shape == (2, BUCKET.chromosome_length(2, fusion=True))
    assert out.evals_used.tolist() == [30, 30]
    fusion_keys = parts(out.best_keys, BUCKET, 2, fusion=True)[3]
    if genes == "placement+schedule":
        assert np.all(fusion_keys == 0.0)
    else:
        assert np.all((fusion_keys >= 0) & (fusion_keys <= 1))
    np.testing.assert_allclose(reevaluate(graphs, out, params, num_devices=2,
                                          objective="runtime", fusion=True),
                               np.asarray(out.best_value), rtol=1e-6)


def test_one_device_placement_only_has_nothing_to_search():
    with pytest.raises(ValueError, match="nothing to search"):
        run_batch(jax.random.key(0), batch_graphs(GRAPHS, BUCKET), num_devices=1, budget=10,
                  genes="placement")


@pytest.mark.parametrize("kwargs, match", [
    ({"budget": 0}, "budget"),
    ({"num_devices": 0}, "num_devices"),
    ({"objective": "latency"}, "objective"),
    ({"scheduler": "lifo"}, "scheduler"),
    ({"genes": "fusion"}, "genes"),
    ({"chains": 0}, "chains"),
    ({"chains": 2.0}, "chains"),
    ({"initial_temperature": 0.0}, "initial_temperature"),
    ({"final_temperature": float("nan")}, "final_temperature"),
    ({"initial_temperature": float("inf")}, "initial_temperature"),
    ({"initial_temperature": 0.01, "final_temperature": 0.1}, "initial_temperature"),
])
def test_bad_settings(kwargs, match):
    settings = {"num_devices": 2, "budget": 10} | kwargs
    with pytest.raises(ValueError, match=match):
        run_batch(jax.random.key(0), batch_graphs(GRAPHS, BUCKET), **settings)


def test_fusion_must_be_a_bool():
    with pytest.raises(TypeError, match="fusion"):
        run_batch(jax.random.key(0), batch_graphs(GRAPHS, BUCKET), num_devices=2, budget=10,
                  fusion="yes")


def test_needs_a_batch():
    from gsched.core.padding import pad_graph
    with pytest.raises(ValueError, match="leading"):
        run_batch(jax.random.key(0), pad_graph(GRAPHS[0], BUCKET), num_devices=2, budget=10)


def test_seeds_are_the_chains_starts():
    """Chain ``c`` starts from seed ``c mod S``: with one step (budget = chains) the result is
    the best seed; with more, never worse than it; too many seeds or a bad shape are refused."""
    graphs = batch_graphs(GRAPHS, BUCKET)
    length = BUCKET.chromosome_length(2)
    seeds = np.random.default_rng(0).random((2, 3, length), np.float32)
    values = np.asarray(score(evaluate_batch(graphs, seeds, PARAMS, num_devices=2), "runtime",
                              PARAMS))
    common = dict(num_devices=2, objective="runtime", cost_params=PARAMS, chains=4,
                  seeds=seeds)
    first = run_batch(jax.random.key(0), graphs, budget=4, **common)
    np.testing.assert_allclose(np.asarray(first.best_value), values.min(axis=1), rtol=1e-6)
    longer = run_batch(jax.random.key(0), graphs, budget=80, **common)
    assert np.all(np.asarray(longer.best_value) <= np.asarray(first.best_value))
    shared = run_batch(jax.random.key(0), graphs, budget=4, **common | {"seeds": seeds[0]})
    same = np.broadcast_to(seeds[0], seeds.shape)  # [S, L]: every graph's seeds
    np.testing.assert_allclose(np.asarray(shared.best_value), np.asarray(score(evaluate_batch(
        graphs, same, PARAMS, num_devices=2), "runtime", PARAMS)).min(axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match=r"5 seeds do not fit: at most 4 \(one per chain"):
        run_batch(jax.random.key(0), graphs, budget=80, **common | {
            "seeds": np.zeros((5, length), np.float32)})
    with pytest.raises(ValueError, match="seeds must have shape"):
        run_batch(jax.random.key(0), graphs, budget=80, **common | {"seeds": seeds[..., 1:]})
