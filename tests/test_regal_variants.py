"""The shipped REGAL-family checkpoints: ``regal`` / ``idrs`` pick the shipped policy of the
run's objective, an explicit checkpoint wins, every row says which policy ran, and ``gas``
runs from its shipped LSTM checkpoint (tiny graphs and budget)."""

import pytest

from gsched.costmodel.params import OBJECTIVES
from gsched.generators import random_computation_graph
from gsched.methods import optimize
from gsched.policies.regal.checkpoint import CHECKPOINTS
from gsched.policies.regal.gnn import SequenceEncoder
from gsched.policies.regal.method import build_gas, build_idrs, build_regal


@pytest.mark.parametrize("build", [build_regal, build_idrs])
def test_default_checkpoint_follows_the_objective(build):
    runner = build()
    assert runner.info("peak_memory") == {"checkpoint": "shipped:regal_large",
                                          "policy_objective": "peak_memory"}
    assert runner.info("runtime") == {"checkpoint": "shipped:regal_runtime",
                                      "policy_objective": "runtime"}
    assert runner.policies["peak_memory"][0] is not runner.policies["runtime"][0]


def test_explicit_checkpoint_serves_every_objective():
    path = str(CHECKPOINTS / "regal")
    runner = build_regal(checkpoint=path)
    for objective in OBJECTIVES:  # the peak-memory policy on runtime: visible in the info
        assert runner.info(objective) == {"checkpoint": path, "policy_objective": "peak_memory"}
    assert runner.policies["peak_memory"][0] is runner.policies["runtime"][0]


def test_gas_checkpoint_is_refused_by_regal():
    with pytest.raises(ValueError, match="encoder 'gnn'.*has 'lstm'"):
        build_regal(checkpoint=CHECKPOINTS / "gas")
    with pytest.raises(ValueError, match="encoder 'lstm'.*has 'gnn'"):
        build_gas(checkpoint=CHECKPOINTS / "regal_runtime")


def test_shipped_gas_runs_a_tiny_budget():
    """One compiled search; on runtime the peak-memory GAS policy is a visible transfer."""
    assert isinstance(build_gas().policies["runtime"][0].encoder, SequenceEncoder)
    graphs = [random_computation_graph(8, 21), random_computation_graph(12, 22)]
    outcome = optimize("gas", graphs, num_devices=2, budget=420, objective="runtime", seed=0)
    for graph, row in zip(graphs, outcome.results):
        assert row["evals_used"] == 420 and row["value"] == row["runtime"] > 0
        assert sorted(i[1] for i in row["order"] if i[0] == "op") == list(range(graph.num_ops))
        assert row["checkpoint"] == "shipped:gas" and row["policy_objective"] == "peak_memory"


@pytest.mark.parametrize("num_devices", [2, 3])
def test_pinned_seeds_evaluate_as_the_solutions_they_are(num_devices):
    """``pin_seeds`` relabels devices so the pinned op is on device 0: under the pin each
    chromosome scores what it scores unpinned (peaks and runtime), where unrelabelled the pin
    changes most of them."""
    import jax
    import numpy as np

    from gsched.core.padding import batch_graphs, bucket_for
    from gsched.costmodel.evaluate import evaluate_batch
    from gsched.costmodel.params import CostParams
    from gsched.policies.regal.features import pinned_ops
    from gsched.policies.regal.rollout import pin_seeds

    unpadded = [random_computation_graph(n, n) for n in (14, 20)]
    graphs = batch_graphs(unpadded, bucket_for(unpadded))
    ops, tensors = graphs.op_mask.shape[-1], graphs.tensor_mask.shape[-1]
    keys = jax.random.uniform(jax.random.PRNGKey(num_devices),
                              (2, 32, ops * (num_devices + 1) + tensors * num_devices))
    pinned, costs = pinned_ops(graphs), CostParams(latency=0.5, bandwidth=100.0)
    free = evaluate_batch(graphs, keys, costs, num_devices=num_devices)
    moved = evaluate_batch(graphs, pin_seeds(keys, pinned, ops, num_devices), costs,
                           num_devices=num_devices, pinned=pinned)
    as_is = evaluate_batch(graphs, keys, costs, num_devices=num_devices, pinned=pinned)
    for field in ("peak_memory", "runtime"):
        np.testing.assert_array_equal(getattr(moved, field), getattr(free, field))
        assert np.mean(getattr(as_is, field) != getattr(free, field)) > 0.3


@pytest.mark.parametrize("method", ["regal", "idrs"])
def test_seed_from_starts_the_policy_search(method):
    """``--seed-from metis`` through ``optimize``: counted, named, never worse than METIS; and
    at the rollout, a strong seed (BRKGA's best of 3,000, relabelled by the pin) is reached
    (or bettered) with a budget at which the unseeded search does not reach it."""
    import jax
    import numpy as np

    from gsched.core.padding import batch_graphs, bucket_for
    from gsched.policies.regal.rollout import guided_search
    from gsched.search import brkga

    graphs = [random_computation_graph(16, 31), random_computation_graph(22, 32)]
    common = dict(num_devices=2, objective="runtime", seed=4)
    alone = optimize("metis", graphs, budget=1, **common).results
    seeded = optimize(method, graphs, budget=420, options={"seed_from": "metis"},
                      **common).results
    for row, metis in zip(seeded, alone):
        assert row["evals_used"] == 420 and row["seed_from"] == "metis"
        assert row["value"] <= metis["value"]
    larger = [random_computation_graph(n, n) for n in (40, 50)]
    padded = batch_graphs(larger, bucket_for(larger))
    strong = brkga.run_batch(jax.random.PRNGKey(9), padded, num_devices=2, budget=3000,
                             objective="runtime")
    runner = {"regal": build_regal, "idrs": build_idrs}[method]()
    policy, feature_evals, _ = runner.policies["runtime"]
    run = dict(num_devices=2, budget=feature_evals + 10, objective="runtime",
               search=runner.search, feature_evals=feature_evals)
    key = jax.random.PRNGKey(0)
    cost = brkga.CostParams()
    started = guided_search(key, policy, padded, cost, seeds=strong.best_keys[:, None], **run)
    unseeded = guided_search(key, policy, padded, cost, **run)
    assert np.all(started.best_value <= strong.best_value)
    assert np.all(unseeded.best_value > strong.best_value)


def test_seed_from_budget_error_names_the_users_budget():
    """A budget the seeds leave too small for the feature search: the error gives the budget
    asked for and what the seeds took, not only the search's remainder."""
    graphs = [random_computation_graph(16, 31)]
    with pytest.raises(ValueError, match=r"budget 398 must exceed the 400 .*: 400 less the 2 "
                                         r"evaluation\(s\) of the seeds of metis, gp_dfs"):
        optimize("regal", graphs, budget=400, num_devices=2, objective="runtime",
                 options={"seed_from": "metis,gp_dfs"})
