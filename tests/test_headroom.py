"""The single-op peak-memory lower bound and the headroom summary (issue #15 §2)."""

import jax.numpy as jnp
import numpy as np
import pytest

from gsched import evaluate_population, pad_graph, pad_keys, random_computation_graph
from gsched.baselines.dp import exact_order, op_memory_need, peak_memory_lower_bound
from gsched.harness.headroom import (
    compare_policies,
    markdown,
    policies_markdown,
    summarize,
)
from tests.graphs import diamond


def test_need_of_the_diamond():
    # SPEC §5: a writes t0 (4); b reads t0, writes t1 (2); c reads t0, writes t2 (3), temp 5;
    # d reads t1 and t2, writes t3 (1).
    np.testing.assert_array_equal(op_memory_need(diamond()), [4, 6, 12, 6])
    assert peak_memory_lower_bound(diamond()) == 12


@pytest.mark.parametrize("num_devices", [1, 2, 3])
def test_no_schedule_is_below_the_bound(num_devices):
    for seed in range(3):
        graph = random_computation_graph(30, np.random.default_rng(seed))
        padded = pad_graph(graph)
        keys = np.random.default_rng(seed + 10).random(
            (64, graph.chromosome_length(num_devices)), dtype=np.float32)
        keys = jnp.stack([pad_keys(k, graph, padded.bucket, num_devices) for k in keys])
        peaks = evaluate_population(padded, keys, num_devices=num_devices).peak_memory
        bound = peak_memory_lower_bound(graph)
        assert float(jnp.min(peaks)) >= bound * (1 - 1e-6)


def test_the_bound_is_tight_when_one_op_dominates():
    # The exact one-device optimum of small graphs is never below the bound, and equals it on
    # the graph whose middle op reads and writes far more than everything else.
    for seed in range(4):
        graph = random_computation_graph(12, np.random.default_rng(seed))
        _, optimum = exact_order(graph)
        assert optimum >= peak_memory_lower_bound(graph)
    sizes = diamond().tensor_size.copy()
    sizes[0] = 1000.0  # t0: read by b and c, so c's need 1000 + 3 + 5 dominates
    graph = diamond().replace(tensor_size=sizes)
    assert exact_order(graph)[1] == peak_memory_lower_bound(graph) == 1008


def test_summary_by_hand():
    rows = []
    for graph, values in {"g1": (100, 120, 100, 100, 100), "g2": (80, 130, 110, 100, 95)}.items():
        for budget, value in zip((0, 200, 1000, 5000, 50_000), values):
            rows.append({"dataset": "d", "graph": graph, "num_ops": 5, "budget": budget,
                         "devices": 2, "value": value})
    (line,) = summarize(rows)
    assert line["graphs"] == 2
    assert line["optimal_5k"] == 50  # g1: 5K equals the bound
    assert line["bound_gain"] == pytest.approx((0 + 20) / 2)
    assert line["possible_2pct"] == 50
    assert line["gain_50k"] == pytest.approx((0 + 5) / 2)
    assert line["gain_50k_2pct"] == 50
    assert line["gain_200"] == pytest.approx((20 + 30) / 2)
    text = markdown(rows, "cmd")
    assert "| d | 2 | 50.0 | 10.0 | 50.0 | 2.5 | 50.0 | 25.0 |" in text
    assert "| g2 | 5 | 80 | 130 | 110 | 100 | 95 | 1.2500 |" in text


def test_compare_policies_by_hand():
    rows = []
    values = {("g1", 0): (100, 90, 95), ("g1", 1): (100, 100, 95), ("g2", 0): (200, 190, 210),
              ("g2", 1): (200, 180, 200)}  # brkga, new, regal (the shipped baseline)
    for (graph, seed), triple in values.items():
        for method, value in zip(("brkga", "new", "regal"), triple):
            rows.append({"dataset": "d", "graph": graph, "seed": seed, "method": method,
                         "value": value, "objective": "runtime"})
    regal, new = compare_policies(rows, ["regal", "new"])
    assert "vs_baseline" not in regal
    # new: gains 10, 0 (g1) and 5, 10 (g2) → per seed 7.5 and 5.
    assert new["gain"] == pytest.approx(6.25)
    assert new["gain_std"] == pytest.approx(np.std([7.5, 5], ddof=1))
    assert new["at_least"] == 100 and new["over_2pct"] == 75
    # regal: gains 5, 5 (g1), −5, 0 (g2); paired: g1 mean(5, −5) = 0, g2 mean(10, 10) = 10.
    assert new["vs_baseline"] == pytest.approx(5.0)
    assert new["vs_graphs_better"] == 1
    assert new["vs_low"] <= 5.0 <= new["vs_high"]

    table = policies_markdown(rows, ["regal", "new"])  # paired with the first label
    assert table.startswith("# REGAL runtime policies against BRKGA 5K and `regal`")
    assert "| d | new | 2 × 2 | +6.25 ± 1.77 | 100 | 75 | +5.00 [" in table
    assert "| d | regal | 2 × 2 | +1.25 ± 1.77 | 75 | 50 | — | — |" in table  # per seed 0, 2.5
