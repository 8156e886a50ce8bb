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
