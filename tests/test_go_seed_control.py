"""The policy-seeding control of ``eval.go_seed_control`` on one small layered graph with
untrained policies: every row runs, the seeded rows keep their seeds' values, the table."""

from __future__ import annotations

import numpy as np
import pytest

from gsched import methods
from gsched.generators import layered_graph
from gsched.harness import go_gdp, go_seed_control


@pytest.mark.parametrize("method, search", [("gdp", "brkga"), ("go", "brkga"),
                                            ("go", "local_search"), ("gdp", "annealing")])
def test_every_row_runs_and_the_seeded_runs_keep_their_seeds(method, search, tmp_path):
    graph = layered_graph(14, np.random.default_rng(3))
    tasks = go_gdp.ONE_TASKS[method][-1]  # GDP: placement; GO: all three tasks
    checkpoint = go_gdp._untrained(method, tasks, 2, tmp_path)
    budget = 140 if search == "local_search" else 30  # local search: a start per 64
    values = go_seed_control.run_graph(method, graph, checkpoint, num_devices=2, budget=budget,
                                       seeds=[0, 1], search=search)
    alone, zero, learned, control, both = go_seed_control.rows(search)
    assert list(values) == [alone, zero, learned, control, both]
    assert all(v.shape == (2,) and np.all(np.isfinite(v)) for v in values.values())
    for row in (learned, both):
        assert np.all(values[row] <= values[zero])
    scheduler, fusion = go_gdp.SETTINGS[method]
    if method == "go":  # every gene searched: the seed is METIS + greedy fusion itself
        metis = [methods.optimize("metis", [graph], num_devices=2, budget=1, seed=seed,
                                  objective="runtime", cost_params=go_gdp.cost_params(),
                                  scheduler=scheduler, fusion=fusion).results[0]["runtime"]
                 for seed in (0, 1)]
        assert np.all(values[control] <= metis)
        assert np.all(values[both] <= metis)
    text = go_seed_control.report({method: {"g": values}}, {"g": 14}, 2, budget, [0, 1],
                                  search)
    assert f"| {method.upper()} | {control} |" in text
    assert text.count(f"| {method.upper()} |") == len(values) + 1
    assert ("--search" in text) == (search != "brkga")
