"""The method registry (``gsched.methods``): one entry point for the CLI and the harness."""

import pytest

import gsched
from gsched.costmodel.params import CostParams
from gsched.generators import random_computation_graph
from gsched.methods import METHODS, Method, optimize

GRAPHS = [random_computation_graph(12, seed) for seed in range(2)]


def test_search_method_is_deterministic_and_counts_its_budget():
    first = optimize("brkga", GRAPHS, num_devices=2, budget=150, seed=3)
    again = optimize("brkga", GRAPHS, num_devices=2, budget=150, seed=3)
    assert [r["value"] for r in first.results] == [r["value"] for r in again.results]
    assert [r["evals_used"] for r in first.results] == [150, 150]
    assert first.compile_seconds >= 0 and first.wall_seconds > 0
    for graph, row in zip(GRAPHS, first.results):  # the row's fields re-score to its value
        assert row["value"] == row["peak_memory"] == max(row["device_peaks"])
        assert len(row["placement"]) == graph.num_ops


def test_heuristic_rows_are_scored_by_the_cost_model():
    outcome = optimize("gp_dfs", GRAPHS, num_devices=2, budget=1, objective="runtime",
                       cost_params=CostParams(latency=0.5, bandwidth=100.0))
    for graph, row in zip(GRAPHS, outcome.results):
        order = [item[1] for item in row["order"] if item[0] == "op"]
        rescored = gsched.evaluate_order(graph, order, row["placement"], 2, latency=0.5,
                                         bandwidth=100.0)
        assert row["value"] == rescored["runtime"]


def test_roofline_settings_reach_searches_and_heuristics():
    """SPEC §8.1's settings are not dropped between optimize and the cost model: a method's
    value equals the host evaluation of its own order with the same settings, and differs
    from the value without them."""
    roofline = CostParams(hbm_bandwidth=50.0, launch_overhead=0.25)
    for name in ("brkga", "xla_list"):
        with_roofline = optimize(name, GRAPHS, num_devices=1, budget=100, objective="runtime",
                                 cost_params=roofline)
        plain = optimize(name, GRAPHS, num_devices=1, budget=100, objective="runtime")
        for graph, row, row0 in zip(GRAPHS, with_roofline.results, plain.results):
            order = [item[1] for item in row["order"]]
            rescored = gsched.evaluate_order(graph, order, row["placement"], 1,
                                             hbm_bandwidth=50.0, launch_overhead=0.25)
            assert row["value"] == rescored["runtime"] != row0["value"]


def test_bad_settings_name_the_problem(monkeypatch):
    cases = [
        (dict(name="anneal"), "unknown method 'anneal'"),
        (dict(options={"checkpoint": "x"}), "method brkga does not take option(s) checkpoint"),
        (dict(budget=0), "budget must be a positive number"),
        (dict(objective="speed"), "unknown objective"),
        (dict(cost_params=CostParams(latency=-1.0)), "latency must be"),
        (dict(name="xla_default", budget=3), "method xla_default needs 4 evaluations"),
        (dict(graphs=[]), "no graphs"),
    ]
    for change, message in cases:
        kwargs = dict(name="brkga", graphs=GRAPHS, num_devices=1, budget=10) | change
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            optimize(kwargs.pop("name"), kwargs.pop("graphs"), **kwargs)
    monkeypatch.setitem(METHODS, "one_device", Method("test", "heuristic",
                                                      lambda: None, max_devices=1))
    with pytest.raises(ValueError, match="supports at most 1 device"):
        optimize("one_device", GRAPHS, num_devices=2, budget=1)


def test_release_compiled_frees_executables_and_recompiles_after():
    """Long runs drop compiled executables (their memory mappings, gsched.infra.resources)."""
    import jax
    import jax.numpy as jnp

    from gsched.infra import resources
    from gsched.methods import release_compiled

    traces = []

    @jax.jit
    def f(x):
        traces.append(1)
        return x + 1

    f(jnp.ones(3))
    f(jnp.ones(3))
    assert len(traces) == 1
    assert release_compiled()
    f(jnp.ones(3))
    assert len(traces) == 2  # compiled again
    if resources.map_limit() is not None:  # Linux
        assert 0 < resources.mapped_regions() < resources.map_limit()
        assert resources.release_if_crowded(fraction=0.0)
        assert not resources.release_if_crowded(fraction=1.0)


def test_seed_from_seeds_brkga_with_the_heuristics_solutions():
    """``seed_from``: the heuristics' chromosomes are BRKGA's first initial chromosomes (local
    search's and annealing's starts), their evaluations count, and the result is never worse
    than theirs; bad names are refused."""
    import jax
    import numpy as np

    from gsched.baselines.placement import PLACEMENT_BASELINES
    from gsched.core.padding import batch_graphs, bucket_for, pad_graph
    from gsched.costmodel.host import order_chromosome
    from gsched.search import brkga

    graphs = [random_computation_graph(25, seed) for seed in range(2)]
    common = dict(num_devices=2, objective="runtime", seed=3,
                  cost_params=CostParams(latency=0.5, bandwidth=100.0))
    seeded = optimize("brkga", graphs, budget=120, options={"seed_from": "metis, gp_dfs"},
                      **common)
    assert [r["evals_used"] for r in seeded.results] == [120, 120]
    assert {r["seed_from"] for r in seeded.results} == {"metis,gp_dfs"}
    bucket = bucket_for(graphs)
    seeds = np.asarray([[order_chromosome(pad_graph(g, bucket), *fn(g, 2, 3)[:2], 2)
                         for fn in (PLACEMENT_BASELINES["metis"][1], METHODS["gp_dfs"].build())]
                        for g in graphs])
    by_hand = brkga.run_batch(jax.random.PRNGKey(3), batch_graphs(graphs, bucket),
                              num_devices=2, budget=118, objective="runtime",
                              cost_params=common["cost_params"], seeds=seeds)
    assert [r["value"] for r in seeded.results] == by_hand.best_value.tolist()
    alone = {name: [r["value"] for r in optimize(name, graphs, budget=1, **common).results]
             for name in ("metis", "gp_dfs")}
    for values in alone.values():
        assert all(s["value"] <= v for s, v in zip(seeded.results, values))
    for name in ("local_search", "annealing"):  # they start from the seed
        started = optimize(name, graphs, budget=60, options={"seed_from": "metis"}, **common)
        assert [r["evals_used"] for r in started.results] == [60, 60]
        assert all(s["value"] <= v for s, v in zip(started.results, alone["metis"]))
    tuned = optimize("tuned_brkga", graphs, budget=60, options={"seed_from": "metis"},
                     fusion=True, scheduler="priority", **common)
    assert [r["evals_used"] for r in tuned.results] == [60, 60]
    cases = [("metis,metis", "distinct heuristics"), ("brkga", "'brkga' is not a heuristic"),
             ("dfs_order", "seed_from: method dfs_order supports at most 1 device"),
             ("xla_default", "the seeds of xla_default count 4 evaluation(s), the budget is 4")]
    for value, message in cases:
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
            optimize("brkga", graphs, budget=4, options={"seed_from": value}, **common)
    with pytest.raises(ValueError, match="method random does not take option"):
        optimize("random", graphs, budget=4, options={"seed_from": "metis"}, **common)
