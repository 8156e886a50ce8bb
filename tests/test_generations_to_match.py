"""REGAL's generations-to-match (``gsched.harness.generations``): the generation arithmetic
by hand, and the best-so-far trace of ``guided_search_trace`` against the ``regal`` method."""

import jax
import numpy as np
import pytest

from gsched import CostParams, batch_graphs, bucket_for, random_computation_graph
from gsched.harness.generations import (
    compare,
    curves,
    evaluations_to_reach,
    generations,
    regal_generations,
)
from gsched.methods import optimize
from gsched.policies.regal.method import build_regal
from gsched.policies.regal.rollout import guided_search_trace


def test_generation_arithmetic():
    # π = 100 initial chromosomes are generation 1; each later one adds π − π_e = 90.
    assert [generations(e) for e in (1, 100, 101, 190, 191, 5000)] == [1, 1, 2, 2, 3, 56]
    assert regal_generations(400, 400) == generations(400) == 5  # 100 + 90 + 90 + 90 + 30
    assert regal_generations(401, 400) == 6 and regal_generations(500, 400) == 6
    assert regal_generations(501, 400) == 7 and regal_generations(250, 400) == 3


def test_compare_by_hand():
    brkga = np.array([9.0, 8.0, 8.0, 7.0, 7.0, 5.0] + [5.0] * 194)  # reaches 5 at eval 6
    regal = np.full(200, 6.0)
    regal[150:] = 4.0  # reaches 5 at evaluation 151, in the policy search (features: 100)
    assert evaluations_to_reach(brkga, 5.0) == 6 and evaluations_to_reach(regal, 3.0) is None
    row = compare(brkga, regal, feature_evals=100)
    assert row["matches"] and row["improvement_pct"] == pytest.approx(20.0)
    assert (row["evals_brkga"], row["evals_regal"]) == (6, 151)
    assert (row["generations_brkga"], row["generations_regal"]) == (1, 1 + 1)
    assert row["fewer_generations_pct"] == pytest.approx(-100.0)  # REGAL took twice as many
    worse = compare(regal, brkga, feature_evals=100)  # "REGAL" 5 > "BRKGA" 4: no match row
    assert not worse["matches"] and "generations_regal" not in worse


def test_trace_ends_at_the_regal_method_value():
    graphs = [random_computation_graph(10, 31), random_computation_graph(14, 32)]
    runner = build_regal()
    policy, feature_evals, _ = runner.policies["peak_memory"]
    padded = batch_graphs(graphs, bucket_for(graphs))
    result, curve = jax.jit(lambda k, g: guided_search_trace(
        k, policy, g, CostParams(), num_devices=2, budget=feature_evals + 100,
        objective="peak_memory", feature_evals=feature_evals))(jax.random.PRNGKey(0), padded)
    curve = np.asarray(curve)
    assert curve.shape == (2, feature_evals + 100)
    assert np.all(np.diff(curve, axis=1) <= 0) and np.all(np.isfinite(curve))
    np.testing.assert_array_equal(curve[:, -1], result.best_value)
    rows = optimize("regal", graphs, num_devices=2, budget=feature_evals + 100, seed=0).results
    np.testing.assert_allclose(curve[:, -1], [r["value"] for r in rows], rtol=1e-6)


def test_a_config_without_brkga_cells_is_an_error(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text("""budgets = [500]
seeds = [0]
devices = [2]
[[datasets]]
name = "tiny"
source = "synthetic"
kind = "regal"
graphs = 2
ops = [8, 10]
split = "all"
[[objectives]]
name = "peak_memory"
[[methods]]
name = "gp_dfs"
""")
    with pytest.raises(ValueError, match="no brkga cells with budget 500, seed 0"):
        curves(str(config), 500, 0, None)
