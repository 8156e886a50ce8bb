"""The searches and the registry under SPEC §8: the static scheduler and fusion threaded through
BRKGA, tuned BRKGA, random search and local search; frozen genes (GO's pl / pl+sch / pl+sch+fu);
heuristics scored with greedy fusion; methods that do not take the execution model refuse it."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from gsched import methods, random_computation_graph
from gsched.core.padding import Bucket, batch_graphs
from gsched.costmodel.evaluate import evaluate_batch, score
from gsched.costmodel.host import evaluate_order
from gsched.costmodel.params import check_cost_params
from gsched.search import brkga, local, random
from gsched.search.common import freeze_genes
from gsched.search.tuned import tuned_run_batch
from tests.graphs import diamond

BUCKET = Bucket(16, 32, 64)
COST = check_cost_params(0.5, 64.0, hbm_bandwidth=32.0, launch_overhead=0.25)


def graphs():
    rng = np.random.default_rng(5)
    return [random_computation_graph(12, rng), diamond()]


def small_brkga(key, g, **kw):
    return brkga.run_batch(key, g, brkga.BRKGAConfig(population_size=10, num_elites=2,
                                                     num_children=6, num_populations=1), **kw)


SEARCHES = {
    "brkga": small_brkga,
    "random": lambda key, g, **kw: random.run_batch(key, g, chunk_size=16, **kw),
    "local": lambda key, g, **kw: local.run_batch(key, g, neighbours=8, **kw),
}


@pytest.mark.parametrize("name", SEARCHES)
@pytest.mark.parametrize("scheduler,fusion", [("priority", True), ("fifo", False)])
def test_best_keys_reevaluate_under_the_model(name, scheduler, fusion):
    g = batch_graphs(graphs(), BUCKET)
    result = SEARCHES[name](jax.random.PRNGKey(0), g, num_devices=2, budget=40,
                            objective="runtime", cost_params=COST, scheduler=scheduler,
                            fusion=fusion)
    assert result.best_keys.shape[-1] == BUCKET.chromosome_length(2, fusion)
    assert (result.best_evaluation.fusion is None) != fusion
    again = evaluate_batch(g, result.best_keys[:, None], COST, num_devices=2,
                           scheduler=scheduler, fusion=fusion)
    np.testing.assert_array_equal(score(again, "runtime", COST)[:, 0], result.best_value)
    assert (np.asarray(result.evals_used) == 40).all()


@pytest.mark.parametrize("name", SEARCHES)
def test_frozen_genes_stay_frozen(name):
    g = batch_graphs(graphs(), BUCKET)
    n, d = BUCKET.num_ops, 2
    base = BUCKET.chromosome_length(d)
    for genes in ("placement", "placement+schedule"):
        result = SEARCHES[name](jax.random.PRNGKey(1), g, num_devices=d, budget=30,
                                objective="runtime", cost_params=COST, scheduler="fifo",
                                fusion=True, genes=genes)
        keys = np.asarray(result.best_keys)
        assert (keys[:, base:] == 0).all()  # no fusion searched
        if genes == "placement":
            assert (keys[:, n * d: base] == 0.5).all()
        else:
            assert not (keys[:, n * d: base] == 0.5).all()


def test_freeze_genes_layout():
    keys = np.random.default_rng(0).random((3, BUCKET.chromosome_length(2, True)), np.float32)
    same = freeze_genes(keys, BUCKET, 2, True, "all")
    np.testing.assert_array_equal(same, keys)
    frozen = np.asarray(freeze_genes(keys, BUCKET, 2, True, "placement"))
    np.testing.assert_array_equal(frozen[:, :32], keys[:, :32])  # affinities searched
    assert (frozen[:, 32:BUCKET.chromosome_length(2)] == 0.5).all()
    with pytest.raises(ValueError, match="unknown genes"):
        freeze_genes(keys, BUCKET, 2, True, "order")


def test_tuned_brkga_with_fusion():
    g = batch_graphs(graphs(), BUCKET)
    result = tuned_run_batch(jax.random.PRNGKey(0), g, COST, num_devices=2, budget=30,
                             objective="runtime", scheduler="priority", fusion=True)
    assert result.best_keys.shape[-1] == BUCKET.chromosome_length(2, True)


def test_optimize_threads_the_model_and_reports_fusion():
    gs = graphs()
    out = methods.optimize("brkga", gs, num_devices=2, budget=30, objective="runtime",
                           cost_params=COST, scheduler="priority", fusion=True,
                           options={"genes": "all"})
    for row in out.results:
        assert len(row["fusion"]) == row["num_ops"] and "start" in row
    # A heuristic is scored with every fusion key 1 (greedy fusion) ...
    heur = methods.optimize("tf_default", [diamond()], num_devices=2, budget=1,
                            objective="runtime", scheduler="fifo", fusion=True)
    assert heur.results[0]["fusion"] == [0, 3, 3, 3]
    assert heur.results[0] == {**heur.results[0], **evaluate_order(
        diamond(), [0, 1, 2, 3], np.zeros(4, int), 2, scheduler="fifo", fusion=True)}
    # ... and methods without the execution model refuse it.
    with pytest.raises(ValueError, match="only under the list scheduler without fusion"):
        methods.optimize("approx_dp", [diamond()], num_devices=1, budget=5, fusion=True)
    with pytest.raises(ValueError, match="unknown scheduler"):
        methods.optimize("brkga", [diamond()], num_devices=1, budget=5, scheduler="lifo")
    with pytest.raises(TypeError, match="fusion must be a bool"):
        methods.optimize("brkga", [diamond()], num_devices=1, budget=5, fusion=1)


@pytest.mark.parametrize("name", ["human_expert", "metis", "tf_default"])
def test_placement_baselines_are_registered(name):
    out = methods.optimize(name, [diamond()], num_devices=2, budget=1, objective="runtime",
                           scheduler="fifo")
    row = out.results[0]
    assert len(row["placement"]) == 4 and row["runtime"] > 0
